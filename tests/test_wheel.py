"""The wheel as a user installs it: ``pip install stream-recovery`` into a fresh virtualenv gives the
Kafka commands without deltalake and pyarrow (the ``delta`` extra), and a Delta command then says
in one line what to install (exit 2).

The wheel is built from a copy of the sources (nothing is written into the checkout) and installed
with its dependencies from the package index, as a user would. Building and installing take seconds
and no JVM (``slow``); the commands that talk to Kafka use the rig's broker (``integration``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from recovery.local import topics

# tests/checkpoint: a checkpoint as Spark writes it
sys.path.insert(0, str(Path(__file__).resolve().parent / "checkpoint"))
from chk_builder import checkpoint_files, write_checkpoint
from test_structure import EVERY_HELP  # run here by the installed interpreter

ROOT = Path(__file__).resolve().parents[1]
NOT_INSTALLED = (
    "Error: deltalake is not installed; Delta tables need the Delta extra: "
    "pip install 'stream-recovery[delta]'\n"
)


@dataclass(frozen=True)
class Venv:
    root: Path
    cwd: Path  # not the checkout: its recovery/ would shadow the installed package

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.root / "bin/python"), "-c", code])

    def stream_recovery(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.root / "bin/stream-recovery"), *args])

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        return subprocess.run(argv, capture_output=True, text=True, cwd=self.cwd, env=env, timeout=300)


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    tmp = tmp_path_factory.mktemp("wheel")
    # The project's top-level files (pyproject.toml, README.md ...) and the package: what the wheel is
    # built from. setuptools writes build/ and *.egg-info beside the sources.
    source = tmp / "source"
    source.mkdir()
    for path in ROOT.iterdir():
        if path.is_file():
            shutil.copy2(path, source / path.name)
    shutil.copytree(ROOT / "recovery", source / "recovery", ignore=shutil.ignore_patterns("__pycache__"))
    _pip("wheel", "--no-deps", "-w", str(tmp / "dist"), str(source))
    [wheel] = (tmp / "dist").glob("stream_recovery-*.whl")
    # No system site packages (venv's default), so nothing of the test's own environment is visible.
    # pip comes from the test's environment (--python) rather than ensurepip; --no-compile skips
    # byte-compiling the dependencies, which the commands below do on import anyway.
    root = tmp / "venv"
    done = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], capture_output=True)
    assert done.returncode == 0, done.stderr
    _pip("--python", str(root / "bin/python"), "install", "--no-compile", str(wheel))
    (tmp / "work").mkdir()
    return Venv(root, tmp / "work")


@pytest.mark.slow
def test_the_wheel_installs_neither_deltalake_nor_pyarrow(venv: Venv) -> None:
    code = (
        "import importlib.metadata, importlib.util, json, recovery\n"
        "print(recovery.__file__)\n"
        "print(json.dumps([m for m in ('deltalake', 'pyarrow') if importlib.util.find_spec(m)]))\n"
        "print(json.dumps(importlib.metadata.requires('stream-recovery')))\n"
    )
    done = venv.python(code)
    assert done.returncode == 0, done.stderr
    where, found, requires = done.stdout.splitlines()
    assert Path(where).is_relative_to(venv.root), where  # the installed package, not the checkout
    assert json.loads(found) == []
    # ... and the wheel offers them as the `delta` extra: `pip install 'stream-recovery[delta]'`.
    delta = {r.split(";")[0] for r in json.loads(requires) if 'extra == "delta"' in r}
    assert {re.split(r"[<>=!~ \[]", r)[0] for r in delta} == {"deltalake", "pyarrow"}


@pytest.mark.slow
def test_every_help_works_without_the_delta_extra(venv: Venv) -> None:
    done = venv.stream_recovery("--help")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("Usage: stream-recovery [OPTIONS] COMMAND [ARGS]...\n")
    walked = venv.python(EVERY_HELP)
    assert walked.returncode == 0, walked.stderr
    commands = walked.stdout.splitlines()
    assert {"delta-source validate", "ledger show", "validate", "repair"} <= set(commands)


@pytest.mark.integration
def test_a_kafka_only_validate_runs_without_the_delta_extra(
    venv: Venv, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int], tmp_path: Path
) -> None:
    # Records older than the checkpoint's batch (chk_builder's batchTimestampMs): no recreation.
    # Retention off: the rig checks retention every second and would delete records this old.
    topic = new_topic(2, config={"retention.ms": "-1"})
    produce(topic, 40, partitions=2, timestamp_ms=1_700_000_000_000)  # offsets 0-19 in each partition
    topics.delete_records(bootstrap, topic, {0: 15})
    chk = write_checkpoint(
        tmp_path / "chk", checkpoint_files(topic=topic, partitions=2, batches=1, committed=1)
    )

    done = venv.stream_recovery("validate", str(chk), "-b", bootstrap, "--output", "json")

    assert done.returncode == 1, done.stderr
    rows = [(p["partition"], p["verdict"], p["records_lost"]) for p in json.loads(done.stdout)["partitions"]]
    assert rows == [(0, "BELOW_LOG_START", 5), (1, "OK", 0)]


@pytest.mark.integration
@pytest.mark.parametrize("command", ["ledger show", "validate --sink"])
def test_a_delta_command_names_the_extra_to_install(
    venv: Venv, bootstrap: str, new_topic: Callable[..., str], command: str, tmp_path: Path
) -> None:
    chk = write_checkpoint(
        tmp_path / "chk", checkpoint_files(topic=new_topic(1), partitions=1, batches=1, committed=1)
    )
    args = {
        "ledger show": ["ledger", "show", str(tmp_path / "ledger")],
        "validate --sink": ["validate", str(chk), "-b", bootstrap, "--sink", str(tmp_path / "sink")],
    }[command]
    before = sorted(tmp_path.rglob("*"))

    done = venv.stream_recovery(*args)

    assert (done.returncode, done.stdout, done.stderr) == (2, "", NOT_INSTALLED)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no table created
