"""``stream-recovery offsets``: per-partition offsets, like kafka-get-offsets but complete.

Also holds the options only the Kafka commands take (``--time``, ``--exclude-internal-topics``),
which ``read-to-end`` (:mod:`recovery.cli.read`) shares.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from recovery.cli import render
from recovery.cli.options import (
    isolation_option,
    kafka_options,
    no_match_option,
    output_option,
    topic_option,
)
from recovery.errors import OffsetSpecError
from recovery.kafka.config import KafkaConfig
from recovery.kafka.specs import TimeSpec, parse_time
from recovery.model import Isolation, NoMatch, TopicSelection

__all__ = ["TimeSpecType", "exclude_internal_option", "offsets_cmd", "selection_from"]

F = TypeVar("F", bound=Callable[..., Any])


class TimeSpecType(click.ParamType[TimeSpec]):
    """``earliest|latest|max-timestamp|-2|-1|-3|<epoch ms>|<ISO-8601>`` as a :class:`TimeSpec`."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> TimeSpec:
        if isinstance(value, TimeSpec):
            return value
        try:
            return parse_time(str(value))
        except OffsetSpecError as exc:
            self.fail(str(exc), param, ctx)


def exclude_internal_option(func: F) -> F:
    """``--exclude-internal-topics``: leave internal topics out of a regex selection."""
    return click.option(
        "--exclude-internal-topics",
        is_flag=True,
        help="Leave out internal topics (__consumer_offsets, __transaction_state).",
    )(func)


def selection_from(topics: TopicSelection | None, exclude_internal: bool) -> TopicSelection:
    """The ``--topic`` selection (required by the Kafka commands), without internal topics if asked."""
    if topics is None:
        raise click.UsageError("give the partitions to look at with --topic SPEC (e.g. --topic orders)")
    return dataclasses.replace(topics, exclude_internal=exclude_internal) if exclude_internal else topics


@click.command(name="offsets")
@kafka_options
@topic_option(alias=True)
@exclude_internal_option
@click.option(
    "--time",
    "time_spec",
    type=TimeSpecType(),
    default="latest",
    show_default=True,
    help="earliest (-2) | latest (-1) | max-timestamp (-3) | epoch ms | ISO-8601 (UTC unless it has a zone).",
)
@no_match_option(
    "For --time T or max-timestamp: the offset of a partition with no record at or after T "
    "(fail: exit 1, print nothing).",
    default=NoMatch.FAIL,
)
@isolation_option("Whose 'latest' the OFFSET column shows: high watermark or last stable offset.")
@output_option("table", "json", "csv")
def offsets_cmd(
    kafka: KafkaConfig,
    topics: TopicSelection | None,
    exclude_internal_topics: bool,
    time_spec: TimeSpec,
    no_match: NoMatch,
    isolation: Isolation,
    output: str,
) -> None:
    """One line per partition: log start offset, high watermark, last stable offset, and the
    offset --time maps to (with the timestamp of that record).

    The last stable offset is asked for only under --isolation read_committed (it costs one more
    request per broker); otherwise LAST-STABLE is empty and last_stable_offset null.

    For a time T the offset is the first one whose record timestamp is >= T (KIP-79). A partition
    without such a record is never left out: --no-match says what to use (latest or earliest), and
    NOTE / no_match says which partitions fell back; with --no-match fail (the default) the command
    fails (exit 1) and prints nothing. Partitions named explicitly that do not exist are listed
    as TOPIC_GONE / PARTITION_GONE (exit 1).

    \b
    JSON (--output json) is a list of objects, one per partition, sorted by topic and partition;
    CSV (--output csv) has the same keys as columns:
      topic, partition      the partition
      topic_id              KIP-516 topic id (a recreated topic gets a new one); null if gone
      status                OK | TOPIC_GONE | PARTITION_GONE
      log_start_offset      earliest offset still readable (ListOffsets -2)
      high_watermark        end for read_uncommitted readers (ListOffsets -1)
      last_stable_offset    end for read_committed readers (-1 under read_committed); only
                            asked for under --isolation read_committed, else null (it costs
                            one more request per broker)
      time                  the --time asked for (earliest, latest, max-timestamp or epoch ms)
      offset                the offset --time maps to
      timestamp             epoch ms of the record at offset (time lookups only), else null
      no_match              null, or the --no-match policy used because no record matched

    \b
    Example:
      stream-recovery offsets -b localhost:9092 --topic 'orders:0-3' \\
          --time 2026-11-22T06:00:00Z --no-match latest --output json
    """
    selection = selection_from(topics, exclude_internal_topics)
    from recovery.kafka.admin import admin_for

    admin_for(kafka)  # the shared client connects in the background while the rest is imported
    from recovery.kafka.offsets import offset_table
    from recovery.report.offsets import OFFSETS_COLUMNS, offset_rows

    with render.waiting("asking Kafka for the offsets"):
        table = offset_table(kafka, selection, time_spec, isolation=isolation, no_match=no_match)
    render.emit(offset_rows(table, output), output, OFFSETS_COLUMNS)
    sys.exit(table.exit_code)
