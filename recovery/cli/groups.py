"""``stream-recovery group show|set``: consumer-group offsets, the kafka-consumer-groups way."""

from __future__ import annotations

import sys
from typing import Any

import click

from recovery.cli.options import kafka_options, output_option
from recovery.cli.tables import emit
from recovery.errors import ExitCode

_SHOW_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("committed_offset", "COMMITTED"),
    ("log_start_offset", "LOG-START"),
    ("high_watermark", "HIGH-WATERMARK"),
    ("lag", "LAG"),
    ("status", "STATUS"),
)
_SET_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("current_offset", "CURRENT"),
    ("new_offset", "NEW"),
)


def _info(message: str) -> None:
    click.echo(f"% {message}", err=True)  # kcat's KC_INFO style: messages on stderr


@click.group(name="group")
def group() -> None:
    """Consumer-group offsets: show them, set them (inactive groups only), spot expired ones."""


@group.command(name="show")
@kafka_options
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--compare",
    "compare_file",
    type=click.File("r"),
    metavar="FILE",
    help="An earlier export (topic,partition,offset CSV): partitions it has and the group lost are EXPIRED.",
)
@output_option("table", "json", "csv")
def show_cmd(kafka: Any, group_id: str, compare_file: Any, output: str) -> None:
    """The committed offsets of GROUP, with each partition's log start offset, high watermark and lag.

    Exit 1 when an offset is below the log start (records lost to retention or deletion) or has
    EXPIRED (in the --compare file, gone from the group: KIP-211 expiry after the group was Empty
    for offsets.retention.minutes, or the group/topic was deleted).

    \b
    JSON (--output json) / CSV keys, one row per partition, sorted by topic and partition:
      topic, partition
      committed_offset     the group's committed offset (null when EXPIRED)
      log_start_offset, high_watermark   the partition now (null when it is gone)
      lag                  high_watermark - committed_offset
      status               OK | BELOW_LOG_START | ABOVE_HIGH_WATERMARK | EXPIRED |
                           TOPIC_GONE | PARTITION_GONE
    The CSV can be fed back to `group set --from-file` (its offset column is committed_offset).

    \b
    Example:
      stream-recovery group show billing -b localhost:9092 --output csv > billing.csv
      stream-recovery group show billing -b localhost:9092 --compare billing.csv
    """
    from recovery.kafka.admin import KafkaAdmin, MissingPartition
    from recovery.kafka.groups import expired_offsets, group_offsets, read_offsets_file

    before = read_offsets_file(compare_file, compare_file.name) if compare_file else {}
    now = group_offsets(kafka, group_id)
    expired = expired_offsets(before, now)
    wanted = sorted(set(now.offsets) | set(expired))
    ranges = KafkaAdmin(kafka).offset_ranges(wanted) if wanted else {}
    rows: list[dict[str, Any]] = []
    for tp in wanted:
        committed = now.offsets.get(tp)
        current = ranges[tp]
        row: dict[str, Any] = {
            "topic": tp.topic,
            "partition": tp.partition,
            "committed_offset": committed,
            "log_start_offset": None,
            "high_watermark": None,
            "lag": None,
        }
        if isinstance(current, MissingPartition):
            status = current.reason.value
        else:
            row["log_start_offset"], row["high_watermark"] = current.log_start, current.high_watermark
            if committed is None:
                status = "EXPIRED"
            else:
                row["lag"] = current.high_watermark - committed
                status = (
                    "BELOW_LOG_START"
                    if committed < current.log_start
                    else "ABOVE_HIGH_WATERMARK"
                    if committed > current.high_watermark
                    else "OK"
                )
        if committed is None and tp in expired:
            status = "EXPIRED"
        rows.append({**row, "status": status})
    retention = (
        f"; offsets of an Empty group expire after {now.retention_minutes} minutes "
        "(offsets.retention.minutes, KIP-211)"
        if now.retention_minutes is not None
        else ""
    )
    _info(f"group {group_id} is {now.state} with {now.members} member(s){retention}")
    if expired:
        _info(
            f"{len(expired)} offset(s) of the earlier export are gone from the group: "
            + ", ".join(str(tp) for tp in expired[:5])
        )
    emit(rows, output, _SHOW_COLUMNS)
    if any(row["status"] != "OK" for row in rows):
        sys.exit(ExitCode.ACTION_NEEDED)


@group.command(name="set")
@kafka_options
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--from-file",
    "from_file",
    type=click.File("r"),
    required=True,
    metavar="FILE",
    help="topic,partition,offset rows (kafka-consumer-groups --export format; a header row is allowed).",
)
@click.option("--execute", is_flag=True, help="Write the offsets. Without it nothing is written (dry run).")
@output_option("table", "json", "csv")
def set_cmd(kafka: Any, group_id: str, from_file: Any, execute: bool, output: str) -> None:
    """Set GROUP's committed offsets from FILE, as kafka-consumer-groups --reset-offsets --from-file.

    Refused (exit 1, nothing written) while the group has active members, and when an offset is
    outside its partition's [log start offset, high watermark] (the broker would accept it).
    Dry run by default: prints the plan; --execute writes it.

    \b
    JSON / CSV keys: topic, partition, current_offset (null: none committed), new_offset.

    \b
    Example:
      stream-recovery group set billing -b localhost:9092 --from-file billing.csv --execute
    """
    from recovery.kafka.groups import read_offsets_file, set_group_offsets

    offsets = read_offsets_file(from_file, from_file.name)
    before = set_group_offsets(kafka, group_id, offsets, execute=execute)
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": before.offsets.get(tp),
            "new_offset": offset,
        }
        for tp, offset in sorted(offsets.items())
    ]
    emit(rows, output, _SET_COLUMNS)
    if execute:
        _info(f"wrote {len(rows)} offset(s) to group {group_id}")
    else:
        _info("dry run: nothing was written; add --execute to write these offsets")


def register(cli: click.Group) -> None:
    cli.add_command(group)
