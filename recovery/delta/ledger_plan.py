"""The planning core for offset ledgers: a ledger and a cluster view in, a :class:`LedgerPlan` out.

A ledger is judged exactly as a checkpoint is: :func:`ledger_view` presents it to
:func:`recovery.core.plan.decide_repair` as one source whose start is each partition's latest
``end_offset``. Partitions the ledger knows that Kafka no longer has are absent from the cluster
view, and the core judges them ``PARTITION_GONE``/``TOPIC_GONE``; :func:`correction_rows` turns the
moves into rows and sets those drops apart (no row can delete a partition).

No IO, no clock: the time of the correction rows is an argument.
"""

from __future__ import annotations

from dataclasses import replace

from recovery.core.model import (
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Isolation,
    Move,
    Plan,
    Policy,
    SourcePosition,
    Strategy,
)
from recovery.core.plan import decide_repair
from recovery.delta.ledger_model import (
    SOURCE_ID,
    WRITTEN_BY,
    LedgerEntry,
    LedgerPlan,
    LedgerRow,
    LedgerState,
    PendingBatch,
)


def ledger_view(state: LedgerState) -> CheckpointView:
    """The ledger as the planning core sees a checkpoint: one source whose start is the latest
    ``end_offset`` of each partition (the next run's ``startingOffsets``)."""
    label = state.table if state.pipeline is None else f"{state.table} ({state.pipeline})"
    # A ledger has no offsets files; the batch whose start these are stands in for one.
    source = SourcePosition(SOURCE_ID, CheckpointFile.offsets(state.next_batch_id), state.positions)
    return CheckpointView(label, state.pipeline or "", state.next_batch_id, False, (source,))


def with_pending(state: LedgerState, pending: PendingBatch | None) -> LedgerState:
    """The ledger as it is once the pending batch's rows are written (what the job's next run does
    first): each of its partitions at the end its data commit recorded, the next batch after it."""
    if pending is None:
        return state
    entries = {e.tp: e for e in state.entries}
    for tp, end in pending.end.items():
        entries[tp] = LedgerEntry(tp, end, pending.batch_id, note=f"pending: in {pending.data_table}")
    return replace(
        state,
        next_batch_id=max(state.next_batch_id, pending.batch_id + 1),
        entries=tuple(entries[tp] for tp in sorted(entries)),
    )


def correction_rows(
    state: LedgerState, plan: Plan, *, now_us: int
) -> tuple[tuple[LedgerRow, ...], tuple[Move, ...]]:
    """One row per moved partition, under the next batch id; moves that drop a partition are
    returned apart (a row cannot delete a partition: the job must stop reading it)."""
    rows: list[LedgerRow] = []
    dropped: list[Move] = []
    for move in plan.moves:
        if move.new is None:
            dropped.append(move)
            continue
        cost = ", ".join(
            f"{what} {n}"
            for what, n in (("lost", move.lost), ("skipped", move.skipped), ("replayed", move.replayed))
            if n
        )
        note = f"{plan.strategy}: {move.verdict}" + (f" ({cost})" if cost else "")
        rows.append(
            LedgerRow(
                pipeline=state.pipeline,
                batch_id=state.next_batch_id,
                tp=move.tp,
                start_offset=move.old,
                end_offset=move.new,
                committed_at_us=now_us,
                written_by=WRITTEN_BY,
                note=note,
            )
        )
    return tuple(rows), tuple(dropped)


def plan_ledger_repair(
    state: LedgerState,
    cluster: ClusterView,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    now_us: int,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    pending: PendingBatch | None = None,
) -> LedgerPlan:
    """Findings for every partition of the ledger's topics, and the correction rows ``strategy``
    (default: clamp) makes, checked against ``policy``. A ``pending`` batch (in the data table, not
    in the ledger) is judged as written: its records are not lost, and a correction never takes its
    batch id."""
    state = with_pending(state, pending)
    plan = decide_repair(ledger_view(state), cluster, strategy, policy)
    rows, dropped = correction_rows(state, plan, now_us=now_us)
    return LedgerPlan(state, plan, rows, dropped, isolation, pending)
