"""``stream-recovery offsets``: per-partition offsets, like kafka-get-offsets but complete."""

from __future__ import annotations

import sys

import click

from recovery.cli import render
from recovery.cli.options import (
    TimeSpecType,
    exclude_internal_option,
    isolation_option,
    kafka_options,
    no_match_option,
    output_option,
    selection_from,
    topic_option,
)
from recovery.cli.report.offsets import OFFSETS_COLUMNS, offset_rows
from recovery.core.model import Isolation, NoMatch, TopicSelection
from recovery.core.specs import TimeSpec
from recovery.kafka.config import KafkaConfig
from recovery.kafka.offsets import offset_table


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
      log_start_offset      earliest offset still readable (ListOffsets -2); with tiered
                            storage, the whole log's (remote segments included), as Spark
                            reads it
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
    with render.waiting("asking Kafka for the offsets"):
        table = offset_table(kafka, selection, time_spec, isolation=isolation, no_match=no_match)
    render.emit(offset_rows(table, output), output, OFFSETS_COLUMNS)
    sys.exit(table.exit_code)
