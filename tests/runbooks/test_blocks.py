"""The runbooks cannot drift (fast lane, no JVM): every command shown on a page is in a console block
the runbook tests execute, every page has an incident that runs it, and every command parses
against the CLI as it is now (an option renamed fails here, before the rig runs the page)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from incidents import INCIDENTS
from transcript import (
    PROGRAM,
    RUNBOOKS,
    Command,
    Hook,
    match_promised,
    parse_console,
    parse_page,
    split_comment,
    substitute,
    unsubstitute,
)

from recovery.cli import cli

PAGES = sorted(p.name for p in RUNBOOKS.glob("*.md") if p.name != "README.md")
FENCE = re.compile(r"^\s*(```|~~~)(\S*)")


def blocks(page: Path) -> list[Command]:
    return [c for e in parse_page(page) if isinstance(e.parsed, list) for c in e.parsed]


def stray_commands(text: str) -> list[str]:
    """Lines that show a command outside a console block: an indented code line, a line of a fence
    in another language, or a ``$`` line anywhere but a console block."""
    found, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if opened:
            fence = None if fence is not None else opened.group(2)
            continue
        if fence == "console":
            continue
        shown = line.strip().removeprefix("$ ")
        in_code = fence is not None or line.startswith("    ")
        if (shown.startswith(f"{PROGRAM} ") and in_code) or line.lstrip().startswith("$ "):
            found.append(f"line {n}: {line.strip()}")
    return found


def test_every_page_has_an_incident_that_runs_it() -> None:
    assert sorted(INCIDENTS) == PAGES


@pytest.mark.parametrize("page", PAGES)
def test_every_command_on_the_page_is_in_an_executed_block(page: str) -> None:
    text = (RUNBOOKS / page).read_text()
    assert stray_commands(text) == [], f"{page}: show commands in ```console blocks (`$ stream-recovery ...`)"
    assert blocks(RUNBOOKS / page), f"{page} shows no command"


def test_the_index_has_no_command_and_links_every_page() -> None:
    index = (RUNBOOKS / "README.md").read_text()
    assert stray_commands(index) == []
    assert not [e for e in parse_page(RUNBOOKS / "README.md")]
    assert [p for p in PAGES if f"({p})" not in index] == []


def resolve(argv: list[str]) -> tuple[str, click.Command, list[str]]:
    command: click.Command = cli
    path: list[str] = []
    while isinstance(command, click.Group) and argv and not argv[0].startswith("-"):
        found = command.get_command(click.Context(command), argv[0])
        assert found is not None, f"no command `{' '.join([*path, argv[0]])}`"
        command, path, argv = found, [*path, argv[0]], argv[1:]
    return " ".join(path), command, argv


@pytest.mark.parametrize("page", PAGES)
def test_every_command_parses_against_the_cli(page: str) -> None:
    for command in blocks(RUNBOOKS / page):
        argv = shlex.split(substitute(command.line, {"<id>": "20260101T000000000000Z"}))
        name, found, args = resolve(argv[1:])
        try:
            found.make_context(f"{PROGRAM} {name}", args)
        except click.UsageError as exc:
            pytest.fail(f"{page} line {command.lineno}: `{command.line}`: {exc.format_message()}")


# -- the transcript format ------------------------------------------------------------------------


def test_a_console_block_parses_into_commands_exit_codes_and_promised_lines() -> None:
    source = (
        "$ stream-recovery validate /chk/orders -b kafka:9092   # exit 1: action needed\n"
        "orders  0  100  110  BELOW_LOG_START  10\n"
        "\n"
        "$ stream-recovery checkpoint restore /chk/orders \\\n"
        "    --backup <id> --execute\n"
    )
    assert parse_console(source, 10) == [
        Command(
            "stream-recovery validate /chk/orders -b kafka:9092",
            1,
            ("orders  0  100  110  BELOW_LOG_START  10",),
            10,
        ),
        Command("stream-recovery checkpoint restore /chk/orders --backup <id> --execute", 0, (), 13),
    ]


@pytest.mark.parametrize(
    "source",
    ["ls /chk/orders\n", "$ kafka-consumer-groups --describe --group billing\n", "$ rm -rf /chk/orders\n"],
)
def test_only_our_commands_run_and_output_needs_a_command(source: str) -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse_console(source)


def test_comments_split_outside_quotes_only() -> None:
    assert split_comment("stream-recovery x '#not' a  # exit 2") == ("stream-recovery x '#not' a", "exit 2")
    assert split_comment("stream-recovery x a#b") == ("stream-recovery x a#b", "")


def test_promised_lines_match_in_order_with_wildcards_and_captures() -> None:
    output = "SOURCE  FILE  FROM\n0       offsets/0   2\n% rewrote offsets/0; originals backed up as 2026X\n"
    captures, failure = match_promised(("0 offsets/0 2", "% rewrote … backed up as <id>"), output)
    assert (captures, failure) == ({"id": "2026X"}, None)
    _, failure = match_promised(("% rewrote …", "0 offsets/0 2"), output)
    assert failure is not None and "0 offsets/0 2" in failure
    _, failure = match_promised(("0 offsets/0 3",), output)
    assert failure is not None
    assert match_promised(("SOURCE FILE …",), "SOURCE  FILE\n") == ({}, None)
    assert match_promised(("SOURCE FILE …",), "SOURCE  FILE  FROM  TO\n") == ({}, None)


def test_placeholders_map_whole_words_both_ways() -> None:
    values = {"/chk/orders": "/tmp/t/chk", "orders": "orders-x1", "kafka:9092": "127.0.0.1:5", "<id>": "B1"}
    line = "stream-recovery offsets -b kafka:9092 --topic orders /chk/orders --backup <id> /lake/orders_copy"
    assert substitute(line, values) == (
        "stream-recovery offsets -b 127.0.0.1:5 --topic orders-x1 /tmp/t/chk --backup B1 /lake/orders_copy"
    )
    assert substitute('{"orders":{"0":1}}', values) == '{"orders-x1":{"0":1}}'
    assert unsubstitute("orders-x1-1 in /tmp/t/chk/offsets/0 via 127.0.0.1:5", values.items()) == (
        "orders-1 in /chk/orders/offsets/0 via kafka:9092"
    )


def test_hidden_steps_parse_from_html_comments(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n<!-- runbook-test: fails KAFKA_DATA_LOSS.X -->\n\n<!-- runbook-test: restart -->\n"
    )
    assert [e.parsed for e in parse_page(page)] == [
        Hook("fails", ("KAFKA_DATA_LOSS.X",)),
        Hook("restart", ()),
    ]


def test_a_command_that_drifted_from_the_cli_is_caught() -> None:
    name, command, args = resolve(["repair", "/chk/orders", "-b", "kafka:9092", "--on-beyond", "oldest"])
    assert name == "repair"
    with pytest.raises(click.UsageError):
        command.make_context(f"{PROGRAM} {name}", args)
    with pytest.raises(AssertionError, match="no command `checkpoint undo`"):
        resolve(["checkpoint", "undo", "/chk/orders"])
