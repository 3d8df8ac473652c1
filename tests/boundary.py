"""The CLI behind its real error boundary (``recovery.cli.run``), as an operator runs it: a
RecoveryError becomes one ``Error: ...`` line on stderr and its exit code. For
``CliRunner().invoke(boundary, [...])``; imported as ``from boundary import boundary`` (pytest puts
tests/ on the path for its conftest)."""

from __future__ import annotations

import click

from recovery.cli import cli, run


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def boundary(argv: tuple[str, ...]) -> None:
    run(cli, list(argv))
