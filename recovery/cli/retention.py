"""``stream-recovery retention hold|release``: keep a stopped query's unread records, then put the
topics' retention back."""

from __future__ import annotations

import sys

import click

from recovery.cli import render
from recovery.cli.options import duration_option, execute_option, kafka_options, output_option, storage_option
from recovery.cli.report.hold import (
    HOLD_COLUMNS,
    RELEASE_COLUMNS,
    hold_notes,
    hold_rows,
    release_notes,
    release_rows,
)
from recovery.core.hold import DEFAULT_MIN_FREE_RATIO
from recovery.kafka.config import KafkaConfig


@click.group(name="retention")
def retention() -> None:
    """Hold a topic's retention while a query is down (keep what it has not read), and put it back
    once the query has caught up."""


@retention.command(name="hold")
@click.argument("checkpoint")
@kafka_options
@duration_option(
    "--keep",
    "keep_s",
    "Keep every record the query has not read at least this much longer from now (PT48H, 2d, 36h).",
)
@duration_option(
    "--max-retention",
    "max_retention_s",
    "Refuse a topic whose retention.ms would have to go above this.",
    default="30d",
)
@click.option(
    "--max-extra-bytes",
    "max_extra_bytes",
    type=click.IntRange(min=0),
    metavar="BYTES",
    help="Refuse what would hold more than BYTES extra on any one broker (all held topics together). "
    "Default: no cap beyond the free-space floor.",
)
@click.option(
    "--min-free-ratio",
    "min_free_ratio",
    type=click.FloatRange(min=0, max=1, max_open=True),
    default=DEFAULT_MIN_FREE_RATIO,
    show_default=True,
    metavar="RATIO",
    help="Refuse what would leave a broker's log directory with less than this share of its disk "
    "free (where the broker reports it: Kafka 3.3 on).",
)
@click.option("--why", "why", default="", metavar="TEXT", help="Recorded beside the original values.")
@storage_option
@execute_option
@output_option("table", "json")
def hold_cmd(
    checkpoint: str,
    kafka: KafkaConfig,
    keep_s: float,
    max_retention_s: float,
    max_extra_bytes: int | None,
    min_free_ratio: float,
    why: str,
    storage_options: dict[str, str],
    dry_run: bool,
    output: str,
) -> None:
    """Raise the retention of each topic CHECKPOINT reads that would otherwise delete records the
    query has not read within --keep, so that they are kept that long.

    For each topic: the smallest retention.ms (and, for a topic limited by size, retention.bytes)
    that keeps every unread record --keep more, the extra disk it takes per broker (an estimate:
    the partition's write rate over the added retention), and the brokers' free space. A value is
    only ever raised. Refused per topic (exit 1, the others still held): above --max-retention,
    above --max-extra-bytes on a broker, under the --min-free-ratio floor, or when a fact it needs
    cannot be read. Dry run by default (exit 1 when something would be raised); --execute records
    the original values (who, when, why) in CHECKPOINT/_recovery/retention-hold.json, then
    applies the new ones (IncrementalAlterConfigs: needs AlterConfigs on the topics). Rerun after
    an interruption, it finishes what was started.

    \b
    JSON keys, one object per topic:
      topic, action (RAISE | ENOUGH | REFUSED; with --execute RAISED | FAILED),
      runway_s (shortest time before retention may delete unread records; null: no limit),
      runway_after_s (the same once the raised retention.ms applies; null: not raised by time),
      retention_ms, new_retention_ms, retention_bytes, new_retention_bytes (null: unchanged),
      extra_bytes_per_broker {broker: bytes}, protect_until {partition: offset}, reason

    \b
    Example:
      stream-recovery retention hold /chk/orders -b kafka:9092 --keep 2d
      stream-recovery retention hold /chk/orders -b kafka:9092 --keep 2d --execute
    """
    # Imported here: recovery.hold loads pydantic (the hold record's format), which --help must not.
    from recovery.hold import hold_retention

    with render.waiting("planning the hold" if dry_run else "holding retention"):
        plan = hold_retention(
            checkpoint,
            kafka,
            keep_s=keep_s,
            execute=not dry_run,
            max_retention_s=max_retention_s,
            max_extra_bytes=max_extra_bytes,
            min_free_ratio=min_free_ratio,
            storage_options=storage_options,
            why=why,
        )
    render.emit(hold_rows(plan, output), output, HOLD_COLUMNS)
    for line in hold_notes(plan):
        render.note(line)
    sys.exit(plan.exit_code)


@retention.command(name="release")
@click.argument("checkpoint")
@kafka_options
@click.option(
    "--now",
    "now",
    is_flag=True,
    help="Put the values back even if the query has not read past the records the hold protects.",
)
@storage_option
@execute_option
@output_option("table", "json")
def release_cmd(
    checkpoint: str,
    kafka: KafkaConfig,
    now: bool,
    storage_options: dict[str, str],
    dry_run: bool,
    output: str,
) -> None:
    """Put back the retention values `retention hold` raised for CHECKPOINT's topics.

    A topic's values go back once the query has read past every record the hold protected (each
    partition's log end when it was held), or at once with --now. A value someone changed since
    the hold is theirs: it is left as it is, and said (CHANGED). A value another query's hold
    raised further since (a hold's values end 7 past a whole minute or MiB) waits for that hold's
    release (KEEP, even with --now). Dry run by default (exit 1 when
    something would be put back, or a hold is kept); --execute puts them back and drops the
    topic from the record. Nothing recorded: exit 0.

    \b
    JSON keys, one object per held topic:
      topic, action (RESTORE | KEEP | RESTORED | CHANGED | UNKNOWN; with --execute RESTORE
      becomes RESTORED | FAILED), changes {name: value, null: the topic's own value deleted}, reason

    \b
    Example:
      stream-recovery retention release /chk/orders -b kafka:9092 --execute
    """
    from recovery.hold import release_retention

    with render.waiting("checking the hold" if dry_run else "releasing the hold"):
        plan = release_retention(
            checkpoint, kafka, execute=not dry_run, now=now, storage_options=storage_options
        )
    if plan.topics or output == "json":  # nothing recorded: the note says so, no empty table
        render.emit(release_rows(plan), output, RELEASE_COLUMNS)
    for line in release_notes(plan):
        render.note(line)
    sys.exit(plan.exit_code)
