"""Helpers for the Delta tests: the commands of this package on a group of their own, run as
``stream-recovery`` runs them (a RecoveryError becomes ``Error: ...``, in flag words, and its exit
code)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click
import pytest
from click.testing import CliRunner

from recovery.cli import delta, ledger
from recovery.cli.flags import in_flag_words
from recovery.errors import RecoveryError


@click.group()
def group() -> None:
    """The Delta commands, as the top-level CLI will register them."""


for module in (delta, ledger):
    module.register(group)


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> Run:
    result = CliRunner().invoke(group, list(args))
    if isinstance(result.exception, RecoveryError):
        exc = result.exception
        return Run(int(exc.exit_code), result.stdout, result.stderr + f"Error: {in_flag_words(exc)}\n")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def cli() -> Callable[..., Run]:
    return run_cli
