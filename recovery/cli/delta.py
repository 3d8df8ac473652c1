"""``stream-recovery delta-source validate|repair CHECKPOINT``: Delta tables as streaming sources.

A Delta source's offset (``reservoirVersion``) breaks when log retention or VACUUM removes what it
still needs, or when the table is re-created. ``validate`` predicts Spark's error; ``repair`` prints
the plan (dry run) and ``--execute`` backs up and rewrites the offsets. The JSON keys are documented
in :mod:`recovery.cli.report.delta`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping

import click

from recovery.cli import render
from recovery.cli.options import (
    F,
    accept_sink_skip_option,
    checkpoint_write_options,
    execute_option,
    output_option,
    runway_warn_option,
    sink_option,
    stack,
    storage_option,
)
from recovery.cli.report import delta as report
from recovery.delta.api import plan_delta_source, repair_delta_source
from recovery.delta.model import DeltaStrategy

# ID=TABLE: a source's index, or with several tables its name too (Spark 4.2's DataStreamReader.name).
_SOURCE_ID = re.compile(r"^([A-Za-z0-9_]+)=(.+)$")
_SOURCE_INDEX = re.compile(r"^(\d+)=(.+)$")


def _tables(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Mapping[str, str] | str:
    """One plain table, or SOURCE_ID=TABLE per source. One value is a source id only after a leading
    index (``1=/lake/t``); with several, a source's name (letters, digits, underscores) may lead too.
    A path such as ``/lake/env=prod/t`` stays a path."""
    if len(values) == 1 and not _SOURCE_INDEX.match(values[0]):
        return values[0]  # one table: a path such as dt=2024/orders stays a path
    out: dict[str, str] = {}
    for value in values:
        m = _SOURCE_ID.match(value)
        if m is None:
            raise click.BadParameter(
                f"expected SOURCE_ID=TABLE for each of several tables, got {value!r}", ctx, param
            )
        out[m.group(1)] = m.group(2)
    return out


def _common(func: F) -> F:
    decorators = [
        click.argument("checkpoint"),
        click.option(
            "--table",
            "tables",
            multiple=True,
            required=True,
            metavar="[SOURCE_ID=]TABLE",
            callback=_tables,
            help="The Delta table a source reads (the checkpoint records only its id); repeatable as "
            "SOURCE_ID=TABLE for several sources.",
        ),
        sink_option("The query's Delta sink table: warn when it would skip batches (txn version)."),
        storage_option,
        output_option("table", "json"),
    ]
    return stack(func, decorators)


@click.group(name="delta-source")
def delta_source() -> None:
    """Validate and repair the offsets of Delta tables read as streaming sources."""


@delta_source.command(name="validate")
@_common
@runway_warn_option(
    "Verdict AT_RISK (exit 1) for a source Spark resumes cleanly when the table's log cleanup or "
    "VACUUM may remove what it still needs within DURATION (ISO-8601 PT6H, or 6h, 1h30m, 2d). "
    "Default: no threshold; the RUNWAY column is shown anyway."
)
def validate_cmd(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    sink: str | None,
    storage_options: dict[str, str],
    output: str,
    runway_warn_s: float | None,
) -> None:
    """Check each Delta source's offset against what its table's _delta_log still holds.

    Exit 1 when Spark would fail on restart, the sink would skip batches, or (with --runway-warn)
    a source is AT_RISK. RUNWAY: the time until log cleanup (delta.logRetentionDuration, from the
    time of the first commit the restart lists) or VACUUM (delta.deletedFileRetentionDuration, from
    the removal of a file the stream has still to read) may remove what the stream needs: a lower
    bound (Delta Lake on Spark waits until the next UTC midnight after it; VACUUM runs when
    someone runs it).

    Example: stream-recovery delta-source validate /chk/orders --table /tables/orders --sink /tables/out
    """
    with render.waiting("reading the checkpoint and the Delta logs"):
        result = plan_delta_source(
            checkpoint, tables, sink=sink, storage_options=storage_options, runway_warn_s=runway_warn_s
        )
    if output == "json":
        render.emit_json(report.source_body(result))
    else:
        render.emit(report.source_finding_rows(result), "table", report.SOURCE_FINDING_COLUMNS)
        for line in report.source_notes(result, repair=False):
            render.note(line)
    sys.exit(result.exit_code)


@delta_source.command(name="repair")
@_common
@click.option(
    "--strategy",
    type=click.Choice([s.value for s in DeltaStrategy]),
    default=DeltaStrategy.CLAMP.value,
    show_default=True,
    help="clamp: to the earliest version the log still holds; latest: skip to the next version.",
)
@click.option(
    "--max-versions",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Refuse a plan whose versions lost plus versions skipped exceed N.",
)
@click.option("--adopt-new-table", is_flag=True, help="Allow moving a source onto a re-created table.")
@accept_sink_skip_option
@execute_option
@checkpoint_write_options
def repair_cmd(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    sink: str | None,
    storage_options: dict[str, str],
    output: str,
    strategy: str,
    max_versions: int | None,
    adopt_new_table: bool,
    accept_sink_skip: bool,
    dry_run: bool,
    force: bool,
    active_within: float,
    backup_dir: str | None,
) -> None:
    """Move Delta source offsets past versions that are gone; dry run unless --execute.

    --execute backs up every offsets file it changes and rewrites the Delta source lines in place;
    it refuses when the --sink table would skip the rewritten batches. Exit 0 applied (or nothing
    to do), 1 changes pending in a dry run or refused, 2 bad input.

    Example: stream-recovery delta-source repair /chk/orders --table /tables/orders --execute
    """
    with render.waiting("planning the repair"):
        result = repair_delta_source(
            checkpoint,
            tables,
            DeltaStrategy(strategy),
            execute=not dry_run,
            sink=sink,
            accept_sink_skip=accept_sink_skip,
            max_versions=max_versions,
            adopt_new_table=adopt_new_table,
            storage_options=storage_options,
            backup_dir=backup_dir,
            force=force,
            active_within_s=active_within,
        )
    if output == "json":
        render.emit_json(report.source_body(result))
    else:
        render.emit(report.source_move_rows(result), "table", report.SOURCE_MOVE_COLUMNS)
        for line in report.source_notes(result, repair=True):
            render.note(line)
    refusal = report.refusal_line(result.plan.refused)
    if refusal:
        click.echo(f"Error: {refusal}", err=True)
    sys.exit(result.exit_code)


def register(cli: click.Group) -> None:
    cli.add_command(delta_source)
