"""``validate``, ``repair`` and ``starting-offsets``: the checkpoint against the live cluster.

JSON keys of ``validate`` rows (one per partition of each Kafka source, sorted by source, topic,
partition): ``source``, ``topic``, ``partition``, ``verdict``, ``checkpoint_offset`` (where Spark
resumes), ``batch_end`` (stored end of a re-run batch), ``log_start_offset``, ``log_end_offset`` (high
watermark, or last stable offset under read_committed), ``records_lost``, ``spark_error`` (error
condition on restart with failOnDataLoss=true; null: it runs), ``silently_skipped`` (records skipped
with failOnDataLoss=false), ``detail``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

from recovery.cli.options import (
    checkpoint_write_options,
    isolation_option,
    kafka_options,
    output_option,
    parse_storage_options,
    stack,
    storage_option,
)
from recovery.cli.tables import emit
from recovery.errors import ExitCode, OffsetSpecError, SinkWouldSkip

VALIDATE_COLUMNS = (
    ("source", "SOURCE"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("verdict", "VERDICT"),
    ("checkpoint_offset", "CHECKPOINT"),
    ("log_start_offset", "LOG-START"),
    ("log_end_offset", "LOG-END"),
    ("records_lost", "LOST"),
    ("on_restart", "SPARK-ON-RESTART"),
)
MOVE_COLUMNS = (
    ("source", "SOURCE"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("verdict", "VERDICT"),
    ("old", "FROM"),
    ("new", "TO"),
    ("lost", "LOST"),
    ("skipped", "SKIPPED"),
    ("replayed", "REPLAYED"),
)

sink_option = click.option(
    "--sink",
    metavar="TABLE",
    help="The query's Delta sink table: warn when it would skip batches it believes it wrote "
    "(its txn appId is the query id).",
)


def _sink_warning(checkpoint: str, sink: str | None, files: tuple[str, ...], options: dict[str, str]) -> Any:
    if sink is None:
        return None
    from recovery.delta.api import sink_warning

    warning = sink_warning(checkpoint, sink, changed_files=files, storage_options=options)
    if warning is not None:
        _err(f"% warning: {warning.message}")
    return warning


judged_isolation = isolation_option(
    "The query's kafka.isolation.level: read_committed judges against the last stable offset."
)


def _err(message: str) -> None:
    click.echo(message, err=True)


def _context(report_or_plan: Any) -> None:
    what = "re-runs uncommitted batch" if report_or_plan.rerun else "starts batch"
    _err(
        f"% checkpoint {report_or_plan.checkpoint} (query {report_or_plan.query_id}): "
        f"Spark {what} {report_or_plan.batch_id} next"
    )


def finding_rows(findings: Sequence[Any]) -> list[dict[str, Any]]:
    from recovery.report import spark_outcome

    rows = []
    for f in findings:
        on_restart = spark_outcome(f, short=True)
        rows.append(
            {
                "source": f.source_id,
                "topic": f.tp.topic,
                "partition": f.tp.partition,
                "verdict": f.verdict.value,
                "checkpoint_offset": f.position,
                "batch_end": f.batch_end,
                "log_start_offset": f.available.start if f.available else None,
                "log_end_offset": f.available.end if f.available else None,
                "records_lost": f.records_lost,
                "spark_error": f.spark_error,
                "silently_skipped": f.silently_skipped,
                "on_restart": on_restart,
                "detail": f.detail,
            }
        )
    return rows


@click.command(name="validate")
@click.argument("checkpoint")
@kafka_options
@judged_isolation
@sink_option
@storage_option
@output_option()
def validate_cmd(
    checkpoint: str,
    kafka: Any,
    isolation: str,
    sink: str | None,
    storage_options: tuple[str, ...],
    output: str,
) -> None:
    """Say what Spark will do when the query restarts from CHECKPOINT, per Kafka partition.

    Never writes. Exit 0 healthy, 1 action needed, 2 bad input, 3 Kafka or storage unreachable.

    Example: stream-recovery validate /data/chk -b kafka:9092
    """
    from recovery.api import validate_checkpoint
    from recovery.kafka.admin import Isolation

    options = parse_storage_options(storage_options)
    report = validate_checkpoint(checkpoint, kafka, isolation=Isolation(isolation), storage_options=options)
    warning = _sink_warning(checkpoint, sink, (), options)
    rows = finding_rows(report.findings)
    if output == "json":
        body = {
            "checkpoint": report.checkpoint,
            "query_id": report.query_id,
            "batch_id": report.batch_id,
            "rerun": report.rerun,
            "isolation": report.isolation,
            "needs_action": report.needs_action or warning is not None,
            "sink_warning": warning.message if warning else None,
            "issues": [{"level": i.level.value, "message": i.message} for i in report.issues],
            "partitions": [{k: v for k, v in r.items() if k != "on_restart"} for r in rows],
        }
        click.echo(json.dumps(body, indent=2))
    else:
        _context(report)
        emit(rows, "table", VALIDATE_COLUMNS)
        for issue in report.issues:
            _err(f"% {issue.level.value}: {issue.message}")
        for f in report.findings:
            if f.needs_action:
                _err(f"% {f.tp}: {f.detail}")
        _err("% action needed: see `stream-recovery repair`" if report.needs_action else "% healthy")
    sys.exit(ExitCode.ACTION_NEEDED if warning is not None else report.exit_code)


# -- repair --------------------------------------------------------------------------------------

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """kafka-consumer-groups' ``--by-duration`` format, ISO-8601 ``PnDTnHnMnS``, in milliseconds."""
    match = _DURATION.match(text.strip())
    if not match or text.strip().upper() in ("P", "PT"):
        raise OffsetSpecError(f"--by-duration {text!r}: expected ISO-8601 like PT30M, P1DT2H or PT90S")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def timestamp_from(to_datetime: str | None, by_duration: str | None) -> int | None:
    """``--to-datetime`` (ISO-8601 or epoch ms) or ``--by-duration`` (now minus it), in epoch ms."""
    from recovery.kafka.specs import parse_time

    if to_datetime is not None:
        timestamp_ms = parse_time(to_datetime).timestamp_ms
        if timestamp_ms is None:
            raise OffsetSpecError(f"--to-datetime {to_datetime!r}: give a date-time or epoch ms")
        return timestamp_ms
    if by_duration is not None:
        return int(time.time() * 1000) - parse_duration_ms(by_duration)
    return None


def parse_scope(items: Sequence[str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``--topic t`` (all partitions) or ``--topic t:0,1`` (those partitions), repeatable."""
    scope = []
    for item in items:
        topic, sep, parts = item.rpartition(":") if ":" in item else (item, "", "")
        try:
            partitions = tuple(sorted({int(p) for p in parts.split(",")})) if sep else ()
        except ValueError:
            raise click.BadParameter(
                f"{item!r}: expected TOPIC or TOPIC:0,1,2", param_hint="--topic"
            ) from None
        scope.append((topic, partitions))
    return tuple(scope)


@dataclass(frozen=True)
class StrategyArgs:
    strategy: str | None
    on_beyond_end: str | None
    to_datetime: str | None
    by_duration: str | None
    shift_by: int | None
    to_offset: int | None
    from_file: str | None
    no_match: str


_VALUE_OPTIONS = {
    "to-datetime": "to_datetime",
    "by-duration": "by_duration",
    "shift-by": "shift_by",
    "to-offset": "to_offset",
    "from-file": "from_file",
}


def build_strategy(
    args: StrategyArgs, scope: tuple[tuple[str, tuple[int, ...]], ...], time_targets: Any
) -> Any:
    """A Strategy from the options; time-based ones are resolved against the cluster here (IO edge)."""
    from recovery.model import Strategy, StrategyKind

    given = [name for name, attr in _VALUE_OPTIONS.items() if getattr(args, attr) is not None]
    kind_name = args.strategy or (given[0] if len(given) == 1 else "clamp")
    if len(given) > 1 or (given and given[0] != kind_name):
        raise click.UsageError(f"--strategy {kind_name} does not go with --{', --'.join(given)}")
    if kind_name in _VALUE_OPTIONS and getattr(args, _VALUE_OPTIONS[kind_name]) is None:
        raise click.UsageError(f"--strategy {kind_name} needs --{kind_name} VALUE")
    kind = StrategyKind(kind_name)
    targets: Mapping[Any, int] = {}
    if kind in (StrategyKind.TO_DATETIME, StrategyKind.BY_DURATION):
        ts_ms = timestamp_from(args.to_datetime, args.by_duration)
        assert ts_ms is not None
        targets = time_targets(ts_ms, args.no_match)
    elif kind is StrategyKind.FROM_FILE:
        from recovery.kafka.groups import read_offsets_file

        try:
            with open(str(args.from_file)) as handle:
                targets = read_offsets_file(handle, str(args.from_file))
        except OSError as exc:
            raise OffsetSpecError(f"{args.from_file}: {exc.strerror}") from None
    if args.on_beyond_end is not None and kind is not StrategyKind.CLAMP:
        raise click.UsageError(f"--on-beyond-end goes with the clamp strategy, not {kind.value}")
    return Strategy(
        kind=kind,
        on_beyond_end=args.on_beyond_end or "latest",
        shift=args.shift_by or 0,
        offset=args.to_offset,
        targets=targets,
        scope=scope,
    )


def plan_body(plan: Any, *, executed: bool, backup_id: str | None) -> dict[str, Any]:
    return {
        "checkpoint": plan.checkpoint,
        "query_id": plan.query_id,
        "batch_id": plan.batch_id,
        "rerun": plan.rerun,
        "strategy": plan.strategy,
        "isolation": plan.isolation,
        "partitions": finding_rows(plan.findings),
        "moves": move_rows(plan.moves),
        "changes": [
            {"file": c.file, "source": c.source_id, "topic": c.tp.topic, "partition": c.tp.partition}
            | {"old": c.old, "new": c.new}
            for c in plan.changes
        ],
        "totals": {"lost": plan.lost, "skipped": plan.skipped, "replayed": plan.replayed},
        "refused": plan.refused,
        "executed": executed,
        "backup_id": backup_id,
    }


def move_rows(moves: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "source": m.source_id,
            "topic": m.tp.topic,
            "partition": m.tp.partition,
            "verdict": m.verdict.value,
            "old": m.old,
            "new": m.new,
            "lost": m.lost,
            "skipped": m.skipped,
            "replayed": m.replayed,
            "reason": m.reason,
        }
        for m in moves
    ]


def export_plan(plan: Any, path: str) -> None:
    """Write the positions after the plan as ``topic,partition,offset`` rows (kafka-consumer-groups
    ``--export``), readable back with ``--from-file``. Partitions the plan drops are left out."""
    from recovery.plan import resume_positions

    by_tp: dict[Any, int] = {}
    for (source_id, tp), offset in resume_positions(plan).items():
        if by_tp.setdefault(tp, offset) != offset:
            raise OffsetSpecError(
                f"--export {path}: two sources read {tp} at different positions; the CSV cannot say "
                f"which is which (source {source_id}): use --output json"
            )
    with open(path, "w") as handle:
        handle.writelines(f"{tp.topic},{tp.partition},{o}\n" for tp, o in sorted(by_tp.items()))


def strategy_options(func: Any) -> Any:
    """The reset strategies and their values, scope and loss budget (``repair``, ``ledger repair``)."""
    decorators = [
        click.option(
            "--strategy",
            type=click.Choice(
                [
                    "clamp",
                    "earliest",
                    "latest",
                    "to-datetime",
                    "by-duration",
                    "shift-by",
                    "to-offset",
                    "from-file",
                ]
            ),
            default=None,
            help="How to choose new offsets (default clamp: below the log start -> log start, beyond "
            "the log end -> --on-beyond-end). A value option below implies its strategy.",
        ),
        click.option(
            "--on-beyond-end",
            type=click.Choice(["latest", "earliest"]),
            default=None,
            help="clamp: where a position past the log end goes: latest (default, follower-style) or "
            "earliest (re-reads a recreated topic).",
        ),
        click.option(
            "--to-datetime", metavar="ISO-8601|EPOCH-MS", help="First offset at or after this time."
        ),
        click.option("--by-duration", metavar="PnDTnHnMnS", help="First offset at or after now minus this."),
        click.option("--shift-by", type=int, metavar="N", help="Move every position by N (negative: back)."),
        click.option(
            "--to-offset", type=int, metavar="N", help="Move every position to N (clamped into the log)."
        ),
        click.option(
            "--from-file", type=click.Path(dir_okay=False), metavar="CSV", help="topic,partition,offset rows."
        ),
        click.option(
            "--no-match",
            type=click.Choice(["latest", "earliest", "fail"]),
            default="latest",
            show_default=True,
            help="Time strategies: the offset of a partition with no record at or after the time.",
        ),
        click.option(
            "--topic", "topics", multiple=True, metavar="TOPIC[:P,P]", help="Limit to these partitions."
        ),
        click.option(
            "--max-loss-records", type=click.IntRange(min=0), help="Refuse if more records are lost in all."
        ),
        click.option(
            "--max-loss-per-partition",
            type=click.IntRange(min=0),
            help="Refuse if a partition loses more records.",
        ),
    ]
    return stack(func, decorators)


@click.command(name="repair")
@click.argument("checkpoint")
@kafka_options
@strategy_options
@click.option("--dry-run/--execute", "dry_run", default=True, help="Print the plan (default), or apply it.")
@click.option(
    "--export",
    "export_path",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    help="Save the positions after the plan as topic,partition,offset rows (readable by --from-file).",
)
@checkpoint_write_options
@judged_isolation
@sink_option
@click.option(
    "--accept-sink-skip",
    is_flag=True,
    help="--execute even though the --sink table would skip batches (their records never reach it).",
)
@storage_option
@output_option()
def repair_cmd(
    checkpoint: str,
    kafka: Any,
    strategy: str | None,
    on_beyond_end: str | None,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None,
    to_offset: int | None,
    from_file: str | None,
    no_match: str,
    topics: tuple[str, ...],
    max_loss_records: int | None,
    max_loss_per_partition: int | None,
    dry_run: bool,
    export_path: str | None,
    force: bool,
    active_within: float,
    backup_dir: str | None,
    isolation: str,
    sink: str | None,
    accept_sink_skip: bool,
    storage_options: tuple[str, ...],
    output: str,
) -> None:
    """Plan (and with --execute, apply) new Kafka offsets for CHECKPOINT.

    Dry run by default. --execute re-reads the log start offsets right before writing, backs up
    every file it changes, rewrites them in place atomically with fresh .crc files, and records the
    topic ids it saw. Exit 0 applied (or nothing to do), 1 changes pending in a dry run or refused
    (loss budget, checkpoint in use, plan outdated), 2 bad input, 3 unreachable.

    Example: stream-recovery repair /data/chk -b kafka:9092 --max-loss-records 1000 --execute
    """
    from recovery.api import apply, plan_repair, time_targets
    from recovery.kafka.admin import Isolation, NoMatch
    from recovery.model import Policy

    options = parse_storage_options(storage_options)
    level = Isolation(isolation)
    scope = parse_scope(topics)

    def resolve_time(ts_ms: int, no_match_name: str) -> dict[Any, int]:
        return time_targets(
            checkpoint, kafka, ts_ms, NoMatch(no_match_name), isolation=level, storage_options=options
        )

    args = StrategyArgs(
        strategy, on_beyond_end, to_datetime, by_duration, shift_by, to_offset, from_file, no_match
    )
    chosen = build_strategy(args, scope, resolve_time)
    plan = plan_repair(
        checkpoint,
        kafka,
        chosen,
        Policy(max_loss_records, max_loss_per_partition),
        isolation=level,
        storage_options=options,
    )
    backup_id = None
    # Before anything is written: a Delta sink that would skip the repaired batch loses its records.
    warning = _sink_warning(checkpoint, sink, plan.files, options)
    if warning is not None and not dry_run and not accept_sink_skip:
        raise SinkWouldSkip(
            f"the Delta sink {warning.table} would skip batches (warning above). Nothing was written: start "
            "the query on a new checkpoint (see `starting-offsets`), or pass --accept-sink-skip"
        )
    if not dry_run and not plan.refused:
        applied = apply(
            plan,
            kafka,
            storage_options=options,
            backup_dir=backup_dir,
            force=force,
            active_within_s=active_within,
        )
        backup_id = applied.backup.id if applied.backup else None
        plan = applied.plan  # re-planned on offsets read right before writing: what was applied
    if export_path:
        export_plan(plan, export_path)
    if output == "json":
        body = plan_body(plan, executed=not dry_run and not plan.refused, backup_id=backup_id)
        body["sink_warning"] = warning.message if warning else None
        click.echo(json.dumps(body, indent=2))
    else:
        _context(plan)
        emit(move_rows(plan.moves), "table", MOVE_COLUMNS)
        for move in plan.moves:
            _err(f"% {move.tp}: {move.reason}")
        _err(
            f"% strategy {plan.strategy}: {len(plan.moves)} partitions move, "
            f"{plan.lost} records lost, {plan.skipped} skipped, {plan.replayed} replayed; "
            f"files: {', '.join(plan.files) or 'none'}"
        )
    if plan.refused:
        _err(f"Error: repair refused: {plan.refused}. Nothing was written.")
        sys.exit(ExitCode.ACTION_NEEDED)
    if dry_run:
        _err(
            "% dry run: nothing was written; add --execute to apply"
            if plan.changes
            else "% nothing to change"
        )
        sys.exit(ExitCode.ACTION_NEEDED if plan.changes else ExitCode.OK)
    _err(f"% applied; originals backed up as {backup_id}" if backup_id else "% nothing to change")
    sys.exit(ExitCode.OK)


STARTING_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("offset", "OFFSET"),
    ("origin", "FROM"),
    ("note", "NOTE"),
)


@click.command(name="starting-offsets")
@kafka_options
@click.option("--from-checkpoint", "checkpoint", metavar="PATH", help="Where this old checkpoint resumes.")
@click.option("--source", "source_id", metavar="ID", help="The Kafka source of a checkpoint with several.")
@click.option("--group", metavar="GROUP", help="A consumer group's committed offsets.")
@click.option("--to-datetime", metavar="ISO-8601|EPOCH-MS", help="First offsets at or after this time.")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="First offsets at or after now minus this.")
@click.option(
    "--topic", "topics", multiple=True, metavar="TOPIC", help="Topics the query reads (repeatable)."
)
@click.option(
    "--no-match",
    type=click.Choice(["latest", "earliest", "fail"]),
    default="latest",
    show_default=True,
    help="Time: the offset of a partition with no record at or after the time.",
)
@click.option(
    "--on-beyond-end",
    type=click.Choice(["latest", "earliest"]),
    default="latest",
    show_default=True,
    help="Checkpoint: where a position past the log end goes.",
)
@judged_isolation
@sink_option
@storage_option
@output_option("table", "json", "spark")
def starting_offsets_cmd(
    kafka: Any,
    checkpoint: str | None,
    source_id: str | None,
    group: str | None,
    to_datetime: str | None,
    by_duration: str | None,
    topics: tuple[str, ...],
    no_match: str,
    on_beyond_end: str,
    isolation: str,
    sink: str | None,
    storage_options: tuple[str, ...],
    output: str,
) -> None:
    """Print a complete Spark startingOffsets JSON (every partition listed) for a NEW checkpoint.

    From exactly one of --from-checkpoint, --group, --to-datetime or --by-duration. --output spark
    prints only the JSON, to pass as .option("startingOffsets", ...). The caveats go to stderr.

    Example: stream-recovery starting-offsets -b kafka:9092 --from-checkpoint /data/old-chk --output spark
    """
    from recovery.api import starting_offsets
    from recovery.kafka.admin import Isolation, NoMatch

    given = [x for x in (checkpoint, group, to_datetime, by_duration) if x is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --from-checkpoint, --group, --to-datetime, --by-duration")
    if (source_id is not None or sink is not None) and checkpoint is None:
        raise click.UsageError("--source and --sink go with --from-checkpoint")
    timestamp_ms = timestamp_from(to_datetime, by_duration)
    result = starting_offsets(
        kafka,
        checkpoint=checkpoint,
        source_id=source_id,
        group=group,
        timestamp_ms=timestamp_ms,
        topics=topics,
        no_match=NoMatch(no_match),
        on_beyond_end=on_beyond_end,
        isolation=Isolation(isolation),
        storage_options=parse_storage_options(storage_options),
    )
    rows = [
        {
            "topic": r.tp.topic,
            "partition": r.tp.partition,
            "offset": r.offset,
            "origin": r.origin,
            "note": r.note,
        }
        for r in result.rows
    ]
    if output == "spark":
        click.echo(result.to_json())
    elif output == "json":
        body = {
            "startingOffsets": json.loads(result.to_json()),
            "partitions": rows,
            "caveats": list(result.caveats),
        }
        click.echo(json.dumps(body, indent=2))
    else:
        emit(rows, "table", STARTING_COLUMNS)
        click.echo(f"startingOffsets={result.to_json()}")
    for caveat in result.caveats:
        _err(f"% note: {caveat}")
    if sink is not None and checkpoint is not None:
        from recovery.checkpoint import open_checkpoint
        from recovery.delta.log import app_transaction_version

        query_id = open_checkpoint(checkpoint, parse_storage_options(storage_options)).query_id
        held = app_transaction_version(sink, query_id)
        if held is not None:
            _err(
                f"% warning: Delta sink {sink} holds batches up to {held} for query id {query_id} (the old "
                "checkpoint's): a new checkpoint that reused that id would have them skipped; do not copy "
                "its metadata file"
            )


def register(cli: click.Group) -> None:
    cli.add_command(validate_cmd)
    cli.add_command(repair_cmd)
    cli.add_command(starting_offsets_cmd)
