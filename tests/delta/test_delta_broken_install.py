"""A Delta library that is installed but cannot be imported (a shared library or symbol the loader
cannot find, a submodule a partial uninstall left out): a Delta command says so in one line, with
the import error's text and the reinstall to run, and exits 2.

The broken install is real: the command runs as a user runs it, in a process whose PYTHONPATH puts
first a ``deltalake`` or ``pyarrow`` package whose import fails as such an install fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recovery.delta.ledger_table import create_ledger

PROGRAM = Path(sys.executable).with_name("stream-recovery")
REINSTALL = "reinstall the Delta extra: pip install --force-reinstall 'stream-recovery[delta]'"


def stream_recovery(broken: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {"PYTHONPATH": str(broken), "NO_COLOR": "1"}
    return subprocess.run([str(PROGRAM), *args], capture_output=True, text=True, env=env, timeout=120)


def broken_package(root: Path, name: str, init: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(init)
    return root


@pytest.mark.parametrize(
    ("init", "reason"),
    [
        (
            'raise ImportError("/usr/lib/libdelta_kernel.so: undefined symbol: kernel_scan_new")\n',
            "/usr/lib/libdelta_kernel.so: undefined symbol: kernel_scan_new",
        ),
        (
            "from deltalake._internal import DeltaError\n",  # the compiled module is gone
            "No module named 'deltalake._internal'",
        ),
    ],
    ids=["missing-symbol", "missing-submodule"],
)
def test_a_broken_deltalake_is_one_line_and_exit_2(tmp_path: Path, init: str, reason: str) -> None:
    broken = broken_package(tmp_path / "site", "deltalake", init)
    done = stream_recovery(broken, "ledger", "show", str(tmp_path / "ledger"), "--pipeline", "orders")
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"Error: deltalake cannot be imported ({reason}): {REINSTALL}\n"
    assert done.stdout == ""


def test_a_broken_pyarrow_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """deltalake itself loads; the ledger's rows are read through pyarrow, which cannot be loaded."""
    table = str(tmp_path / "ledger")
    create_ledger(table)
    reason = "libarrow.so.1900: cannot open shared object file: No such file or directory"
    broken = broken_package(
        tmp_path / "site", "pyarrow", f'raise ImportError("{reason}", name="pyarrow.lib")\n'
    )
    done = stream_recovery(broken, "ledger", "show", table, "--pipeline", "orders")
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"Error: pyarrow cannot be imported ({reason}): {REINSTALL}\n"
    assert done.stdout == ""
