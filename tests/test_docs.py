"""Every command is documented: help text with an example, and a row in the README."""

from __future__ import annotations

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
