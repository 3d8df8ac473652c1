"""``stream-recovery delta-source validate|repair CHECKPOINT``: Delta tables as streaming sources.

A Delta source's offset (``reservoirVersion``) breaks when log retention or VACUUM removes what it
still needs, or when the table is re-created. ``validate`` predicts Spark's error; ``repair`` prints
the plan (dry run) and ``--execute`` backs up and rewrites the offsets.

``--output json`` prints one object: ``checkpoint``, ``query_id``, ``batch_id``, ``strategy``,
``findings`` (``source_id``, ``table``, ``verdict``, ``needed_from``, ``resume_from``, ``earliest``,
``latest``, ``versions_lost``, ``files_missing``, ``spark_error``, ``detail``), ``moves``
(``source_id``, ``file``, ``old``, ``new``: offset objects as Delta spells them), ``losses``
(``source_id``, ``versions_lost``, ``versions_skipped``, ``files_skipped``, ``reads_snapshot``: the
version whose snapshot the stream reads in full from its first file or null, ``rereads``), ``refused``,
``sink_warning`` (message or null), ``restart_problem`` (why Spark cannot restart from the checkpoint
at all, or null), ``executed`` and ``backup_id`` (null unless executed).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from recovery.cli.options import (
    checkpoint_write_options,
    output_option,
    parse_storage_options,
    stack,
    storage_option,
)
from recovery.cli.tables import emit
from recovery.errors import ExitCode

if TYPE_CHECKING:
    from recovery.delta.api import DeltaSourceResult


_SOURCE_ID = re.compile(r"^(\d+)=(.+)$")


def _tables(values: tuple[str, ...]) -> Mapping[str, str] | str:
    """One plain path, or SOURCE_ID=PATH per source. Only a leading ``<digits>=`` is a source id, so
    a path such as ``/lake/env=prod/t`` stays a path."""
    if len(values) == 1 and not _SOURCE_ID.match(values[0]):
        return values[0]
    out: dict[str, str] = {}
    for value in values:
        m = _SOURCE_ID.match(value)
        if m is None:
            raise click.BadParameter(
                f"expected SOURCE_ID=PATH for each of several tables, got {value!r}", param_hint="--table"
            )
        out[m.group(1)] = m.group(2)
    return out


def _offset(value: Any) -> dict[str, Any]:
    from recovery.checkpoint.format import delta_offset_json

    return json.loads(delta_offset_json(value))  # type: ignore[no-any-return]


def result_dict(result: DeltaSourceResult) -> dict[str, Any]:
    plan = result.plan
    return {
        "checkpoint": plan.checkpoint,
        "query_id": plan.query_id,
        "batch_id": plan.batch_id,
        "strategy": plan.strategy,
        "findings": [
            {
                "source_id": f.source_id,
                "table": f.table,
                "verdict": f.verdict.value,
                "needed_from": f.needed_from,
                "resume_from": f.resume_from,
                "earliest": f.earliest,
                "latest": f.latest,
                "versions_lost": f.versions_lost,
                "files_missing": f.files_missing,
                "spark_error": f.spark_error,
                "detail": f.detail,
            }
            for f in plan.findings
        ],
        "moves": [
            {"source_id": m.source_id, "file": m.file, "old": _offset(m.old), "new": _offset(m.new)}
            for m in plan.moves
        ],
        "losses": [
            {
                "source_id": loss.source_id,
                "versions_lost": loss.versions_lost,
                "versions_skipped": loss.versions_skipped,
                "files_skipped": loss.files_skipped,
                "reads_snapshot": loss.reads_snapshot,
                "rereads": loss.rereads,
            }
            for loss in plan.losses
        ],
        "refused": plan.refused,
        "sink_warning": result.sink_warning.message if result.sink_warning else None,
        "restart_problem": result.restart_problem,
        "executed": result.executed,
        "backup_id": result.backup.id if result.backup else None,
    }


FINDING_COLUMNS = (
    ("source", "SOURCE"),
    ("verdict", "VERDICT"),
    ("offset", "OFFSET"),
    ("earliest", "EARLIEST"),
    ("latest", "LATEST"),
    ("versions_lost", "LOST-VERSIONS"),
    ("files_missing", "MISSING-FILES"),
    ("on_restart", "SPARK-ON-RESTART"),
)
MOVE_COLUMNS = (("source", "SOURCE"), ("file", "FILE"), ("old", "FROM"), ("new", "TO"))


def _print_findings(result: DeltaSourceResult) -> None:
    rows = [
        {
            "source": f.source_id,
            "verdict": f.verdict.value,
            "offset": f.resume_from,
            "earliest": f.earliest,
            "latest": f.latest,
            "versions_lost": f.versions_lost,
            "files_missing": f.files_missing,
            "on_restart": f.spark_error or ("skips versions" if f.needs_action else "runs"),
        }
        for f in result.plan.findings
    ]
    emit(rows, "table", FINDING_COLUMNS)


def _version(offset: Any) -> str:
    text = str(offset.reservoir_version)
    if offset.is_starting_version:
        text += " (snapshot)"
    if offset.index != -1:
        text += f" index {offset.index}"
    return text


def _print_moves(result: DeltaSourceResult) -> None:
    rows = [
        {"source": m.source_id, "file": m.file, "old": _version(m.old), "new": _version(m.new)}
        for m in result.plan.moves
    ]
    emit(rows, "table", MOVE_COLUMNS)


def _notes(result: DeltaSourceResult, *, repair: bool) -> None:
    for f in result.plan.findings:
        if f.detail:
            click.echo(f"% source {f.source_id} ({f.table}): {f.detail}", err=True)
    if repair:
        plan = result.plan
        click.echo(
            f"% {plan.strategy}: {plan.versions_lost} versions lost (commits gone), "
            f"{plan.versions_skipped} versions skipped ({plan.files_skipped} data files)",
            err=True,
        )
        for loss in plan.losses:
            if loss.reads_snapshot is None:
                continue
            if loss.rereads:
                what = "rows it delivered before are delivered again (nothing skipped)"
            else:
                what = "the new table is read in full"
            click.echo(
                f"% source {loss.source_id}: reads the snapshot of version {loss.reads_snapshot} from its "
                f"first file: {what}",
                err=True,
            )
    if result.sink_warning:
        click.echo(f"warning: {result.sink_warning.message}", err=True)
    if result.restart_problem:
        click.echo(f"% {result.restart_problem}", err=True)


def _common(func: Any) -> Any:
    decorators = [
        click.argument("checkpoint"),
        click.option(
            "-t",
            "--table",
            "tables",
            multiple=True,
            required=True,
            metavar="[SOURCE_ID=]PATH",
            help="The Delta table a source reads (the checkpoint records only its id); repeatable.",
        ),
        click.option(
            "--sink",
            default=None,
            metavar="PATH",
            help="The query's Delta sink table: warn if it would skip batches (txn version).",
        ),
        storage_option,
        output_option("table", "json"),
    ]
    return stack(func, decorators)


def register(cli: click.Group) -> None:
    @cli.group(name="delta-source")
    def delta_source() -> None:
        """Validate and repair the offsets of Delta tables read as streaming sources."""

    @delta_source.command(name="validate")
    @_common
    def validate_cmd(
        checkpoint: str,
        tables: tuple[str, ...],
        sink: str | None,
        storage_options: tuple[str, ...],
        output: str,
    ) -> None:
        """Check each Delta source's offset against what its table's _delta_log still holds.

        Exit 1 when Spark would fail on restart or the sink would skip batches.

        Example: stream-recovery delta-source validate /chk/orders -t /tables/orders --sink /tables/out
        """
        from recovery.delta.api import plan_delta_source

        result = plan_delta_source(
            checkpoint, _tables(tables), sink=sink, storage_options=parse_storage_options(storage_options)
        )
        if output == "json":
            click.echo(json.dumps(result_dict(result), indent=2))
        else:
            _print_findings(result)
        _notes(result, repair=False)
        sys.exit(ExitCode.ACTION_NEEDED if result.needs_action else ExitCode.OK)

    @delta_source.command(name="repair")
    @_common
    @click.option(
        "--strategy",
        type=click.Choice(["clamp", "latest"]),
        default="clamp",
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
    @click.option(
        "--dry-run/--execute", "dry_run", default=True, help="Print the plan (default), or apply it."
    )
    @checkpoint_write_options
    def repair_cmd(
        checkpoint: str,
        tables: tuple[str, ...],
        sink: str | None,
        storage_options: tuple[str, ...],
        output: str,
        strategy: str,
        max_versions: int | None,
        adopt_new_table: bool,
        dry_run: bool,
        force: bool,
        active_within: float,
        backup_dir: str | None,
    ) -> None:
        """Move Delta source offsets past versions that are gone; dry run unless --execute.

        --execute backs up every offsets file it changes and rewrites the Delta source lines in place.
        Exit 0 applied (or nothing to do), 1 changes pending in a dry run or refused, 2 bad input.

        Example: stream-recovery delta-source repair /chk/orders -t /tables/orders --execute
        """
        from recovery.delta.api import repair_delta_source
        from recovery.delta.model import DeltaStrategy

        result = repair_delta_source(
            checkpoint,
            _tables(tables),
            DeltaStrategy(strategy),
            execute=not dry_run,
            sink=sink,
            max_versions=max_versions,
            adopt_new_table=adopt_new_table,
            storage_options=parse_storage_options(storage_options),
            backup_dir=backup_dir,
            force=force,
            active_within_s=active_within,
        )
        if output == "json":
            click.echo(json.dumps(result_dict(result), indent=2))
        else:
            _print_moves(result)
        _notes(result, repair=True)
        plan = result.plan
        if plan.refused:
            click.echo(f"Error: repair refused: {plan.refused}. Nothing was written.", err=True)
            sys.exit(ExitCode.ACTION_NEEDED)
        if not plan.moves:
            if result.restart_problem:
                sys.exit(ExitCode.ACTION_NEEDED)  # the offsets are fine; the checkpoint is not
            click.echo("% nothing to change", err=True)
        elif result.backup is not None:
            click.echo(
                f"% rewrote {', '.join(plan.files)}; originals backed up as {result.backup.id}", err=True
            )
        else:
            click.echo("% dry run: nothing was written; add --execute to apply", err=True)
            sys.exit(ExitCode.ACTION_NEEDED)
        sys.exit(ExitCode.OK)
