"""``validate``, ``repair`` and ``starting-offsets``: a checkpoint's Kafka sources against the cluster.

Each command: options -> values -> one call of :mod:`recovery.api` -> rows and lines from
:mod:`recovery.cli.report.findings` -> exit code of the result. The JSON keys are documented there.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from recovery.api import (
    export_positions,
    repair_checkpoint,
    starting_offsets,
    validate_checkpoint,
)
from recovery.cli import render
from recovery.cli.options import (
    accept_sink_skip_option,
    checkpoint_write_options,
    execute_option,
    isolation_option,
    kafka_options,
    no_match_option,
    on_beyond_end_option,
    output_option,
    real_time_option,
    runway_warn_option,
    sink_option,
    spark_version_option,
    storage_option,
    strategy_options,
    topic_option,
)
from recovery.cli.report import findings as report
from recovery.core.model import SOURCE_NAME, Isolation, NoMatch, OnBeyondEnd, Plan, Policy, TopicSelection
from recovery.core.results import RepairResult
from recovery.core.strategy import StrategyRequest
from recovery.errors import InvalidInput
from recovery.kafka.config import KafkaConfig
from recovery.validate import parsed_spark_line

judged_isolation = isolation_option(
    "The query's kafka.isolation.level: read_committed judges against the last stable offset."
)


@click.command(name="validate")
@click.argument("checkpoint")
@kafka_options
@judged_isolation
@sink_option()
@runway_warn_option()
@spark_version_option()
@real_time_option()
@click.option(
    "--no-runway",
    "no_runway",
    is_flag=True,
    help="Skip the retention runway (its DescribeConfigs and one-record fetch per partition).",
)
@click.option(
    "--delta-table",
    "delta_tables",
    metavar="ID=TABLE",
    multiple=True,
    help="The table of Delta source ID, for a checkpoint that also reads Delta tables (repeatable). "
    "A Delta source not named is reported as not checked (exit 1).",
)
@storage_option
@output_option()
def validate_cmd(
    checkpoint: str,
    kafka: KafkaConfig,
    isolation: Isolation,
    sink: str | None,
    runway_warn_s: float | None,
    spark_version: str | None,
    real_time: bool,
    no_runway: bool,
    delta_tables: tuple[str, ...],
    storage_options: dict[str, str],
    output: str,
) -> None:
    """Say what Spark will do when the query restarts from CHECKPOINT, per Kafka partition.

    RUNWAY: how long until retention may delete records the query has not read (the timestamp of
    the record it resumes at + retention.ms); OLDEST-UNREAD: that record's age (the lag in time).

    Never writes. Exit 0 healthy, 1 action needed (AT_RISK included: start the query), 2 bad input,
    3 Kafka or storage unreachable. Past 50 partitions the table shows those needing action first
    and sums up the rest per verdict; --output json lists them all.

    Example: stream-recovery validate /data/chk -b kafka:9092 --runway-warn 6h
    """
    if no_runway and runway_warn_s is not None:
        raise click.UsageError("--runway-warn needs the runway: drop --no-runway")
    tables: dict[str, str] = {}
    for spec in delta_tables:
        source_id, eq, path = spec.partition("=")
        if not eq or not SOURCE_NAME.fullmatch(source_id) or not path:
            raise click.UsageError(f"--delta-table {spec}: expected ID=TABLE (e.g. 1=/lake/orders)")
        tables[source_id] = path
    with render.waiting("reading the checkpoint and the cluster"):
        result = validate_checkpoint(
            checkpoint,
            kafka,
            isolation=isolation,
            storage_options=storage_options,
            sink=sink,
            runway=not no_runway,
            runway_warn_s=runway_warn_s,
            delta_tables=tables,
            spark_version=spark_version,
            real_time=real_time,
        )
    if output == "json":
        render.emit_json(report.report_body(result))
    else:
        render.note(report.context_line(result))
        rows, summary = report.validate_table(result)
        render.emit(rows, "table", report.VALIDATE_RUNWAY_COLUMNS)
        for line in summary + report.report_notes(result):
            render.note(line)
    sys.exit(result.exit_code)


@click.command(name="repair")
@click.argument("checkpoint")
@kafka_options
@strategy_options
@execute_option
@click.option(
    "--export",
    "export_path",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    help="Save the positions after the plan as topic,partition,offset rows (readable by --from-file).",
)
@checkpoint_write_options
@judged_isolation
@sink_option()
@accept_sink_skip_option
@spark_version_option(
    "The Spark the query runs (3.5, 4.0, 4.1, 4.2 or a full version): the JSON's spark_says gives that "
    "version's words for each partition's failure.  [default: 4.2]"
)
@storage_option
@output_option()
def repair_cmd(
    checkpoint: str,
    kafka: KafkaConfig,
    request: StrategyRequest,
    policy: Policy,
    dry_run: bool,
    export_path: str | None,
    force: bool,
    active_within: float,
    backup_dir: str | None,
    isolation: Isolation,
    sink: str | None,
    accept_sink_skip: bool,
    spark_version: str | None,
    storage_options: dict[str, str],
    output: str,
) -> None:
    """Plan (and with --execute, apply) new Kafka offsets for CHECKPOINT.

    Dry run by default. --execute re-reads the log start offsets right before writing, backs up
    every file it changes, rewrites them in place atomically with fresh .crc files, and records the
    topic ids it saw. Exit 0 applied (or nothing to do), 1 changes pending in a dry run or refused
    (loss budget, checkpoint in use, plan outdated, Delta sink would skip), 2 bad input, 3 unreachable.

    Example: stream-recovery repair /data/chk -b kafka:9092 --max-loss-records 1000 --execute
    """

    line = parsed_spark_line(spark_version)  # before anything is read: only the JSON's words use it

    def repair(execute: bool) -> RepairResult:
        return repair_checkpoint(
            checkpoint,
            kafka,
            request,
            policy,
            execute=execute,
            isolation=isolation,
            storage_options=storage_options,
            sink=sink,
            accept_sink_skip=accept_sink_skip,
            force=force,
            active_within_s=active_within,
            backup_dir=backup_dir,
        )

    with render.waiting("planning the repair"), _export_file(export_path) as write_export:
        if write_export and not dry_run:
            _export_text(repair(execute=False).plan)  # what the CSV cannot say is refused before a write
        result = repair(execute=not dry_run)
        if write_export:
            write_export(_export_text(result.plan))
    if output == "json":
        render.emit_json(report.repair_body(result, line))
    else:
        render.note(report.context_line(result.plan))
        rows, summary = report.repair_table(result)
        render.emit(rows, "table", report.MOVE_COLUMNS)
        for line in summary + report.repair_notes(result):
            render.note(line)
    refusal = report.refusal_line(result)
    if refusal:
        click.echo(f"Error: {refusal}", err=True)
    sys.exit(result.exit_code)


def _export_text(plan: Plan) -> str:
    try:
        return export_positions(plan)
    except InvalidInput as exc:
        raise InvalidInput(f"--export: {exc}: use --output json") from None


@contextmanager
def _export_file(path: str | None) -> Iterator[Callable[[str], None] | None]:
    """``--export PATH`` opened before the repair runs, so a path that cannot be written is bad input
    (exit 2) while nothing is written yet; the rows are written once the plan is final. A file this
    command created and never filled (the repair failed) is removed; an existing one is replaced only
    when the rows are written."""
    if path is None:
        yield None
        return
    try:
        existed = os.path.exists(path)
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed below, written at the end
    except OSError as exc:
        raise InvalidInput(f"--export {path}: {exc.strerror}") from None
    written = False

    def write(text: str) -> None:
        nonlocal written
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(text)
            handle.flush()
        except OSError as exc:
            raise InvalidInput(f"--export {path}: {exc.strerror}") from None
        written = True

    try:
        yield write
    finally:
        handle.close()
        if not written and not existed:
            os.remove(path)


@click.command(name="starting-offsets")
@kafka_options
@click.option("--from-checkpoint", "checkpoint", metavar="PATH", help="Where this old checkpoint resumes.")
@click.option("--source", "source_id", metavar="ID", help="The Kafka source of a checkpoint with several.")
@click.option("--group", metavar="GROUP", help="A consumer group's committed offsets.")
@click.option("--to-datetime", metavar="ISO-8601|EPOCH-MS", help="First offsets at or after this time.")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="First offsets at or after now minus this.")
@topic_option("Topics the query reads: TOPIC_REGEX (whole name; a plain name means that topic); repeatable.")
@no_match_option("Time: the offset of a partition with no record at or after the time.")
@on_beyond_end_option("Checkpoint: where a position past the log end goes.", default=OnBeyondEnd.LATEST)
@judged_isolation
@sink_option("The old query's Delta sink table: warn if it holds batches of the old query id.")
@storage_option
@output_option("table", "json", "spark")
def starting_offsets_cmd(
    kafka: KafkaConfig,
    checkpoint: str | None,
    source_id: str | None,
    group: str | None,
    to_datetime: str | None,
    by_duration: str | None,
    topics: TopicSelection | None,
    no_match: NoMatch,
    on_beyond_end: OnBeyondEnd,
    isolation: Isolation,
    sink: str | None,
    storage_options: dict[str, str],
    output: str,
) -> None:
    """Print a complete Spark startingOffsets JSON (every partition listed) for a NEW checkpoint.

    From exactly one of --from-checkpoint, --group, --to-datetime or --by-duration. --output spark
    prints only the JSON, to pass as .option("startingOffsets", ...). The caveats go to stderr.

    Example: stream-recovery starting-offsets -b kafka:9092 --from-checkpoint /data/old-chk --output spark
    """
    if sum(x is not None for x in (checkpoint, group, to_datetime, by_duration)) != 1:
        raise click.UsageError("give exactly one of --from-checkpoint, --group, --to-datetime, --by-duration")
    timestamp_ms = StrategyRequest(to_datetime=to_datetime, by_duration=by_duration).timestamp_ms(
        int(time.time() * 1000)
    )
    if (source_id is not None or sink is not None) and checkpoint is None:
        raise InvalidInput("--source and --sink go with --from-checkpoint")
    with render.waiting("reading the cluster"):
        result = starting_offsets(
            kafka,
            checkpoint=checkpoint,
            source_id=source_id,
            group=group,
            timestamp_ms=timestamp_ms,
            topics=topics,
            no_match=no_match,
            on_beyond_end=on_beyond_end,
            isolation=isolation,
            storage_options=storage_options,
            sink=sink,
        )
    if output == "spark":
        click.echo(result.to_json())
    elif output == "json":
        render.emit_json(report.starting_body(result))
    else:
        render.emit(report.starting_rows(result), "table", report.STARTING_COLUMNS)
        click.echo(f"startingOffsets={result.to_json()}")
    for caveat in result.caveats:
        render.note(f"note: {caveat}")
    for warning in result.warnings:
        render.warn(warning)
    sys.exit(result.exit_code)
