"""Rendering of result rows for the Kafka commands: an aligned table, JSON or CSV on stdout.

Every command builds a list of dicts with the documented keys (the JSON and CSV form) and, for the
table, picks columns and headers from them; so the three outputs can't disagree.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

import click

from recovery.errors import OffsetSpecError
from recovery.kafka.specs import TimeSpec, iso_utc, parse_time, parse_topic_partitions, topic_regex


def iso_ms(ms: int | None) -> str:
    """``2026-11-22T06:00:00.000Z`` for a Unix time in milliseconds; empty for None."""
    return "" if ms is None else iso_utc(ms)


def show(value: Any) -> str:
    return "" if value is None else str(value)


def emit(
    rows: Sequence[Mapping[str, Any]],
    fmt: str,
    columns: Sequence[tuple[str, str]],
) -> None:
    """Print ``rows`` as ``fmt`` (table|json|csv). ``columns`` are (key, header) pairs for the table."""
    if fmt == "json":
        click.echo(json.dumps(list(rows), indent=2))
    elif fmt == "csv":
        buffer = io.StringIO()
        keys = list(rows[0]) if rows else [key for key, _ in columns]
        writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: show(v) for k, v in row.items()})
        click.echo(buffer.getvalue(), nl=False)
    else:
        cells = [[header for _, header in columns]]
        cells += [[show(row.get(key)) for key, _ in columns] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        for line in cells:
            parts = [
                cell.rjust(width) if key in _NUMERIC else cell.ljust(width)
                for cell, width, (key, _) in zip(line, widths, columns, strict=True)
            ]
            click.echo("  ".join(parts).rstrip())


_NUMERIC = {
    "partition",
    "log_start_offset",
    "high_watermark",
    "last_stable_offset",
    "offset",
    "committed_offset",
    "lag",
    "records",
    "start_offset",
    "end_offset",
    "skipped_offsets",
}


class TimeSpecType(click.ParamType):
    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> TimeSpec:
        if isinstance(value, TimeSpec):
            return value
        try:
            return parse_time(str(value))
        except OffsetSpecError as exc:
            self.fail(str(exc), param, ctx)


def selection_from(topic: str | None, topic_partitions: str | None, exclude_internal: bool) -> Any:
    """``--topic REGEX`` or ``--topic-partitions SPEC`` (exactly one) as a TopicSelection."""
    if (topic is None) == (topic_partitions is None):
        raise click.UsageError("give exactly one of --topic REGEX or --topic-partitions SPEC")
    try:
        if topic is not None:
            return topic_regex(topic, exclude_internal=exclude_internal)
        assert topic_partitions is not None
        return parse_topic_partitions(topic_partitions, exclude_internal=exclude_internal)
    except OffsetSpecError as exc:
        raise click.BadParameter(str(exc)) from exc


def selection_options(func: Any) -> Any:
    """``--topic REGEX | --topic-partitions SPEC`` and ``--exclude-internal-topics``."""
    func = click.option(
        "--exclude-internal-topics",
        is_flag=True,
        help="Leave out internal topics (__consumer_offsets, __transaction_state).",
    )(func)
    func = click.option(
        "--topic-partitions",
        "topic_partitions",
        metavar="SPEC",
        help="TOPIC_REGEX[:N|N-M|N-|-M],... (upper bound exclusive) or TOPIC:0,1,4.",
    )(func)
    return click.option(
        "-t", "--topic", "topic", metavar="REGEX", help="Topics whose whole name matches REGEX."
    )(func)
