"""``stream-recovery group show|set``: consumer-group offsets, the kafka-consumer-groups way."""

from __future__ import annotations

import sys

import click

from recovery.cli import render
from recovery.cli.options import execute_option, kafka_options, output_option
from recovery.cli.report.offsets import (
    GROUP_SET_COLUMNS,
    GROUP_SHOW_COLUMNS,
    group_set_note,
    group_set_rows,
    group_show_notes,
    group_show_rows,
)
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import default_backup_dir, load_offsets_file, set_group_offsets, show_group


@click.group(name="group")
def group() -> None:
    """Consumer-group offsets: show them, set them (inactive groups only), spot expired ones."""


@group.command(name="show")
@kafka_options
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--compare",
    "compare_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="An earlier export (topic,partition,offset CSV): partitions it has and the group lost are EXPIRED.",
)
@output_option("table", "json", "csv")
def show_cmd(kafka: KafkaConfig, group_id: str, compare_file: str | None, output: str) -> None:
    """The committed offsets of GROUP, with each partition's log start offset, high watermark and lag.

    Exit 1 when an offset is below the log start (records lost to retention or deletion), beyond the
    log end, of a partition that is gone, or has EXPIRED (in the --compare file, gone from the group:
    KIP-211 expiry after the group was Empty for offsets.retention.minutes, or the group/topic was
    deleted).

    \b
    JSON (--output json) / CSV keys, one row per partition, sorted by topic and partition:
      topic, partition
      committed_offset     the group's committed offset (null when EXPIRED)
      log_start_offset, high_watermark   the partition now (null when it is gone)
      lag                  high_watermark - committed_offset
      status               OK | BELOW_LOG_START | BEYOND_LOG_END | EXPIRED |
                           TOPIC_GONE | PARTITION_GONE
    The CSV can be fed back to `group set --from-file` (its offset column is committed_offset).

    \b
    Example:
      stream-recovery group show billing -b localhost:9092 --output csv > billing.csv
      stream-recovery group show billing -b localhost:9092 --compare billing.csv
    """
    compare = load_offsets_file(compare_file, name="--compare") if compare_file else None
    with render.waiting(f"reading group {group_id}"):
        report = show_group(kafka, group_id, compare=compare)
    for line in group_show_notes(report):
        render.note(line)
    render.emit(group_show_rows(report), output, GROUP_SHOW_COLUMNS)
    sys.exit(report.exit_code)


@group.command(name="set")
@kafka_options
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--from-file",
    "from_file",
    type=click.Path(dir_okay=False),
    required=True,
    metavar="FILE",
    help="topic,partition,offset rows (kafka-consumer-groups --export format; a header row is allowed).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Write even into a group holding offsets stream-recovery did not commit (saved first to "
    "--backup-dir). A group with active members is refused even so.",
)
@click.option(
    "--backup-dir",
    metavar="DIR",
    help="Where the group's previous offsets are saved before --force overwrites them (default "
    "$XDG_STATE_HOME/stream-recovery/group-backups, else ~/.local/state/stream-recovery/group-backups).",
)
@execute_option
@output_option("table", "json", "csv")
def set_cmd(
    kafka: KafkaConfig,
    group_id: str,
    from_file: str,
    force: bool,
    backup_dir: str | None,
    dry_run: bool,
    output: str,
) -> None:
    """Set GROUP's committed offsets from FILE, as kafka-consumer-groups --reset-offsets --from-file.

    FILE is read strictly: topic,partition,offset on each line (or a header naming those columns,
    as `group show --output csv` writes), a partition of the cluster, an offset in [0, 2^63), each
    partition once; anything else is bad input (exit 2, FILE:LINE named, nothing written).

    Every offset written carries "stream-recovery:1:group set" in its commit metadata. Refused
    (exit 1, nothing written): while the group has active members (even with --force); when an
    offset is outside its partition's [log start offset, high watermark] (the broker would accept
    it); and when the group holds offsets stream-recovery did not commit (another application's
    group: a typo must not destroy it) unless --force, which first saves them to a
    topic,partition,offset file in --backup-dir and prints its path. A group with no offsets is
    written as is. Dry run by default: prints the plan (exit 1 when it would change an offset);
    --execute writes it.

    \b
    JSON / CSV keys: topic, partition, current_offset (null: none committed), new_offset.

    \b
    Example:
      stream-recovery group set billing -b localhost:9092 --from-file billing.csv --execute
      # undo a --force write: the backup it printed is a --from-file
      stream-recovery group set billing -b localhost:9092 --from-file BACKUP.csv --execute --force
    """
    offsets = load_offsets_file(from_file, name="--from-file")
    with render.waiting(f"checking group {group_id}" if dry_run else f"setting the offsets of {group_id}"):
        change = set_group_offsets(
            kafka, group_id, offsets, execute=not dry_run, force=force, backup_dir=backup_dir
        )
    render.emit(group_set_rows(change), output, GROUP_SET_COLUMNS)
    render.note(group_set_note(change))
    if change.backup:
        render.note(
            f"the group's previous offsets are saved in {change.backup}; to put them back: "
            f"stream-recovery group set {group_id} --from-file {change.backup} --execute --force"
        )
    elif change.before.foreign and not change.executed:
        where = backup_dir or default_backup_dir()
        render.note(f"--execute first saves the group's current offsets (not stream-recovery's) in {where}")
    sys.exit(change.exit_code)
