"""Every command is documented: help text with an example and a row in the README; and every command
the README and docs/ show as typed (`$ stream-recovery ...`) still parses against the CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest

from recovery.cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix}{name} ")
    return found


@pytest.mark.parametrize(("name", "command"), commands(cli), ids=[n for n, _ in commands(cli)])
def test_command_has_help_and_is_in_the_readme(name: str, command: click.Command) -> None:
    assert command.help and command.help.strip(), f"{name} has no help"
    assert f"`{name}" in README, f"README does not mention `{name}`"
    if not isinstance(command, click.Group):
        assert "Example" in command.help or "stream-recovery" in command.help, f"{name} help has no example"


# -- transcripts in the README and docs/ parse against the CLI as it is now -----------------------
# (runbooks/ pages are executed on the rig: tests/runbooks.)

DOCS = [
    Path(__file__).resolve().parents[1] / "README.md",
    *sorted((Path(__file__).resolve().parents[1] / "docs").glob("*.md")),
]


def shown_commands() -> list[tuple[str, str]]:
    """(where, argv line) of every ``$ stream-recovery ...`` line shown in the README and docs/."""
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("$ stream-recovery "):
                found.append((f"{doc.name}:{n}", line[2:].split(" #")[0]))
    return found


def resolve(argv: list[str]) -> tuple[str, click.Command, list[str]]:
    """Walk the command groups: (``checkpoint restore``, its command, the remaining arguments)."""
    command: click.Command = cli
    path: list[str] = []
    while isinstance(command, click.Group) and argv and not argv[0].startswith("-"):
        found = command.get_command(click.Context(command), argv[0])
        assert found is not None, f"no command `{' '.join([*path, argv[0]])}`"
        command, path, argv = found, [*path, argv[0]], argv[1:]
    return " ".join(path), command, argv


@pytest.mark.parametrize(("where", "line"), shown_commands(), ids=[w for w, _ in shown_commands()])
def test_commands_shown_in_the_docs_parse(where: str, line: str) -> None:
    name, command, args = resolve(shlex.split(line)[1:])
    try:
        command.make_context(f"stream-recovery {name}", args)
    except click.UsageError as exc:
        pytest.fail(f"{where}: `{line}`: {exc.format_message()}")
