"""Use cases for Delta-tracked positions in a Spark checkpoint: read -> plan -> apply -> report.

    result = plan_delta_source("/chk", {"0": "/tables/orders"}, sink="/tables/out")
    result.plan.findings      # per Delta source: verdict, Spark's predicted error, versions lost
    result.sink_warning       # the Delta sink would skip batches of this query (None: it won't)
    repair_delta_source("/chk", "/tables/orders", execute=True)   # backup, then rewrite offsets/

``sink_warning`` (:mod:`recovery.delta.sink`) is also what ``validate``, ``repair`` and
``starting-offsets`` call for Kafka checkpoints whose sink is a Delta table. The offset-ledger use
cases are in :mod:`recovery.delta.ledger`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from recovery.checkpoint import Checkpoint, Issue, Level, checkpoint_lock, open_checkpoint
from recovery.checkpoint.format import DeltaSourceOffset, SourceKind
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.rewrite import apply_rewrite, plan_delta_rewrite
from recovery.core.model import DEFAULT_ACTIVE_WITHIN_S, CheckpointFile
from recovery.core.restart import NextRun
from recovery.core.runway import format_duration_ms
from recovery.delta.log import read_table_log
from recovery.delta.model import (
    DeltaFinding,
    DeltaPosition,
    DeltaSourceRead,
    DeltaSourceRepair,
    DeltaSourceResult,
    DeltaStrategy,
    DeltaVerdict,
)
from recovery.delta.runway import delta_runway
from recovery.delta.sink import judge_sink, refuse_sink_skip
from recovery.delta.sink import sink_warning as sink_warning  # one of this family's use cases
from recovery.delta.source import plan_source_repair
from recovery.errors import InvalidInput, LossBudgetExceeded, StateError

# How a Delta source AT_RISK starts its warning in ``validate``'s issues (its exit code counts them).
DELTA_AT_RISK = "Delta source AT_RISK:"


def delta_source_reads(chk: Checkpoint, tables: Mapping[str, str] | str) -> tuple[DeltaSourceRead, ...]:
    """The Delta source lines Spark reads on restart, with the table each source reads.

    ``tables`` maps source ids to table paths; a plain path names the table of the only Delta source
    (a checkpoint does not record a Delta source's path, only its table id).
    """
    state = chk.restart_state()
    rerun, latest = state.next_run is not NextRun.NEXT_BATCH, state.latest_offsets
    if latest is None:
        return ()
    end_entry = chk.offsets(latest)
    # the batch before N as Spark reads it: N-1, or the one before on disk (async progress tracking)
    start_entry = chk.offsets(state.previous) if state.previous is not None else None
    delta = [s for s in end_entry.sources if s.kind is SourceKind.DELTA and s.delta is not None]
    if isinstance(tables, str):
        if len(delta) != 1:
            raise InvalidInput(
                f"{chk.store.display(str(CheckpointFile.offsets(latest)))}: {len(delta)} Delta sources; name "
                "each table "
                "as SOURCE_ID=PATH"
            )
        tables = {delta[0].source_id: tables}
    unknown = sorted(set(tables) - {s.source_id for s in delta})
    if unknown:
        raise InvalidInput(
            f"{chk.store.display(str(CheckpointFile.offsets(latest)))}: no Delta source {', '.join(unknown)} "
            "(Delta sources: "
            f"{', '.join(s.source_id for s in delta) or 'none'})"
        )
    reads = []
    for source in delta:
        if source.source_id not in tables:
            continue
        assert source.delta is not None
        start = None
        if start_entry is not None:
            before = next((s for s in start_entry.sources if s.source_id == source.source_id), None)
            if before is not None and before.delta is not None:
                start = DeltaPosition(CheckpointFile.offsets(start_entry.batch_id), before.delta)
        end = DeltaPosition(CheckpointFile.offsets(latest), source.delta)
        reads.append(DeltaSourceRead(source.source_id, tables[source.source_id], start, end, rerun))
    return tuple(reads)


def plan_delta_source(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    sink: str | None = None,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
    storage_options: StorageOptions | None = None,
    table_options: Mapping[str, str] | None = None,
    runway_warn_s: float | None = None,
) -> DeltaSourceResult:
    """Validate a checkpoint's Delta sources against their tables and plan a repair (no writes).
    Each source Spark resumes cleanly gets its runway (:mod:`recovery.delta.runway`): with
    ``runway_warn_s``, one whose runway is shorter becomes AT_RISK."""
    chk = open_checkpoint(checkpoint, storage_options)
    warn_ms = _warn_ms(runway_warn_s)
    return _plan(chk, tables, strategy, sink, max_versions, adopt_new_table, table_options, warn_ms)


def _warn_ms(runway_warn_s: float | None) -> int | None:
    if runway_warn_s is None:
        return None
    if runway_warn_s <= 0:
        raise InvalidInput(
            f"runway_warn_s must be positive, not {runway_warn_s:g}s", parameter="runway_warn_s"
        )
    return int(runway_warn_s * 1000)


def _plan(
    chk: Checkpoint,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy,
    sink: str | None,
    max_versions: int | None,
    adopt_new_table: bool,
    table_options: Mapping[str, str] | None,
    warn_ms: int | None = None,
) -> DeltaSourceResult:
    # A checkpoint Spark cannot restart from is still judged (what its offsets need), and the reason
    # reported with the findings; repair_delta_source refuses to write to it.
    problem = chk.restart_problem()
    next_batch = chk.restart_state().batch_id
    reads = delta_source_reads(chk, tables)
    logs = {
        r.source_id: read_table_log(
            r.table,
            table_options,
            files_from=min(p.offset.reservoir_version for p in r.positions),
            # the resume version (the lag in time), the first commit listed on restart, and the
            # version before (a first batch rebuilds its snapshot)
            times_of={p.offset.reservoir_version + d for p in r.positions for d in (-1, 0, 1)},
        )
        for r in reads
    }
    plan = plan_source_repair(
        reads,
        logs,
        strategy,
        checkpoint=chk.location,
        query_id=chk.query_id,
        batch_id=next_batch,
        max_versions=max_versions,
        adopt_new_table=adopt_new_table,
    )
    # The runway is judged after the repair plan: an AT_RISK source needs starting, not moving.
    now_ms = int(time.time() * 1000)
    by_id = {r.source_id: r for r in reads}
    judged = tuple(
        delta_runway(f, by_id[f.source_id], logs[f.source_id], now_ms=now_ms, warn_ms=warn_ms)
        for f in plan.findings
    )
    plan = replace(plan, findings=judged)
    warning = None
    if sink is not None:
        warning = judge_sink(chk, sink, plan.files, table_options, strict=False)
    return DeltaSourceResult(plan, warning, restart_problem=problem, runway_at_ms=now_ms)


def repair_delta_source(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    execute: bool = False,
    sink: str | None = None,
    accept_sink_skip: bool = False,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
    storage_options: StorageOptions | None = None,
    table_options: Mapping[str, str] | None = None,
    backup_dir: str | None = None,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
) -> DeltaSourceRepair:
    """Plan, and with ``execute`` apply: back up, then rewrite the Delta source lines in place.

    Before writing, the same guards as a Kafka repair (:mod:`recovery.apply`), each raising with
    nothing written: LossBudgetExceeded when the plan is refused; StateError when Spark cannot
    restart from the checkpoint at all; SinkWouldSkip when the Delta ``sink`` would skip the
    rewritten batches (unless ``accept_sink_skip``); CheckpointInUse when the query runs: a fresh
    heartbeat (:mod:`recovery.checkpoint.heartbeat`) or, without one, a batch file younger than
    ``active_within_s`` (unless ``force``).
    """
    command = "repair_delta_source"
    # Executing: plan under the write lock, which first rolls back a killed command.
    guard: AbstractContextManager[object] = (
        checkpoint_lock(checkpoint, storage_options, command=command) if execute else nullcontext()
    )
    with guard:
        chk = open_checkpoint(checkpoint, storage_options)
        planned = _plan(chk, tables, strategy, sink, max_versions, adopt_new_table, table_options)
        result = DeltaSourceRepair(
            planned.plan, planned.sink_warning, restart_problem=planned.restart_problem
        )
        plan = result.plan
        if not execute or not plan.moves:
            return result
        if plan.refused:
            raise LossBudgetExceeded(f"{chk.location}: repair refused: {plan.refused}. Nothing was written.")
        if result.restart_problem is not None:
            raise StateError(f"{result.restart_problem}. Fix that first; nothing was written.")
        if sink is not None and not accept_sink_skip:
            refuse_sink_skip(chk, sink, plan.files, table_options=table_options)
        batches: dict[int, dict[int | str, DeltaSourceOffset]] = {}
        for move in plan.moves:
            batches.setdefault(move.file.batch_id, {})[move.source_id] = move.new
        rewrite = plan_delta_rewrite(chk, batches)
        backup = apply_rewrite(  # refuses while the query runs, unless force
            chk,
            rewrite,
            backup_dir=backup_dir,
            storage_options=storage_options,
            command=command,
            force=force,
            active_within_s=active_within_s,
        )
    return DeltaSourceRepair(plan, result.sink_warning, backup.id, result.restart_problem, dry_run=False)


def delta_source_issues(
    checkpoint: str | Checkpoint,
    tables: Mapping[str, str] | None = None,
    *,
    storage_options: StorageOptions | None = None,
    table_options: Mapping[str, str] | None = None,
    runway_warn_s: float | None = None,
) -> tuple[Issue, ...]:
    """The Delta sources of a checkpoint that also has Kafka sources, as ``validate``'s issues, so
    one command covers every source: each source named in ``tables`` (source id -> table path) is
    judged (an error per finding that needs a repair, naming Spark's condition and the repair
    command; a warning for one AT_RISK under ``runway_warn_s``, starting with
    :data:`DELTA_AT_RISK`); a Delta source not named is an error too: it was not checked, and
    "healthy" would be a guess. No Delta source: nothing."""
    chk = checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(checkpoint, storage_options)
    latest = chk.latest_offsets()
    ids = sorted(s.source_id for s in (latest.sources if latest else ()) if s.kind is SourceKind.DELTA)
    if not ids:
        return ()
    named = {k: v for k, v in (tables or {}).items() if k in ids}
    issues: list[Issue] = []
    unchecked = [i for i in ids if i not in named]
    if unchecked:
        which, table = ", ".join(unchecked), {unchecked[0]: "TABLE"}
        issues.append(
            Issue(
                Level.ERROR,
                f"Delta source {which} not checked (a checkpoint records a Delta source's table id, not "
                f"its path): give `delta_tables={table!r}`, or run "
                f"`plan_delta_source({chk.location!r}, tables={table!r})`",
            )
        )
    if named:
        result = _plan(
            chk, named, DeltaStrategy.CLAMP, None, None, False, table_options, _warn_ms(runway_warn_s)
        )
        for f in result.plan.findings:
            runway = f"; {_runway_text(f, result.runway_at_ms or 0)}" if f.runway is not None else ""
            if f.verdict is DeltaVerdict.AT_RISK:
                issues.append(Issue(Level.WARNING, f"{DELTA_AT_RISK} {f.source_id} ({f.table}): {f.detail}"))
                continue
            if not f.needs_action:
                issues.append(Issue(Level.INFO, f"Delta source {f.source_id} ({f.table}): OK{runway}"))
                continue
            outcome = f"Spark fails with {f.spark_error}" if f.spark_error else "Spark skips versions"
            repair = f"repair_delta_source({chk.location!r}, tables={ {f.source_id: f.table}!r})"
            issues.append(
                Issue(
                    Level.ERROR,
                    f"Delta source {f.source_id} ({f.table}): {f.verdict.value}: {f.detail}; on restart "
                    f"{outcome}; see `{repair}`",
                )
            )
    return tuple(issues)


def _runway_text(f: DeltaFinding, now_ms: int) -> str:
    """``runway 29d23h (delta.logRetentionDuration=30d: ...)``, or the reason alone when unlimited."""
    assert f.runway is not None
    if f.runway.earliest_delete_ms is None:
        return f.runway.reason
    left = f.runway.left_ms(now_ms) or 0  # as judged, not as printed
    return f"runway {format_duration_ms(left) if left > 0 else 'due'} ({f.runway.reason})"
