"""The planning core: values already read in, findings and a repair plan out. No IO, no clock.

``assess`` judges every partition of every Kafka source of a checkpoint against the live cluster
and predicts what Spark does on restart. ``plan_repair`` turns the findings and a strategy into a
:class:`~recovery.model.Plan`: which values in which files change, and what that costs in records.

The default strategy repairs the way a Kafka follower handles OFFSET_OUT_OF_RANGE
(``AbstractFetcherThread.fetchOffsetAndTruncate``): a position below the leader's log start moves up
to the log start (the records in between are gone); a position beyond the log end moves down to it
(the topic was recreated or the log truncated; ``on_beyond_end="earliest"`` re-reads a recreated
topic instead). The other strategies are kafka-consumer-groups' ``--reset-offsets`` ones, and like
that tool they clamp every target into [log start, log end].

Which files (spec §5.2): after a committed batch N, Spark starts from ``offsets/N``; when batch N is
uncommitted it re-runs [``offsets/N-1`` (or ``sources/<i>/0``), ``offsets/N``), so both ends change,
monotonically, keeping start <= end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from recovery.model import (
    ADDED_NOT_FROM_ZERO,
    COULD_NOT_READ,
    OFFSET_CHANGED,
    PARTITIONS_DELETED,
    CheckpointView,
    ClusterView,
    Finding,
    Move,
    OffsetChange,
    OffsetRange,
    OnBeyondEnd,
    Plan,
    Policy,
    SourcePosition,
    StartingOffset,
    Strategy,
    StrategyKind,
    TopicPartition,
    Verdict,
)


def clamp(offset: int, available: OffsetRange) -> int:
    return min(max(offset, available.start), available.end)


# -- findings ------------------------------------------------------------------------------------


def assess(view: CheckpointView, cluster: ClusterView) -> tuple[Finding, ...]:
    """Every partition of every Kafka source, sorted by source, topic and partition."""
    findings: list[Finding] = []
    existing = cluster.topics()
    for source in view.sources:
        known = set(source.start) | set(source.end or {})
        for tp in sorted(known):
            findings.append(_judge(source, tp, view, cluster, existing))
        for topic in sorted({tp.topic for tp in known} & existing):
            for tp in sorted(t for t in cluster.partitions if t.topic == topic and t not in known):
                findings.append(_new_partition(source, tp, cluster.partitions[tp]))
    return tuple(findings)


def _judge(
    source: SourcePosition,
    tp: TopicPartition,
    view: CheckpointView,
    cluster: ClusterView,
    existing: frozenset[str],
) -> Finding:
    position = source.start.get(tp)
    batch_end = (source.end or {}).get(tp)
    base = {"source_id": source.source_id, "tp": tp, "position": position, "batch_end": batch_end}
    if tp.topic not in existing:
        return Finding(
            **base,
            verdict=Verdict.TOPIC_GONE,
            available=None,
            spark_error=PARTITIONS_DELETED,
            detail=f"topic {tp.topic} does not exist",
        )
    if tp in cluster.unavailable:
        return Finding(
            **base,
            verdict=Verdict.TRANSIENT,
            available=None,
            detail="offsets not available now (leader change?); retry before deciding",
        )
    available = cluster.partitions.get(tp)
    if available is None:
        return Finding(
            **base,
            verdict=Verdict.PARTITION_GONE,
            available=None,
            spark_error=PARTITIONS_DELETED,
            detail=f"topic {tp.topic} has no partition {tp.partition} any more",
        )
    if position is None:  # only in the stored end of a re-run batch: Spark treats it as added
        return _new_partition(source, tp, available, batch_end=batch_end)

    recorded, current = view.recorded_topic_ids.get(tp.topic), cluster.topic_ids.get(tp.topic)
    recreated = recorded is not None and current is not None and recorded != current
    lost = max(0, available.start - position)
    if position > available.end:
        error = COULD_NOT_READ if view.rerun else OFFSET_CHANGED
        verdict = Verdict.TOPIC_RECREATED if recreated else Verdict.BEYOND_LOG_END
        detail = (
            f"position {position} is past the log end {available.end}: topic recreated or log truncated; "
            f"the {available.size} records now in the partition would not be read"
        )
        return Finding(**base, verdict=verdict, available=available, spark_error=error, detail=detail)
    if lost:
        verdict = Verdict.TOPIC_RECREATED if recreated else Verdict.BELOW_LOG_START
        detail = f"records [{position}, {available.start}) were deleted before the job read them"
        return Finding(
            **base,
            verdict=verdict,
            available=available,
            records_lost=lost,
            spark_error=COULD_NOT_READ,
            silently_skipped=lost,
            detail=detail,
        )
    if batch_end is not None and batch_end > available.end:
        detail = f"the stored end {batch_end} of batch {view.batch_id} is past the log end {available.end}"
        return Finding(
            **base,
            verdict=Verdict.BEYOND_LOG_END,
            available=available,
            spark_error=COULD_NOT_READ,
            detail=detail,
        )
    if recreated:
        unread = position - available.start
        detail = (
            f"topic id changed from {recorded} to {current}: Spark cannot see this and would silently "
            f"skip the new topic's {unread} records below {position}"
        )
        return Finding(
            **base,
            verdict=Verdict.TOPIC_RECREATED,
            available=available,
            silently_skipped=unread,
            detail=detail,
        )
    return Finding(**base, verdict=Verdict.OK, available=available)


def _new_partition(
    source: SourcePosition, tp: TopicPartition, available: OffsetRange, batch_end: int | None = None
) -> Finding:
    # Spark reads an added partition from its log start, and fails unless that is 0
    # (getOffsetRangesFromResolvedOffsets: ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO).
    error = ADDED_NOT_FROM_ZERO if available.start != 0 else None
    detail = (
        f"added partition starts at {available.start}, not 0: records [0, {available.start}) are gone"
        if error
        else "added partition; Spark reads it from offset 0"
    )
    if batch_end is not None and batch_end > available.end:
        # Added within an uncommitted batch whose stored end no longer exists: the executors fail.
        error = COULD_NOT_READ
        detail = f"the stored end {batch_end} of the re-run batch is past the log end {available.end}"
    return Finding(
        source_id=source.source_id,
        tp=tp,
        verdict=Verdict.NEW_PARTITION,
        position=None,
        batch_end=batch_end,
        available=available,
        records_lost=available.start,
        spark_error=error,
        silently_skipped=available.start,
        detail=detail,
    )


# -- repair --------------------------------------------------------------------------------------


def plan_repair(
    view: CheckpointView,
    cluster: ClusterView,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
) -> Plan:
    """Findings plus the moves and file changes that ``strategy`` (default: clamp) makes, checked
    against ``policy`` (default: no loss budget)."""
    strategy, policy = strategy or Strategy(), policy or Policy()
    findings = assess(view, cluster)
    moves = tuple(m for f in findings if strategy.covers(f.tp) for m in _move(f, strategy))
    transient = [str(f.tp) for f in findings if f.verdict is Verdict.TRANSIENT and strategy.covers(f.tp)]
    refused = (
        f"offsets of {', '.join(transient)} could not be read now; retry before repairing"
        if transient
        else _over_budget(moves, policy)
    )
    sources = {s.source_id: s for s in view.sources}
    changes = tuple(c for m in moves for c in _changes(m, sources[m.source_id], view.rerun, cluster))
    refused = refused or _empties_a_source(view.sources, moves)
    return Plan(
        checkpoint=view.location,
        query_id=view.query_id,
        batch_id=view.batch_id,
        rerun=view.rerun,
        strategy=strategy.describe(),
        findings=findings,
        moves=moves,
        changes=changes,
        refused=refused,
        made_with=(strategy, policy),
    )


def _target(finding: Finding, strategy: Strategy) -> int | None:
    """The new position for one partition, or None to leave it alone."""
    available, old = finding.available, finding.position
    assert available is not None
    kind = strategy.kind
    if kind is StrategyKind.CLAMP:
        if finding.verdict is Verdict.NEW_PARTITION:
            return available.start if finding.spark_error else None
        if old is None or finding.verdict is Verdict.OK:
            return None
        if finding.verdict is Verdict.TOPIC_RECREATED:
            return available.start  # the recorded id proves the data are new: read them all
        if old > available.end:
            return available.end if strategy.on_beyond_end is OnBeyondEnd.LATEST else available.start
        return clamp(old, available)  # unchanged when only a re-run batch's stored end is too far
    if kind is StrategyKind.EARLIEST:
        return available.start
    if kind is StrategyKind.LATEST:
        return available.end
    if kind is StrategyKind.TO_OFFSET:
        assert strategy.offset is not None
        return clamp(strategy.offset, available)
    if kind is StrategyKind.SHIFT_BY:
        return clamp((available.start if old is None else old) + strategy.shift, available)
    target = strategy.targets.get(finding.tp)  # to-datetime, by-duration, from-file
    return None if target is None else clamp(target, available)


def _move(finding: Finding, strategy: Strategy) -> Iterable[Move]:
    base = {"source_id": finding.source_id, "tp": finding.tp, "verdict": finding.verdict}
    if finding.verdict in (Verdict.TOPIC_GONE, Verdict.PARTITION_GONE):
        yield Move(
            **base, old=finding.position, new=None, reason=finding.detail + ": drop it from the checkpoint"
        )
        return
    if finding.verdict is Verdict.TRANSIENT:
        return
    new = _target(finding, strategy)
    old, available = finding.position, finding.available
    assert available is not None
    if new is None or (new == old and (finding.batch_end is None or finding.batch_end <= available.end)):
        return
    if old is None:
        skipped = new - available.start
        yield Move(**base, old=None, new=new, lost=available.start, skipped=skipped, reason=finding.detail)
        return
    if old > available.end:
        # Past the log end: the topic was recreated (the records below the new position are new and
        # will never be read) or the log was truncated (they were read before). Count the worst case.
        yield Move(
            **base,
            old=old,
            new=new,
            skipped=new - available.start,
            replayed=available.end - new,
            reason=f"{finding.detail}; if the topic was recreated, the {new - available.start} records "
            f"below {new} are never read",
        )
        return
    yield Move(
        **base,
        old=old,
        new=new,
        lost=max(0, available.start - old),
        skipped=max(0, new - max(old, available.start)),
        replayed=max(0, min(old, available.end) - new),
        reason=finding.detail or f"{strategy.describe()}",
    )


def _changes(move: Move, source: SourcePosition, rerun: bool, cluster: ClusterView) -> Iterable[OffsetChange]:
    tp, new = move.tp, move.new
    start_old = source.start.get(tp)
    if start_old != new:
        yield OffsetChange(source.start_file, source.source_id, tp, start_old, new)
    if not rerun or source.end is None or source.end_file is None:
        return
    end_old = source.end.get(tp)
    if new is None:
        end_new = None
    elif start_old is None or new < start_old:
        # Moving the start back must not widen batch N: a sink that already committed batch N
        # (Delta's txn version, the file sink's log, foreachBatch dedup by batch id) skips the
        # re-run, and with it records it never wrote (spec §5.2). Batch N becomes empty; the
        # records are read in batch N+1.
        end_new = new
    else:
        # The re-run batch keeps its stored end where that is still readable, and never ends
        # before it starts.
        end_new = new if end_old is None else max(new, clamp(end_old, cluster.partitions[tp]))
    if end_old != end_new:
        yield OffsetChange(source.end_file, source.source_id, tp, end_old, end_new)


def _empties_a_source(sources: tuple[SourcePosition, ...], moves: tuple[Move, ...]) -> str | None:
    # A Kafka offset with no partition left ({}) cannot be told from another source's JSON any more;
    # and a query whose every partition is gone has nothing to resume: better a new checkpoint.
    for source in sources:
        dropped = {m.tp for m in moves if m.source_id == source.source_id and m.new is None}
        if source.start and set(source.start) <= dropped:
            return (
                f"every partition of source {source.source_id} would be dropped (its topics are gone): "
                "recreate the topics, or start the query on a new checkpoint (see `starting-offsets`)"
            )
    return None


def _over_budget(moves: tuple[Move, ...], policy: Policy) -> str | None:
    cost = {(m.source_id, m.tp): m.lost + m.skipped for m in moves}
    total = sum(cost.values())
    if policy.max_loss_records is not None and total > policy.max_loss_records:
        return f"the plan loses {total} records in all, over the budget of {policy.max_loss_records}"
    if policy.max_loss_per_partition is not None:
        over = [
            (tp, n)
            for (_, tp), n in sorted(cost.items(), key=lambda kv: kv[0][1])
            if n > policy.max_loss_per_partition
        ]
        if over:
            named = ", ".join(f"{tp} {n}" for tp, n in over)
            return f"the plan loses more than {policy.max_loss_per_partition} records in {named}"
    return None


# -- startingOffsets for a fresh checkpoint -------------------------------------------------------


def complete_starting_offsets(
    positions: Mapping[TopicPartition, int],
    cluster: ClusterView,
    topics: Iterable[str],
    origin: str,
) -> tuple[StartingOffset, ...]:
    """Every partition of ``topics`` (Spark wants all of them listed), each clamped into its log.

    A partition without a position starts at its log start; a position outside the log is clamped
    and says so. Partitions of topics that do not exist are left out."""
    wanted_topics = set(topics)
    rows = []
    for tp in sorted(t for t in cluster.partitions if t.topic in wanted_topics):
        available = cluster.partitions[tp]
        wanted = positions.get(tp)
        if wanted is None:
            rows.append(StartingOffset(tp, available.start, "log start", f"no {origin} offset"))
            continue
        offset = clamp(wanted, available)
        note = (
            ""
            if offset == wanted
            else f"{origin} offset {wanted} is outside [{available.start}, {available.end}]"
        )
        rows.append(StartingOffset(tp, offset, origin, note))
    return tuple(rows)


def resume_positions(plan: Plan) -> dict[tuple[str, TopicPartition], int]:
    """Where each partition of each source resumes once ``plan`` is applied (dropped ones left out)."""
    final: dict[tuple[str, TopicPartition], int | None] = {
        (f.source_id, f.tp): f.position for f in plan.findings
    }
    final.update({(m.source_id, m.tp): m.new for m in plan.moves})
    return {key: offset for key, offset in sorted(final.items()) if offset is not None}
