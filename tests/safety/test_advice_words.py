"""Advice, two audiences (issue 28): the library advises in Python (`force=True`, a call of its own
functions), the CLI prints the same advice as its flags and command lines, everywhere it prints:
the Error: line, % lines, table cells and JSON. A job says the CLI's commands without loading it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from chk_builder import checkpoint_files, tree, write_checkpoint
from click.testing import CliRunner
from stopped import stopped

from recovery import recover_interrupted
from recovery.cli import cli, render
from recovery.cli.flags import COMMANDS, FLAGS, in_cli_words
from recovery.core.advice import in_words
from recovery.errors import ExitCode, StateError

ELSEWHERE = {
    "format": 1,
    "token": "t",
    "command": "repair_checkpoint",
    "host": "another-host.example",
    "pid": 4242,
    "started": "2026-01-01T00:00:00Z",
    "proc_start": None,
    "phase": "backup",
    "backup_id": None,
    "backup_root": None,
    "files": [],
}


@pytest.fixture
def held_elsewhere(tmp_path: Path) -> Path:
    """A checkpoint whose lock record names a process on another host (it cannot be checked)."""
    files = checkpoint_files(partitions=1, batches=1, committed=1)
    root = stopped(write_checkpoint(tmp_path / "chk", files))
    (root / "_recovery").mkdir()
    (root / "_recovery/intent.json").write_text(json.dumps(ELSEWHERE))
    return root


def test_a_python_caller_is_told_the_call_and_a_cli_user_the_command(held_elsewhere: Path) -> None:
    before = tree(held_elsewhere)
    with pytest.raises(StateError) as refused:
        recover_interrupted(str(held_elsewhere), execute=True)
    message = str(refused.value)
    assert message.startswith(f"{held_elsewhere}: `repair_checkpoint` (host another-host.example, pid 4242")
    assert message.endswith(f"`recover_interrupted({str(held_elsewhere)!r}, take_over=True, execute=True)`")

    argv = [sys.executable, "-m", "recovery", "checkpoint", "recover", str(held_elsewhere), "--execute"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == ExitCode.ACTION_NEEDED and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"Error: {held_elsewhere}: `stream-recovery repair` (host another-host.example")
    assert line.endswith(f"`stream-recovery checkpoint recover {held_elsewhere} --take-over --execute`")
    assert "take_over" not in line and "recover_interrupted" not in line
    assert tree(held_elsewhere) == before


def test_every_way_the_cli_prints_says_the_advice_in_flags(capsys: pytest.CaptureFixture[str]) -> None:
    advice = "Stop it first, or pass `force=True` if it is stopped"
    said = "Stop it first, or pass --force if it is stopped"
    render.note(advice)
    render.warn(advice)
    assert capsys.readouterr().err == f"% {said}\n% warning: {said}\n"
    render.emit([{"detail": advice, "n": 1}], "table", [("detail", "DETAIL"), ("n", "N")])
    assert capsys.readouterr().out.splitlines()[1] == f"{said}  1"
    render.emit([{"detail": advice, "n": 1}], "csv", [])
    assert capsys.readouterr().out.splitlines()[1] == f'"{said}",1'  # quoted: it holds a comma
    render.emit_json({"notes": [advice, 'a "quoted" `sink`'], "other": "no `advice` here"})
    body = json.loads(capsys.readouterr().out)
    assert body == {"notes": [said, 'a "quoted" --sink'], "other": "no `advice` here"}
    # escapes around the advice, in the strings and between them, survive
    tricky = {"a": ['\\"`force=True`\\', '"`sink`"', "plain \\"], "`b`": "`backup_dir`", "c": 1}
    render.emit_json(tricky)
    assert json.loads(capsys.readouterr().out) == {
        "a": ['\\"--force\\', '"--sink"', "plain \\"],
        "`b`": "--backup-dir",
        "c": 1,
    }


@pytest.mark.parametrize(
    ("python", "cli"),
    [
        ("`backup_dir`", "--backup-dir"),
        ("`deadline_s`", "--deadline"),
        ("`accept_sink_skip=True`", "--accept-sink-skip"),
        ("`repair_checkpoint(execute=True)`", "`stream-recovery repair --execute`"),
        ("`restore_backup`", "`stream-recovery checkpoint restore`"),
        (
            "`restore_backup('/c d', backup_id='20261127T1', backup_dir='/b', execute=True)`",
            "`stream-recovery checkpoint restore '/c d' --backup 20261127T1 --backup-dir /b --execute`",
        ),
        (
            "`repair_delta_source('/chk', tables={'0': '/t', '1': '/u'})`",
            "`stream-recovery delta-source repair /chk --table 0=/t --table 1=/u`",
        ),
        ("`repair_ledger(conf, kafka)`", "`stream-recovery ledger repair`"),
        (
            "`recover_interrupted(..., take_over=True)`",
            "`stream-recovery checkpoint recover ... --take-over`",
        ),
        ("`starting_offsets`", "`stream-recovery starting-offsets`"),
    ],
)
def test_the_cli_says_each_piece_of_advice_as_a_command_line(python: str, cli: str) -> None:
    assert in_cli_words(f"run {python} now") == f"run {cli} now"


@pytest.mark.parametrize(
    "text",
    [
        "`KAFKA_DATA_LOSS`",  # quoted, but no parameter or function of the library
        "`force=maybe()`",  # a value a command line cannot say
        "`unknown_function(execute=True)`",
        "`repair_checkpoint(surprise=True)`",  # a parameter with no flag: said as Python, not half-said
        "`not python (`",
        "no quotes at all: force=True",
    ],
)
def test_what_is_not_the_librarys_advice_stays_as_it_is(text: str) -> None:
    assert in_cli_words(text) == text


def test_one_flag_per_parameter_and_each_command_is_the_cli_s() -> None:
    assert all(flag.startswith("-") for flag in FLAGS.values())
    listed = {" ".join(c.split()[1:3]) for c in COMMANDS.values()}
    runner = CliRunner()
    for command in listed:
        done = runner.invoke(cli, [*command.split(), "--help"])
        assert done.exit_code == 0, (command, done.output)


def test_a_job_says_advice_in_its_own_words() -> None:
    said = in_words(
        "Run `plan_repair('/chk', kafka)` to see the repair plan; or pass `force=True`",
        {"bootstrap_servers": "--bootstrap-server"},
        {"plan_repair": "stream-recovery repair"},
    )
    # the job has no --force: that advice stays Python, the command is the CLI's
    assert said == "Run `stream-recovery repair /chk` to see the repair plan; or pass `force=True`"
