"""Helpers for the fleet tests: TOML files, and the CLI behind its real error boundary."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType

import click
from click.testing import CliRunner, Result
from example_rig import RIG

from recovery.cli import run
from recovery.cli.fleet import register


def _commands() -> click.Group:
    group = click.Group("stream-recovery")
    register(group)
    return group


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _boundary(argv: tuple[str, ...]) -> None:
    # recovery.cli.run: a RecoveryError becomes "Error: <message>" on stderr and its exit code.
    run(_commands(), list(argv))


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    """``stream-recovery conf|fleet ...`` as an operator runs it: stdout, stderr and the exit code."""
    return CliRunner().invoke(_boundary, list(args), env=env)


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def example_rig() -> ModuleType:
    """``conf/examples/rig.py`` as a module: the examples' own rig set-up and checkpoint writer."""
    return RIG
