"""``stream-recovery offsets``: per-partition offsets, like kafka-get-offsets but complete.

Also registers ``read-to-end`` (:mod:`recovery.cli.read`) and the ``group`` commands
(:mod:`recovery.cli.groups`).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from recovery.cli.options import isolation_option, kafka_options, output_option
from recovery.cli.tables import TimeSpecType, emit, iso_ms, selection_from, selection_options
from recovery.errors import ExitCode

OFFSETS_JSON_KEYS = (
    "topic",
    "partition",
    "topic_id",
    "status",
    "log_start_offset",
    "high_watermark",
    "last_stable_offset",
    "time",
    "offset",
    "timestamp",
    "no_match",
)

_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("log_start_offset", "LOG-START"),
    ("high_watermark", "HIGH-WATERMARK"),
    ("last_stable_offset", "LAST-STABLE"),
    ("offset", "OFFSET"),
    ("timestamp_iso", "TIMESTAMP"),
    ("note", "NOTE"),
)


@click.command(name="offsets")
@kafka_options
@selection_options
@click.option(
    "--time",
    "time_spec",
    type=TimeSpecType(),
    default="latest",
    show_default=True,
    help="earliest (-2) | latest (-1) | max-timestamp (-3) | epoch ms | ISO-8601 (UTC unless it has a zone).",
)
@click.option(
    "--no-match",
    type=click.Choice(["latest", "earliest", "fail"]),
    default="fail",
    show_default=True,
    help="For --time T or max-timestamp: the offset of a partition with no record at or after T.",
)
@isolation_option("Whose 'latest' the OFFSET column shows: high watermark or last stable offset.")
@output_option("table", "json", "csv")
def offsets_cmd(
    kafka: Any,
    topic: str | None,
    topic_partitions: str | None,
    exclude_internal_topics: bool,
    time_spec: Any,
    no_match: str,
    isolation: str,
    output: str,
) -> None:
    """One line per partition: log start offset, high watermark, last stable offset, and the
    offset --time maps to (with the timestamp of that record).

    For a time T the offset is the first one whose record timestamp is >= T (KIP-79). A partition
    without such a record is never left out: --no-match says what to use (latest, earliest), and
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
      last_stable_offset    end for read_committed readers (-1 under read_committed)
      time                  the --time asked for (earliest, latest, max-timestamp or epoch ms)
      offset                the offset --time maps to
      timestamp             epoch ms of the record at offset (time lookups only), else null
      no_match              null, or the --no-match policy used because no record matched

    \b
    Example:
      stream-recovery offsets -b localhost:9092 --topic-partitions 'orders:0-3' \\
          --time 2026-11-22T06:00:00Z --no-match latest --output json
    """
    from recovery.kafka.admin import Isolation, MissingPartition, NoMatch, offset_table

    selection = selection_from(topic, topic_partitions, exclude_internal_topics)
    rows = offset_table(
        kafka, selection, time_spec, isolation=Isolation(isolation), no_match=NoMatch(no_match)
    )
    records = [_offset_record(row) for row in rows.values()]
    emit(records if output != "table" else [_with_table_fields(r) for r in records], output, _COLUMNS)
    if any(isinstance(row, MissingPartition) for row in rows.values()):
        sys.exit(ExitCode.ACTION_NEEDED)


def _offset_record(row: Any) -> dict[str, Any]:
    from recovery.kafka.admin import MissingPartition

    if isinstance(row, MissingPartition):
        return {
            "topic": row.tp.topic,
            "partition": row.tp.partition,
            "topic_id": None,
            "status": row.reason.value,
            "log_start_offset": None,
            "high_watermark": None,
            "last_stable_offset": None,
            "time": None,
            "offset": None,
            "timestamp": None,
            "no_match": None,
        }
    offsets, lookup = row.offsets, row.lookup
    return {
        "topic": offsets.tp.topic,
        "partition": offsets.tp.partition,
        "topic_id": offsets.topic_id,
        "status": "OK",
        "log_start_offset": offsets.log_start,
        "high_watermark": offsets.high_watermark,
        "last_stable_offset": offsets.last_stable,
        "time": str(lookup.time),
        "offset": lookup.offset,
        "timestamp": lookup.timestamp_ms,
        "no_match": lookup.no_match.value if lookup.no_match else None,
    }


def _with_table_fields(record: dict[str, Any]) -> dict[str, Any]:
    note = ""
    if record["status"] != "OK":
        note = record["status"]
    elif record["no_match"]:
        moment = record["time"]
        if moment.isdigit():
            moment = iso_ms(int(moment))
        note = f"no record at or after {moment}: {record['no_match']}"
    return {**record, "timestamp_iso": iso_ms(record["timestamp"]), "note": note}


def register(cli: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    from recovery.cli import groups, read

    cli.add_command(offsets_cmd)
    read.register(cli)
    groups.register(cli)
