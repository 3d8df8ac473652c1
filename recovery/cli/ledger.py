"""``stream-recovery ledger show|validate|repair TABLE``: Kafka offsets kept in a Delta ledger table.

The ledger's latest ``end_offset`` per partition is where the next run starts. ``validate`` judges
those offsets against Kafka with the same planning core as checkpoints; ``repair`` prints the plan
(dry run) and ``--execute`` appends correction rows in one commit whose custom metadata
(``stream-recovery.plan``) names the plan; history is never rewritten.

JSON keys (``--output json``, tested in tests/delta/test_delta_ledger.py):

* ``show``: a list of rows: ``topic``, ``partition``, ``offset``, ``batch_id``, ``committed_at``,
  ``written_by``, ``note``.
* ``validate``: one object: ``table``, ``pipeline``, ``version``, ``batch_id`` (the next run),
  ``isolation``, ``needs_action``, ``partitions``: ``topic``, ``partition``, ``verdict``,
  ``ledger_offset``, ``batch_end``, ``log_start_offset``, ``log_end_offset``, ``records_lost``,
  ``spark_error``, ``silently_skipped``, ``detail``.
* ``repair``: one object: ``table``, ``pipeline``, ``from_version``, ``batch_id``, ``strategy``,
  ``isolation``, ``partitions`` (as for ``validate``, plus ``on_restart``), ``moves`` (``topic``,
  ``partition``, ``verdict``, ``old``, ``new``, ``lost``, ``skipped``, ``replayed``, ``reason``),
  ``rows`` (the correction rows: ``topic``, ``partition``, ``start_offset``, ``end_offset``, ``note``),
  ``dropped`` (``topic``, ``partition``: gone, which no row can express), ``totals`` (``lost``,
  ``skipped``, ``replayed``), ``refused``, ``executed``, ``version`` (of the correction commit).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.options import isolation_option, kafka_options, output_option, stack
from recovery.cli.repair import (
    MOVE_COLUMNS,
    VALIDATE_COLUMNS,
    StrategyArgs,
    build_strategy,
    finding_rows,
    move_rows,
    parse_scope,
    strategy_options,
)
from recovery.cli.tables import emit
from recovery.errors import ExitCode

if TYPE_CHECKING:
    from recovery.delta.ledger import LedgerConf


# The repair command's columns, with the ledger in place of the checkpoint and no source column
# (a ledger is one source).
LEDGER_VALIDATE_COLUMNS = tuple(
    (key, "LEDGER" if key == "checkpoint_offset" else header)
    for key, header in VALIDATE_COLUMNS
    if key != "source"
)
LEDGER_MOVE_COLUMNS = tuple(c for c in MOVE_COLUMNS if c[0] != "source")


def _ledger_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """finding_rows/move_rows without ``source``, ``checkpoint_offset`` named ``ledger_offset``."""
    renamed = []
    for row in rows:
        out = {
            ("ledger_offset" if k == "checkpoint_offset" else k): v for k, v in row.items() if k != "source"
        }
        renamed.append(out)
    return renamed


ledger_isolation = isolation_option(
    "The job's kafka.isolation.level: read_committed judges against the last stable offset."
)

SHOW_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("offset", "OFFSET"),
    ("batch_id", "BATCH"),
    ("committed_at", "COMMITTED-AT"),
    ("written_by", "WRITTEN-BY"),
)


def _conf(
    table: str, conf_file: str | None, pipeline: str | None, data_table: str | None = None
) -> LedgerConf:
    from recovery.delta.ledger import load_conf, make_conf

    if conf_file is not None:
        return load_conf(conf_file, table=table, pipeline=pipeline, data_table=data_table)
    # Without --pipeline, read_ledger refuses a table whose pipeline column names pipelines (exit 2).
    values = {"table": table, "pipeline": pipeline, "data_table": data_table}
    return make_conf(values, source="--pipeline", pipeline_required=False)


def _ledger_options(func: Any) -> Any:
    decorators = [
        click.argument("table"),
        click.option(
            "--conf",
            "conf_file",
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="TOML file with a [ledger] section mapping the table's columns (conf/ledger.example.toml).",
        ),
        click.option(
            "--pipeline",
            default=None,
            help="The pipeline whose rows to use, when the table holds several (pipeline column).",
        ),
    ]
    return stack(func, decorators)


def _context(state: Any) -> None:
    pipeline = f" pipeline {state.pipeline}" if state.pipeline else ""
    click.echo(
        f"% ledger {state.table}{pipeline} at version {state.version}: the next run is batch "
        f"{state.next_batch_id}",
        err=True,
    )


def register(cli: click.Group) -> None:
    @cli.group(name="ledger")
    def ledger() -> None:
        """Show, validate and repair Kafka offsets kept in a Delta ledger table."""

    @ledger.command(name="show")
    @_ledger_options
    @output_option("table", "json", "csv")
    def show_cmd(table: str, conf_file: str | None, pipeline: str | None, output: str) -> None:
        """Print the latest committed offset of each partition: where the next run starts.

        Example: stream-recovery ledger show /tables/ledger --pipeline orders-hourly
        """
        from recovery.delta.ledger import read_ledger

        state = read_ledger(_conf(table, conf_file, pipeline))
        rows = [
            {
                "topic": e.tp.topic,
                "partition": e.tp.partition,
                "offset": e.offset,
                "batch_id": e.batch_id,
                "committed_at": e.committed_at,
                "written_by": e.written_by,
                "note": e.note,
            }
            for e in state.entries
        ]
        if output == "table":
            _context(state)
        emit(rows, output, SHOW_COLUMNS)

    @ledger.command(name="validate")
    @_ledger_options
    @kafka_options
    @ledger_isolation
    @output_option()
    def validate_cmd(
        table: str, conf_file: str | None, pipeline: str | None, kafka: Any, isolation: str, output: str
    ) -> None:
        """Say what the next run does with the ledger's latest offsets, per Kafka partition.

        Never writes. Exit 0 healthy, 1 action needed, 2 bad input, 3 Kafka or storage unreachable.

        Example: stream-recovery ledger validate /tables/ledger --pipeline orders -b kafka:9092
        """
        from recovery.delta.api import plan_ledger
        from recovery.kafka.admin import Isolation

        ledger_plan = plan_ledger(_conf(table, conf_file, pipeline), kafka, isolation=Isolation(isolation))
        plan, state = ledger_plan.plan, ledger_plan.state
        rows = finding_rows(plan.findings)
        needs_action = any(f.needs_action for f in plan.findings)
        if output == "json":
            body = {
                "table": state.table,
                "pipeline": state.pipeline,
                "version": state.version,
                "batch_id": state.next_batch_id,
                "isolation": isolation,
                "needs_action": needs_action,
                "partitions": [{k: v for k, v in r.items() if k != "on_restart"} for r in _ledger_rows(rows)],
            }
            click.echo(json.dumps(body, indent=2))
        else:
            _context(state)
            emit(rows, "table", LEDGER_VALIDATE_COLUMNS)
            for f in plan.findings:
                if f.needs_action:
                    click.echo(f"% {f.tp}: {f.detail}", err=True)
            click.echo(
                "% action needed: see `stream-recovery ledger repair`" if needs_action else "% healthy",
                err=True,
            )
        sys.exit(ExitCode.ACTION_NEEDED if needs_action else ExitCode.OK)

    @ledger.command(name="repair")
    @_ledger_options
    @kafka_options
    @strategy_options
    @click.option(
        "--dry-run/--execute", "dry_run", default=True, help="Print the plan (default), or apply it."
    )
    @click.option(
        "--data-table",
        metavar="PATH",
        default=None,
        help="The Delta table the job appends to (txnAppId = pipeline): refuse while it holds a batch the "
        "ledger does not (a run died between its appends).",
    )
    @ledger_isolation
    @output_option()
    def repair_cmd(
        table: str,
        conf_file: str | None,
        pipeline: str | None,
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
        data_table: str | None,
        isolation: str,
        output: str,
    ) -> None:
        """Plan (and with --execute, append) correction rows that move the ledger's offsets.

        Dry run by default. --execute appends one row per moved partition under a new batch id, in one
        commit whose custom metadata (stream-recovery.plan) holds the plan; history is never rewritten,
        so time travel to the version before undoes it. Exit 0 applied (or nothing to do), 1 changes
        pending in a dry run or refused, 2 bad input, 3 unreachable.

        Example: stream-recovery ledger repair /tables/ledger --pipeline orders -b kafka:9092 --execute
        """
        from recovery.delta.api import ledger_time_targets, repair_ledger
        from recovery.kafka.admin import Isolation, NoMatch
        from recovery.model import Policy

        conf = _conf(table, conf_file, pipeline, data_table)
        level = Isolation(isolation)

        def resolve_time(ts_ms: int, no_match_name: str) -> dict[Any, int]:
            return ledger_time_targets(conf, kafka, ts_ms, NoMatch(no_match_name), isolation=level)

        args = StrategyArgs(
            strategy, on_beyond_end, to_datetime, by_duration, shift_by, to_offset, from_file, no_match
        )
        chosen = build_strategy(args, parse_scope(topics), resolve_time)
        result = repair_ledger(
            conf,
            kafka,
            chosen,
            Policy(max_loss_records, max_loss_per_partition),
            execute=not dry_run,
            isolation=level,
        )
        ledger_plan, plan, state = result.ledger, result.ledger.plan, result.ledger.state
        if output == "json":
            body = {
                "table": state.table,
                "pipeline": state.pipeline,
                "from_version": state.version,
                "batch_id": state.next_batch_id,
                "strategy": plan.strategy,
                "isolation": isolation,
                "partitions": _ledger_rows(finding_rows(plan.findings)),
                "moves": _ledger_rows(move_rows(plan.moves)),
                "rows": [
                    {"topic": r.tp.topic, "partition": r.tp.partition}
                    | {"start_offset": r.start_offset, "end_offset": r.end_offset, "note": r.note}
                    for r in ledger_plan.rows
                ],
                "dropped": [{"topic": m.tp.topic, "partition": m.tp.partition} for m in ledger_plan.dropped],
                "totals": {"lost": plan.lost, "skipped": plan.skipped, "replayed": plan.replayed},
                "refused": plan.refused,
                "executed": result.executed,
                "version": result.version,
            }
            click.echo(json.dumps(body, indent=2))
        else:
            _context(state)
            emit(move_rows(plan.moves), "table", LEDGER_MOVE_COLUMNS)
            for move in plan.moves:
                click.echo(f"% {move.tp}: {move.reason}", err=True)
            click.echo(
                f"% strategy {plan.strategy}: {len(plan.moves)} partitions move, {plan.lost} records lost, "
                f"{plan.skipped} skipped, {plan.replayed} replayed",
                err=True,
            )
        for move in ledger_plan.dropped:
            click.echo(f"% {move.tp}: no ledger row can drop a partition; stop the job reading it", err=True)
        if plan.refused:
            click.echo(f"Error: repair refused: {plan.refused}. Nothing was written.", err=True)
            sys.exit(ExitCode.ACTION_NEEDED)
        if dry_run:
            if ledger_plan.rows:
                click.echo("% dry run: nothing was written; add --execute to apply", err=True)
            elif ledger_plan.dropped:
                click.echo(_dropped_only(ledger_plan), err=True)
            else:
                click.echo("% nothing to change", err=True)
            sys.exit(ExitCode.ACTION_NEEDED if ledger_plan.rows or ledger_plan.dropped else ExitCode.OK)
        if result.version is not None:
            click.echo(
                f"% appended {len(ledger_plan.rows)} correction rows as batch {state.next_batch_id} in "
                f"version {result.version}; time travel to version {state.version} undoes it",
                err=True,
            )
        elif ledger_plan.dropped:
            click.echo(_dropped_only(ledger_plan), err=True)
        else:
            click.echo("% nothing to change", err=True)
        # Partitions that are gone still need the job changed, whatever was appended.
        sys.exit(ExitCode.ACTION_NEEDED if ledger_plan.dropped else ExitCode.OK)


def _dropped_only(ledger_plan: Any) -> str:
    gone = ", ".join(str(m.tp) for m in ledger_plan.dropped)
    return (
        f"% nothing was written: the only changes are partitions that are gone ({gone}), which a ledger "
        "row cannot express; stop the job reading them"
    )
