"""The planning core: values already read in, findings and a repair plan out. No IO, no clock.

``assess`` judges every partition of every Kafka source of a checkpoint against the live cluster
and predicts what Spark does on restart. ``decide_repair`` turns the findings and a strategy into a
:class:`~recovery.core.model.Plan`: which values in which files change, and what that costs in records.

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
from dataclasses import replace

from recovery.core.model import (
    ADDED_NOT_FROM_ZERO,
    CLOCK_SKEW_ALLOWANCE_MS,
    COULD_NOT_READ,
    OFFSET_CHANGED,
    PARTITIONS_DELETED,
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Finding,
    Isolation,
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
    copied_with,
)


def clamp(offset: int, available: OffsetRange) -> int:
    return min(max(offset, available.start), available.end)


# -- findings ------------------------------------------------------------------------------------
#
# The model of Spark's restart (Spark 4.x, connector kafka-0-10-sql), per source and partition:
#
# 1. Which batch runs, from where (MicroBatchExecution.populateStartOffsets): after a committed batch
#    N, batch N+1 runs from offsets/N up to the latest offsets (KafkaMicroBatchStream.latestOffset ->
#    KafkaOffsetReaderAdmin.fetchLatestOffsets, which re-lists a few times when an offset is below
#    the known one, then takes what it got). An uncommitted batch N is re-run from offsets/N-1 (or
#    sources/<i>/0) up to the STORED offsets/N, without asking Kafka for the latest.
# 2. The sink first (MicroBatchExecution.runBatch -> DeltaSink.addBatch): a Delta sink whose ``txn``
#    for the query id is >= N returns before the batch's plan is executed ("Skipping already complete
#    epoch"), so the Kafka ranges of a re-run batch it holds are never planned nor read; batch N+1
#    then runs from offsets/N. (Verified on the rig in tests/integration/test_spark_shapes.py.)
# 3. Range checks before any read (KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets, in this
#    order): an added partition not starting at 0 (ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO);
#    a partition in ``from`` but not in ``until`` (PARTITIONS_DELETED); ``until < from``
#    (PARTITION_OFFSET_CHANGED). With failOnDataLoss=false each is a warning: a deleted partition is
#    dropped, an ``until < from`` range is dropped (KafkaOffsetRangeCalculator keeps size > 0 only)
#    and the next batch starts at ``until``.
# 4. The read (KafkaSourceRDD -> KafkaDataConsumer.get): an offset below the log start or at/after
#    the log end fails with COULD_NOT_READ_OFFSET_RANGE; with failOnDataLoss=false
#    (getEarliestAvailableOffsetBetween) it jumps to the log start, or drops the range when nothing of
#    it is left, and the next batch starts at the range's end.
#
# ``silently_skipped`` is what step 3/4 skip with failOnDataLoss=false, as of now: records below
# the log start it jumps over (gone), plus records now in the partition it will never read.
#
# 5. Recreation evidence (Spark itself sees none): a topic id that changed since ``repair`` or the
#    gate recorded it; fewer partitions; a re-run's stored end below its start with the log now past
#    it; or a record below the position newer than the batch that read up to it (constructNextBatch
#    takes batchTimestampMs AFTER latestOffset, so every record below offsets/N was in Kafka by then).
#
# Sources read (Spark 4.x / master, Delta 4.x): apache/spark connector/kafka-0-10-sql
# KafkaOffsetReaderAdmin.scala (fetchLatestOffsets' incorrect-offsets retry,
# getOffsetRangesFromResolvedOffsets), KafkaDataConsumer.scala (get / getEarliestAvailableOffsetBetween:
# "[offset, untilOffset) and [earliestOffset, latestOffset) have no overlap" -> UNKNOWN_OFFSET, the
# range is skipped), KafkaMicroBatchStream.scala (planInputPartitions -> the above with
# reportDataLoss = failOnDataLoss ? throw : warn); sql/core MicroBatchExecution.scala
# (populateStartOffsets, constructNextBatch, runBatch); delta-io/delta DeltaSink.scala (addBatch:
# ``if (txn.txnVersion(queryId) >= batchId) { "Skipping already complete epoch"; return }``).


def assess(view: CheckpointView, cluster: ClusterView) -> tuple[Finding, ...]:
    """Every partition of every Kafka source, sorted by source, topic and partition.

    A re-run batch that ``view.sink`` already holds is judged as Spark runs it: skipped by the
    sink, the next batch starting from its stored end. When the sink is not known and the outcome
    would differ, each such finding says so in ``notes``."""
    effective = resolve_sink(view)
    findings = _assess(effective, cluster)
    if effective is not view:
        note = (
            f"sink {view.sink.table if view.sink else ''} already holds batch {view.batch_id}: Spark "
            f"skips it without reading Kafka and runs batch {view.batch_id + 1} from offsets/{view.batch_id}"
        )
        return tuple(copied_with(f, notes=(*f.notes, note)) for f in findings)
    if not view.rerun or view.sink is not None:
        return findings
    notes: dict[tuple[object, ...], str] = {}  # one text per outcome, shared by its partitions
    out = []
    for f, alt in _with_alternatives(findings, _assess(after_sink_skip(view), cluster)):
        if alt is None or _same_outcome(alt, f):
            out.append(f)
            continue
        outcome = _outcome(alt)
        if outcome not in notes:
            notes[outcome] = (
                f"depends on the sink: if it already holds batch {view.batch_id} (a crash between the "
                f"sink's commit and commits/{view.batch_id}; a Delta sink's txn for the query id), Spark "
                f"skips that batch and then {_describe_outcome(alt)}; give `sink` to know"
            )
        out.append(copied_with(f, notes=(*f.notes, notes[outcome])))
    return tuple(out)


def _with_alternatives(
    findings: tuple[Finding, ...], alternative: tuple[Finding, ...]
) -> Iterable[tuple[Finding, Finding | None]]:
    """Each finding with the alternative's of the same source and partition (None if it has none).
    Both list the same partitions in the same order unless the re-run batch's stored end lacks
    some of its start: then they are matched by key."""
    if len(findings) == len(alternative) and all(
        f.tp == a.tp and f.source_id == a.source_id for f, a in zip(findings, alternative, strict=True)
    ):
        return zip(findings, alternative, strict=True)
    by_key = {(a.source_id, a.tp): a for a in alternative}
    return ((f, by_key.get((f.source_id, f.tp))) for f in findings)


def resolve_sink(view: CheckpointView) -> CheckpointView:
    """The view Spark actually resumes from: a re-run batch the sink already holds is skipped."""
    held = view.sink.committed_batch if view.sink else None
    if view.rerun and held is not None and held >= view.batch_id:
        return after_sink_skip(view)
    return view


def after_sink_skip(view: CheckpointView) -> CheckpointView:
    """``view`` as if the uncommitted batch N were committed: batch N+1 runs from offsets/N."""
    sources = tuple(
        replace(
            s,
            start_file=s.end_file,
            start=s.end,
            end_file=None,
            end=None,
            start_read_by_ms=s.end_read_by_ms,
            end_read_by_ms=None,
        )
        if s.end is not None and s.end_file is not None
        else s
        for s in view.sources
    )
    return replace(view, batch_id=view.batch_id + 1, rerun=False, sources=sources)


def _outcome(f: Finding) -> tuple[object, ...]:
    return (f.verdict, f.spark_error, f.records_lost, f.silently_skipped)


def _same_outcome(a: Finding, b: Finding) -> bool:
    """``_outcome(a) == _outcome(b)``, without the two tuples (100,000 partitions)."""
    return (
        a.verdict is b.verdict
        and a.spark_error == b.spark_error
        and a.records_lost == b.records_lost
        and a.silently_skipped == b.silently_skipped
    )


def _describe_outcome(f: Finding) -> str:
    if f.spark_error:
        return f"fails with {f.spark_error} ({f.verdict.value})"
    if f.silently_skipped:
        return f"silently skips {f.silently_skipped} records ({f.verdict.value})"
    return f"runs ({f.verdict.value})"


def _assess(view: CheckpointView, cluster: ClusterView) -> tuple[Finding, ...]:
    findings: list[Finding] = []
    existing = cluster.topics()
    # Each topic's partitions, counted once (linear in partitions, not quadratic: 100,000 of them).
    by_topic: dict[str, list[TopicPartition]] = {}
    for t in cluster.partitions:
        by_topic.setdefault(t.topic, []).append(t)
    counts = {topic: len(tps) for topic, tps in by_topic.items()}
    for source in view.sources:
        known = set(source.start) | set(source.end or {})
        # Kafka never removes partitions: a topic with fewer partitions than the checkpoint knows
        # was deleted and created again, so every partition of it holds new records.
        shrunk = {
            tp.topic
            for tp in known
            if tp.topic in existing and tp not in cluster.partitions and tp not in cluster.unavailable
        }
        for tp in sorted(known):  # TopicPartition tuples sort by topic, then partition
            findings.append(_judge(source, tp, view, cluster, existing, shrunk, counts))
        for topic in sorted({tp.topic for tp in known} & existing):
            added = (t for t in by_topic.get(topic, ()) if t not in known)
            for tp in sorted(added):
                findings.append(_new_partition(source, tp, cluster.partitions[tp]))
    return tuple(findings)


def _judge(
    source: SourcePosition,
    tp: TopicPartition,
    view: CheckpointView,
    cluster: ClusterView,
    existing: frozenset[str],
    shrunk: set[str],
    counts: Mapping[str, int],
) -> Finding:
    position = source.start.get(tp)
    batch_end = (source.end or {}).get(tp)
    if tp.topic not in existing:
        return Finding(
            source.source_id,
            tp,
            Verdict.TOPIC_GONE,
            position,
            batch_end,
            available=None,
            spark_error=PARTITIONS_DELETED,
            detail=f"topic {tp.topic} does not exist",
        )
    if tp in cluster.unavailable:
        return Finding(
            source.source_id,
            tp,
            Verdict.TRANSIENT,
            position,
            batch_end,
            available=None,
            detail="offsets not available now (leader change?); retry before deciding",
        )
    available = cluster.partitions.get(tp)
    count = counts.get(tp.topic, 0)
    if available is None:
        return Finding(
            source.source_id,
            tp,
            Verdict.PARTITION_GONE,
            position,
            batch_end,
            available=None,
            spark_error=PARTITIONS_DELETED,
            detail=f"topic {tp.topic} has no partition {tp.partition} any more (it has {count}): Kafka "
            "never removes partitions, so the topic was deleted and recreated",
        )
    if position is None:  # only in the stored end of a re-run batch: Spark treats it as added
        return _new_partition(source, tp, available, batch_end=batch_end)
    base = copied_with(  # Finding(...) without its frozen __init__ (see recovery.core.model.copied_with)
        _BLANK, source_id=source.source_id, tp=tp, position=position, batch_end=batch_end, available=available
    )

    rerun = view.rerun and source.end is not None
    if rerun and tp not in (source.end or {}):
        # getOffsetRangesFromResolvedOffsets: in ``from`` but not in the stored ``until``
        return copied_with(
            base,
            verdict=Verdict.PARTITION_GONE,
            spark_error=PARTITIONS_DELETED,
            detail=f"batch {view.batch_id}'s stored end has no offset for this partition",
        )
    if rerun and batch_end == position:
        rerun = False  # an empty range: nothing is read, batch N+1 runs from here as after a commit
    evidence, by_time = _recreation_evidence(
        source, tp, position, batch_end if rerun else None, view, cluster, shrunk, counts
    )
    f = _range_and_read(base, available, position, batch_end if rerun else None, view, cluster)
    if evidence:
        skipped = f.silently_skipped
        if f.spark_error is None and available.start <= position <= available.end:
            skipped = position - available.start  # the new topic's records below the position
        clock = _clock_note(cluster, tp.topic) if by_time else None
        f = copied_with(
            f,
            verdict=Verdict.TOPIC_RECREATED,
            silently_skipped=skipped,
            notes=(*f.notes, clock) if clock else f.notes,
            detail=f"{evidence}; the old topic's unread records are lost (their number cannot be known)"
            + (
                f"; Spark would silently skip the new topic's {skipped} records below {position}"
                if f.spark_error is None
                else f"; {f.detail}"
            ),
        )
    elif f.verdict is Verdict.OK and tp.topic not in view.recorded_topic_ids:
        # Without recorded ids, nothing rules a recreation out: timestamps prove one only when a
        # record below the position is newer than the batch by more than the clock-skew allowance,
        # so a topic recreated sooner than that after the batch reads as OK whatever they say.
        compared = (source.source_id, tp) in cluster.newer_than_read
        f = copied_with(f, notes=(*f.notes, _cannot_tell_note(tp.topic, timestamps_compared=compared)))
    upper = cluster.isolation is Isolation.READ_COMMITTED and bool(f.records_lost or f.silently_skipped)
    return copied_with(f, upper_bound=upper) if upper != f.upper_bound else f


def _cannot_tell_note(topic: str, *, timestamps_compared: bool) -> str:
    """The note of a partition judged OK whose topic may have been recreated unseen: one text per
    topic and kind, so the report shows it once for all such partitions of the topic."""
    minutes = CLOCK_SKEW_ALLOWANCE_MS // 60_000
    if timestamps_compared:
        what = f"as many records as the position, within {minutes} min after the batch that read up to it,"
    else:  # no batch time, or no record below the position: no lookup could tell anything
        what = "as many records as the position (no record timestamps compared)"
    return (
        f"topic ids never recorded for {topic}: a recreation with at least {what} cannot be ruled out "
        "(run `repair_checkpoint(execute=True)` once while healthy to record them)"
    )


def _recreation_evidence(
    source: SourcePosition,
    tp: TopicPartition,
    position: int,
    batch_end: int | None,
    view: CheckpointView,
    cluster: ClusterView,
    shrunk: set[str],
    counts: Mapping[str, int],
) -> tuple[str, bool]:
    """Why the partition's records are not the ones the checkpoint was reading ("" when nothing says so),
    and whether that rests on record timestamps."""
    recorded, current = view.recorded_topic_ids.get(tp.topic), cluster.topic_ids.get(tp.topic)
    if recorded is not None and current is not None and recorded != current:
        return f"topic id changed from {recorded} to {current}: the topic was recreated", False
    if tp.topic in shrunk:
        count = counts.get(tp.topic, 0)
        return (
            f"topic {tp.topic} has {count} partitions, fewer than the checkpoint knows: Kafka never "
            "removes partitions, so it was deleted and recreated"
        ), False
    available = cluster.partitions[tp]
    if batch_end is not None and batch_end < position <= available.end:
        return (
            f"the stored end {batch_end} of batch {view.batch_id} is below its start {position}, yet the "
            f"log now reaches {available.end}: the log was rewritten"
        ), False
    newer = cluster.newer_than_read.get((source.source_id, tp))
    if newer is not None and available.start <= newer < min(position, available.end):
        kind = timestamp_type(cluster, tp.topic)
        return (
            f"record {newer}, below the position {position}, is newer by its {kind or 'timestamp'} than "
            f"the batch that read up to the position ({source.start_read_by_ms} ms): the topic was "
            "rewritten after it was read"
        ), True
    return "", False


def timestamp_type(cluster: ClusterView, topic: str) -> str | None:
    """The topic's ``message.timestamp.type`` when it was looked up (only for topics with timestamp
    evidence), else None."""
    return cluster.timestamp_types.get(topic)


def _clock_note(cluster: ClusterView, topic: str) -> str | None:
    """What timestamp evidence of recreation rests on, when it is not the broker's clock.

    Kafka's topic config ``message.timestamp.type``
    (https://kafka.apache.org/documentation/#topicconfigs_message.timestamp.type): with
    ``LogAppendTime`` the broker stamps each batch when it appends it, so a record newer than the
    batch that read past it was appended after that read: the log was rewritten. With
    ``CreateTime`` (the default) the timestamp is the producer's: a producer clock running fast by
    more than the clock-skew allowance gives the same picture on a healthy topic. The verdict
    stays (tests/integration/test_spark_shapes.py: a recreated CreateTime topic is told this way
    and Spark does skip its records); the note says what it rests on."""
    kind = timestamp_type(cluster, topic)
    if kind == "LogAppendTime":
        return None
    told = (
        "the records' CreateTime (the producer's clock)"
        if kind == "CreateTime"
        else "the records' timestamps (the producer's clock, unless the topic sets LogAppendTime)"
    )
    return (
        f"topic ids never recorded for {topic}: the evidence of recreation is {told}; a producer "
        "clock running fast would look the same. Check the topic's id (kafka-topics --describe) or "
        "its creation time before repairing"
    )


def _range_and_read(
    base: Finding,
    available: OffsetRange,
    position: int,
    batch_end: int | None,
    view: CheckpointView,
    cluster: ClusterView,
) -> Finding:
    """Steps 3 and 4 of the model for one partition Spark knows: ``batch_end`` is the stored end of
    a re-run batch, None when a new batch runs up to the latest offset (the log end here)."""
    f = base if base.available is available else copied_with(base, available=available)
    until = available.end if batch_end is None else batch_end
    hwm = cluster.high_watermarks.get(base.tp)
    open_txn = cluster.isolation is Isolation.READ_COMMITTED and hwm is not None
    open_txn = open_txn and available.end < position <= (hwm or 0)
    if until < position:  # step 3: PARTITION_OFFSET_CHANGED; with failOnDataLoss=false dropped
        if open_txn:
            # Also after Spark failed once on it: the re-run batch's stored end is the LSO it read
            # then (<= the LSO now); failOnDataLoss=false drops the range and goes on from there,
            # re-reading, skipping nothing.
            again = (
                f" (Spark already failed on batch {view.batch_id} once: its stored end is {batch_end})"
                if batch_end is not None
                else ""
            )
            return copied_with(
                f,
                verdict=Verdict.OPEN_TRANSACTION,
                spark_error=OFFSET_CHANGED,
                detail=f"position {position} is past the last stable offset {available.end} but within the "
                f"high watermark {hwm}: a transaction is open{again}. Wait for it to end or abort it "
                f"(kafka-transactions.sh); moving back to {available.end} re-reads up to "
                f"{position - available.end} records, it skips none",
            )
        skipped = _skipped_from(until, available)
        where = (
            f"the stored end {batch_end} of batch {view.batch_id} is below its start {position} (Spark "
            "already failed on this batch once)"
            if batch_end is not None
            else _past_the_end(base.tp, position, available.end, view, cluster)
        )
        verdict = Verdict.BEYOND_LOG_END if position > available.end else Verdict.TOPIC_RECREATED
        return copied_with(
            f,
            verdict=verdict,
            spark_error=OFFSET_CHANGED,
            detail=f"{where}; with failOnDataLoss=false the batch's range is dropped and the {skipped} "
            f"records {_skipped_where(until, available)} would not be read",
            silently_skipped=skipped,
        )
    lost = max(0, available.start - position)
    if lost:  # step 4: the read starts below the log start
        return copied_with(
            f,
            verdict=Verdict.BELOW_LOG_START,
            spark_error=COULD_NOT_READ,
            detail=f"records [{position}, {available.start}) were deleted before the job read them",
            records_lost=lost,
            silently_skipped=lost,
        )
    if batch_end is None:
        return f  # position within the log: OK
    if position >= available.end and position < batch_end:  # the re-run reads from past the log end
        return copied_with(
            f,
            verdict=Verdict.OPEN_TRANSACTION if open_txn else Verdict.BEYOND_LOG_END,
            spark_error=COULD_NOT_READ,
            detail=f"{_past_the_end(base.tp, position, available.end, view, cluster)}; the "
            f"{available.size} records now in the partition would not be read",
            silently_skipped=available.size,
        )
    if batch_end > available.end:
        return copied_with(
            f,
            verdict=Verdict.BEYOND_LOG_END,
            spark_error=COULD_NOT_READ,
            detail=f"the stored end {batch_end} of batch {view.batch_id} is past the log end {available.end}",
        )
    return f


def _past_the_end(
    tp: TopicPartition, position: int, end: int, view: CheckpointView, cluster: ClusterView
) -> str:
    """Why a position can be past the log end. With the topic's id unchanged since it was recorded,
    the topic was not recreated: its log was cut back under the position, as an unclean leader
    election does (the new leader lacks records the old one had acknowledged)."""
    recorded = view.recorded_topic_ids.get(tp.topic)
    if recorded is not None and recorded == cluster.topic_ids.get(tp.topic):
        return (
            f"position {position} is past the log end {end} of the same topic (its id {recorded} is the "
            "one recorded): the log was truncated under it, as an unclean leader election does"
        )
    return f"position {position} is past the log end {end}: topic recreated or log truncated"


_BLANK = Finding("", TopicPartition("", 0), Verdict.OK, None, None, None)  # every other field its default


def _skipped_from(offset: int, available: OffsetRange) -> int:
    """Records a NEW batch starting at ``offset`` never reads with failOnDataLoss=false: the ones
    below ``offset`` now in the log (past the log end: the latest offset is below it again, that
    range is dropped too, and Spark continues from the latest: every record now in the log), or
    the offsets below the log start it jumps over."""
    if offset > available.end:
        return available.size
    if offset < available.start:
        return available.start - offset
    return offset - available.start


def _skipped_where(offset: int, available: OffsetRange) -> str:
    if offset > available.end or offset >= available.start:
        return f"[{available.start}, {min(offset, available.end)})"
    return f"[{offset}, {available.start}) (gone)"


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


def decide_repair(
    view: CheckpointView,
    cluster: ClusterView,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
) -> Plan:
    """Findings plus the moves and file changes that ``strategy`` (default: clamp) makes, checked
    against ``policy`` (default: no loss budget)."""
    strategy, policy = strategy or Strategy(), policy or Policy()
    findings = assess(view, cluster)
    original, view = view, resolve_sink(view)  # a re-run batch the sink holds is skipped
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
        batch_id=original.batch_id,
        rerun=original.rerun,
        strategy=strategy.describe(),
        findings=findings,
        moves=moves,
        changes=changes,
        refused=refused,
        made_with=(strategy, policy),
        sink=original.sink,
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
            return available.start  # the evidence says the data are new: read them all
        if finding.verdict is Verdict.OPEN_TRANSACTION:
            return available.end  # the last stable offset: re-reads, skips nothing
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
    lost_unknown = finding.verdict in (Verdict.TOPIC_RECREATED, Verdict.PARTITION_GONE)

    def move(
        old: int | None, new: int | None, reason: str, lost: int = 0, skipped: int = 0, replayed: int = 0
    ) -> Move:
        # Every field, without the frozen __init__ (see recovery.core.model.copied_with; a plan of 100,000
        # partitions makes 100,000 moves). A test checks that these are exactly Move's fields.
        made = object.__new__(Move)
        made.__dict__.update(
            source_id=finding.source_id,
            tp=finding.tp,
            verdict=finding.verdict,
            old=old,
            new=new,
            lost=lost,
            skipped=skipped,
            replayed=replayed,
            reason=reason,
            lost_unknown=lost_unknown,
            upper_bound=finding.upper_bound,
        )
        return made

    if finding.verdict in (Verdict.TOPIC_GONE, Verdict.PARTITION_GONE):
        yield move(finding.position, None, finding.detail + ": drop it from the checkpoint")
        return
    if finding.verdict is Verdict.TRANSIENT:
        return
    new = _target(finding, strategy)
    old, available = finding.position, finding.available
    assert available is not None
    if new is None or (new == old and (finding.batch_end is None or finding.batch_end <= available.end)):
        return
    if finding.verdict is Verdict.OPEN_TRANSACTION and old is not None and new <= old:
        yield move(
            old,
            new,
            f"{finding.detail}; up to {max(0, old - new)} duplicates if the transaction commits",
            skipped=max(0, new - max(old, available.start)) if new > old else 0,
            replayed=max(0, old - new),
        )
        return
    if old is None:
        yield move(None, new, finding.detail, lost=available.start, skipped=new - available.start)
        return
    if old > available.end:
        # Past the log end: the topic was recreated (the records below the new position are new and
        # will never be read) or the log was truncated (they were read before). Count the worst case.
        yield move(
            old,
            new,
            f"{finding.detail}; if the topic was recreated, the {new - available.start} records "
            f"below {new} are never read",
            skipped=new - available.start,
            replayed=available.end - new,
        )
        return
    yield move(
        old,
        new,
        finding.detail or f"{strategy.describe()}",
        lost=max(0, available.start - old),
        skipped=max(0, new - max(old, available.start)),
        replayed=max(0, min(old, available.end) - new),
    )


def _changes(move: Move, source: SourcePosition, rerun: bool, cluster: ClusterView) -> Iterable[OffsetChange]:
    tp, new = move.tp, move.new
    start_old = source.start.get(tp)
    if start_old != new:
        yield _change(source.start_file, source.source_id, tp, start_old, new)
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
        yield _change(source.end_file, source.source_id, tp, end_old, end_new)


def _change(
    file: CheckpointFile, source_id: str, tp: TopicPartition, old: int | None, new: int | None
) -> OffsetChange:
    """``OffsetChange(file, source_id, tp, old, new)`` without the frozen ``__init__`` (see
    :func:`recovery.core.model.copied_with`; a test checks these are exactly its fields)."""
    made = object.__new__(OffsetChange)
    made.__dict__.update(file=file, source_id=source_id, tp=tp, old=old, new=new)
    return made


def _empties_a_source(sources: tuple[SourcePosition, ...], moves: tuple[Move, ...]) -> str | None:
    # A Kafka offset with no partition left ({}) cannot be told from another source's JSON any more;
    # and a query whose every partition is gone has nothing to resume: better a new checkpoint.
    for source in sources:
        dropped = {m.tp for m in moves if m.source_id == source.source_id and m.new is None}
        if source.start and set(source.start) <= dropped:
            return (
                f"every partition of source {source.source_id} would be dropped (its topics are gone): "
                "recreate the topics, or start the query on a new checkpoint (see `starting_offsets`)"
            )
    return None


def _over_budget(moves: tuple[Move, ...], policy: Policy) -> str | None:
    unknown = sorted({m.tp.topic for m in moves if m.lost_unknown})
    if unknown and (policy.max_loss_records is not None or policy.max_loss_per_partition is not None):
        return (
            f"topic {', '.join(unknown)} was recreated: the old topic's records the query had not read "
            "are lost and cannot be counted, so no loss budget can be met"
        )
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
