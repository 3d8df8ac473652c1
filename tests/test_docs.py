"""Every command is documented: help text with an example, a row in the README and in docs/commands.md;
every command the README and the docs pages show as typed (`$ stream-recovery ...`) still parses
against the CLI; and the README stays a front door that links to pages that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from recovery.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS_DIR = ROOT / "docs"
COMMANDS_PAGE = (DOCS_DIR / "commands.md").read_text()


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
    assert f"`{name}" in COMMANDS_PAGE, f"docs/commands.md does not mention `{name}`"
    if not isinstance(command, click.Group):
        assert "Example" in command.help or "stream-recovery" in command.help, f"{name} help has no example"


# -- transcripts in the README and docs/ parse against the CLI as it is now -----------------------
# (runbooks/ pages are executed on the rig: tests/runbooks.)

DOCS = [ROOT / "README.md", *sorted(DOCS_DIR.rglob("*.md"))]

# `$ stream-recovery ARGS`, or the same run by the rig of conf/examples (docs/fleet.md).
SHOWN = re.compile(r"\$ (?:\.venv/bin/python conf/examples/rig\.py )?(stream-recovery .*)")


def shown_commands() -> list[tuple[str, str]]:
    """(where, argv line) of every ``$ stream-recovery ...`` line shown in the README and docs/."""
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            shown = SHOWN.fullmatch(line)
            if shown:
                found.append((f"{doc.relative_to(ROOT)}:{n}", shown[1].split(" #")[0]))
    return found


def test_the_transcripts_are_found() -> None:
    # The README's tour and the pages that show sessions keep showing commands: a changed prompt
    # must not make the parse test below silently check nothing.
    where = {w.rsplit(":", 1)[0] for w, _ in shown_commands()}
    for doc in ["README.md", *(f"docs/{p}.md" for p in ["getting-started", "checkpoint", "delta", "fleet"])]:
        assert doc in where, f"{doc} shows no `$ stream-recovery ...` line"


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


# -- the README is a front door; the pages behind it exist and render -----------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_door() -> None:
    lines = README.splitlines()
    assert len(lines) <= 260, f"README.md has {len(lines)} lines: move detail into a page under docs/"
    # The two set-up commands, as typed.
    assert any(line.startswith("make demo ") for line in lines)
    assert any(line.startswith("make test ") for line in lines)
    targets = LINK.findall(README)
    for target in targets:
        path = target.split("#")[0]
        assert path.startswith("docs/") and path.endswith(".md"), f"README links to {target}, not a docs page"
        assert (ROOT / path).is_file(), f"README links to {target}, which does not exist"
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS_DIR.rglob("*.md")} - {"docs/index.md"}
    missing = pages - {t.split("#")[0] for t in targets}
    assert not missing, f"README links to no page {sorted(missing)}"


def test_every_runbook_is_listed_in_the_docs() -> None:
    listing = (DOCS_DIR / "runbooks.md").read_text()
    for page in sorted((ROOT / "runbooks").glob("*.md")):
        if page.name != "README.md":
            assert f"`runbooks/{page.name}`" in listing, f"docs/runbooks.md does not list {page.name}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(ROOT).as_posix() for d in DOCS])
def test_lists_and_tables_start_a_block(doc: Path) -> None:
    # GitHub renders a list or table that follows a paragraph line directly; Python-Markdown (the
    # site) prints it as text. A blank line before it renders the same in both.
    starts = re.compile(r"([-*] |\| |\d+\. )")
    inside = re.compile(r"([-*] |\||\d+\. |\s)")
    fenced, previous = False, ""
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and starts.match(line) and previous.strip() and not inside.match(previous):
            pytest.fail(f"{doc.relative_to(ROOT)}:{n}: a list or table right after a paragraph line")
        previous = line
