"""The CLI starts fast and speaks in exit codes."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from recovery.cli import COMMANDS, cli
from recovery.errors import ExitCode

HEAVY = ("pyspark", "pyarrow", "pandas", "deltalake")


def test_cli_start_imports_no_heavy_library() -> None:
    code = "import sys, recovery.cli; print(','.join(m for m in " + repr(HEAVY) + " if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_help_lists_every_command_without_importing_any() -> None:
    code = "import sys; from recovery.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n"
    code += "print(sorted(m for m in sys.modules if m.startswith('recovery.') and m.count('.') >= 2))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # Only the error boundary's words (recovery.cli.flags, core.advice): no command module.
    assert done.stdout.strip().splitlines()[-1] == "['recovery.cli.flags', 'recovery.core.advice']"
    for name in COMMANDS:
        assert name in done.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_one_line_help_is_the_commands_own(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert COMMANDS[name][2] == command.get_short_help_str(limit=10_000)


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
