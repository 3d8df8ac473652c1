"""``stream-recovery ledger show|validate|repair TABLE``: Kafka offsets kept in a Delta ledger table.

The ledger's latest ``end_offset`` per partition is where the next run starts. ``validate`` judges
those offsets against Kafka with the same planning core as checkpoints; ``repair`` prints the plan
(dry run) and ``--execute`` appends correction rows in one commit whose custom metadata
(``stream-recovery.plan``) names the plan; history is never rewritten. The JSON keys are documented
in :mod:`recovery.cli.report.delta`.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING

import click

from recovery.cli import render
from recovery.cli.options import (
    F,
    execute_option,
    isolation_option,
    kafka_options,
    output_option,
    stack,
    strategy_options,
)
from recovery.cli.report import delta as report
from recovery.core.model import Isolation, Policy
from recovery.core.strategy import StrategyRequest
from recovery.kafka.config import KafkaConfig

if TYPE_CHECKING:
    from recovery.delta.ledger_conf import LedgerConf

ledger_isolation = isolation_option(
    "The job's kafka.isolation.level: read_committed judges against the last stable offset."
)


def _conf(table: str, conf_file: str | None, pipeline: str | None, data_table: str | None) -> LedgerConf:
    # Imported here, as in each command below: recovery.delta.ledger_conf loads pydantic (the
    # [ledger] section's format), which --help must not.
    from recovery.delta.ledger_conf import load_conf, make_conf

    if conf_file is not None:
        return load_conf(conf_file, table=table, pipeline=pipeline, data_table=data_table)
    # Without --pipeline, read_ledger refuses a table whose pipeline column names pipelines (exit 2).
    values = {"table": table, "pipeline": pipeline, "data_table": data_table}
    return make_conf(values, name="--pipeline", pipeline_required=False)


def ledger_options(func: F) -> F:
    """``TABLE``, ``--conf FILE``, ``--pipeline P`` (and ``--data-table`` where the command has it):
    the command receives one ``conf: LedgerConf``."""

    @functools.wraps(func)
    def wrapper(
        *args: object,
        table: str,
        conf_file: str | None,
        pipeline: str | None,
        data_table: str | None = None,  # only where the command has --data-table
        **kwargs: object,
    ) -> object:
        return func(*args, conf=_conf(table, conf_file, pipeline, data_table), **kwargs)

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
    return stack(wrapper, decorators)  # type: ignore[return-value]


@click.group(name="ledger")
def ledger() -> None:
    """Show, validate and repair Kafka offsets kept in a Delta ledger table."""


@ledger.command(name="show")
@ledger_options
@output_option("table", "json", "csv")
def show_cmd(conf: LedgerConf, output: str) -> None:
    """Print the latest committed offset of each partition: where the next run starts.

    Example: stream-recovery ledger show /tables/ledger --pipeline orders-hourly
    """
    from recovery.delta.ledger_table import read_ledger  # pydantic: see _conf

    with render.waiting("reading the ledger"):
        state = read_ledger(conf)
    if output == "table":
        render.note(report.ledger_context(state))
    render.emit(report.show_rows(state), output, report.SHOW_COLUMNS)


data_table_option = click.option(
    "--data-table",
    metavar="TABLE",
    default=None,
    help="The Delta table the job appends to (txnAppId = pipeline): a batch it holds that the ledger "
    "does not (a run died between its appends) is judged as written, not as loss; repair --execute "
    "writes its ledger rows first.",
)


@ledger.command(name="validate")
@ledger_options
@kafka_options
@data_table_option
@ledger_isolation
@output_option()
def validate_cmd(conf: LedgerConf, kafka: KafkaConfig, isolation: Isolation, output: str) -> None:
    """Say what the next run does with the ledger's latest offsets, per Kafka partition.

    Never writes. Exit 0 healthy, 1 action needed, 2 bad input, 3 Kafka or storage unreachable.

    Example: stream-recovery ledger validate /tables/ledger --pipeline orders -b kafka:9092
    """
    from recovery.delta.ledger import plan_ledger  # pydantic: see _conf

    with render.waiting("reading the ledger and the cluster"):
        result = plan_ledger(conf, kafka, isolation=isolation)
    if output == "json":
        render.emit_json(report.validate_body(result))
    else:
        render.note(report.ledger_context(result.state))
        render.emit(
            report.ledger_finding_rows(result.plan.findings, table=True),
            "table",
            report.LEDGER_VALIDATE_COLUMNS,
        )
        for line in report.validate_notes(result):
            render.note(line)
    sys.exit(result.exit_code)


@ledger.command(name="repair")
@ledger_options
@kafka_options
@strategy_options
@execute_option
@data_table_option
@ledger_isolation
@output_option()
def repair_cmd(
    conf: LedgerConf,
    kafka: KafkaConfig,
    request: StrategyRequest,
    policy: Policy,
    dry_run: bool,
    isolation: Isolation,
    output: str,
) -> None:
    """Plan (and with --execute, append) correction rows that move the ledger's offsets.

    Dry run by default. --execute appends one row per moved partition under a new batch id, in one
    commit whose custom metadata (stream-recovery.plan) holds the plan; history is never rewritten,
    so time travel to the version before undoes it. Exit 0 applied (or nothing to do), 1 changes
    pending in a dry run or refused, 2 bad input, 3 unreachable.

    Example: stream-recovery ledger repair /tables/ledger --pipeline orders -b kafka:9092 --execute
    """
    from recovery.delta.ledger import repair_ledger  # pydantic: see _conf

    with render.waiting("planning the repair"):
        result = repair_ledger(conf, kafka, request, policy, execute=not dry_run, isolation=isolation)
    if output == "json":
        render.emit_json(report.repair_body(result))
    else:
        render.note(report.ledger_context(result.ledger.state))
        render.emit(report.repair_move_rows(result), "table", report.LEDGER_MOVE_COLUMNS)
        for line in report.repair_notes(result):
            render.note(line)
    refusal = report.refusal_line(result.ledger.plan.refused)
    if refusal:
        click.echo(f"Error: {refusal}", err=True)
    sys.exit(result.exit_code)


def register(cli: click.Group) -> None:
    cli.add_command(ledger)
