"""The CLI starts fast and speaks in exit codes."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from recovery.cli import cli
from recovery.errors import ExitCode

HEAVY = ("pyspark", "pyarrow", "pandas", "deltalake")


def test_cli_start_imports_no_heavy_library() -> None:
    code = "import sys, recovery.cli; print(','.join(m for m in " + repr(HEAVY) + " if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_help_and_version_exit_zero() -> None:
    for args in (["--help"], ["--version"]):
        done = subprocess.run(
            [sys.executable, "-m", "recovery", *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == ExitCode.OK, done.stderr
    assert "Exit codes:" in CliRunner().invoke(cli, ["--help"]).output


def test_unknown_command_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "recovery", "no-such-command"], capture_output=True, text=True, check=False
    )
    assert done.returncode == ExitCode.INVALID_INPUT
    assert "No such command 'no-such-command'" in done.stderr
    assert done.stdout == ""
