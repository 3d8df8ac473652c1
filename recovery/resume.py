"""Where each Kafka source of a checkpoint resumes: the checkpoint read into a
:class:`~recovery.core.model.CheckpointView` for the planning core (spec §5.1-5.2).

After a committed batch N Spark starts batch N+1 from ``offsets/N``; an uncommitted batch N is
re-run over its stored range [``offsets/N-1`` (or ``sources/<i>/0``), ``offsets/N``). A source whose
line is ``-`` (no offset) resumes as Spark resumes it: after a committed batch N from
``offsets/N-1`` (``startOffsets = offsets[N-1] ++ offsets[N]``), else from its initial offsets.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from recovery.checkpoint import Checkpoint, Issue, NextRun, OffsetLogEntry, SourceKind
from recovery.checkpoint.options import StorageOptions
from recovery.core.model import (
    CLOCK_SKEW_ALLOWANCE_MS,
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Isolation,
    SinkFacts,
    SourcePosition,
    TopicPartition,
)
from recovery.core.spark_lines import restart_check_failure
from recovery.core.specs import MAX_TIMESTAMP_MS
from recovery.delta.log import app_transaction_version
from recovery.errors import CheckpointFormatError, InvalidInput
from recovery.kafka.admin import admin_for
from recovery.kafka.cluster import ClusterMemory, cluster_with_times, first_offsets_at_times
from recovery.kafka.config import KafkaConfig
from recovery.topic_ids import read_topic_ids

# Partitions whose time lookups go out with the log ranges' ListOffsets, at most. Beyond, a time
# lookup waits for the ranges and asks only where it can tell something (:func:`_evidence_lookups`): one
# round trip more (with its own timeout), and no lookup of an empty partition or of one whose log
# starts at or past the position (each lookup of 100,000 partitions costs ~2 s of the client's and
# the brokers' CPU).
TIMES_WITH_RANGES_MAX = 5_000


def checkpoint_view(chk: Checkpoint) -> tuple[CheckpointView, tuple[Issue, ...]]:
    """Where each Kafka source of ``chk`` resumes, and what looks wrong in its logs."""
    state = chk.restart_state()
    latest = chk.latest_offsets()
    rerun = state.next_run is NextRun.RERUN_BATCH or (
        state.next_run is NextRun.FIRST_BATCH and latest is not None
    )
    ids, id_issues = read_topic_ids(chk)
    sources: list[SourcePosition] = []
    if latest is None:  # nothing planned yet: batch 0 starts from each Kafka source's initial offsets
        for entry in chk.store.list("sources"):
            initial = chk.initial_offsets(entry.name) if entry.is_dir else None
            if initial is not None:
                sources.append(
                    SourcePosition(entry.name, CheckpointFile.sources(entry.name), initial.kafka.offsets)
                )
    else:
        # The batch before N as Spark reads it: N-1, or the previous one on disk when async
        # progress tracking left gaps (recovery.core.restart).
        previous = chk.offsets(state.previous) if state.previous is not None else None
        for source in latest.sources:
            position = _resume(chk, source.source_id, latest, previous, rerun)
            if position is not None:
                sources.append(position)
    view = CheckpointView(
        location=chk.location,
        query_id=chk.query_id,
        batch_id=state.batch_id,
        rerun=rerun,
        sources=tuple(sources),
        recorded_topic_ids=ids,
    )
    return view, (*state.issues, *id_issues)


def spark_check_issues(
    chk: Checkpoint, line: str, spark_conf: Mapping[str, str] | None = None
) -> tuple[Issue, ...]:
    """Spark ``line``'s own failure on restart, before any source is read
    (:func:`recovery.core.spark_lines.restart_check_failure`), as an issue; () when none."""
    state = chk.restart_state()
    n = state.latest_offsets
    if n is None or n == 0 or state.next_run is not NextRun.RERUN_BATCH:
        return ()
    conf_of: dict[int, dict[str, str] | None] = {}
    for batch in (n - 1, n):
        try:
            metadata = chk.offsets(batch).metadata
        except CheckpointFormatError:  # a missing offsets/N-1 is an issue of its own already
            return ()
        conf_of[batch] = dict(metadata.conf) if metadata is not None else None
    issue = restart_check_failure(line, state, conf_of, spark_conf)
    return (issue,) if issue is not None else ()


def refuse_without_kafka_source(chk: Checkpoint, view: CheckpointView) -> None:
    """A checkpoint whose sources are all Delta tables is validated by ``delta-source validate``:
    an empty table and "healthy" would be a wrong answer."""
    if view.sources:
        return
    latest = chk.latest_offsets()
    if has_delta_source(chk):
        raise InvalidInput(
            f"{chk.location}: no Kafka source; its sources are Delta tables: use "
            f"`plan_delta_source({chk.location!r}, tables='TABLE')`"
        )
    if latest is not None:
        raise InvalidInput(f"{chk.location}: no Kafka source in offsets/{latest.batch_id}")


def has_delta_source(chk: Checkpoint) -> bool:
    """Whether the checkpoint's latest batch reads a Delta table."""
    latest = chk.latest_offsets()
    return latest is not None and any(s.kind is SourceKind.DELTA for s in latest.sources)


def sink_facts(
    view: CheckpointView, sink: str | None, storage_options: StorageOptions | None = None
) -> CheckpointView:
    """``view`` with what the Delta sink ``sink`` holds for its query (its ``txn`` version)."""
    if sink is None:
        return view
    held = app_transaction_version(sink, view.query_id, storage_options)
    return replace(view, sink=SinkFacts(sink, held))


def cluster_for(
    kafka: KafkaConfig,
    view: CheckpointView,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> ClusterView:
    """What the planning core needs from Kafka to judge ``view``: the log ranges, under
    read_committed also the high watermarks (an open transaction), and, for topics whose ids were
    never recorded, the recreation evidence: the first offset whose record is newer than the batch
    that read up to the position (``ListOffsets`` by time, at ``batchTimestampMs`` plus the
    clock-skew allowance). All of it in one round (:func:`recovery.kafka.cluster.cluster_with_times`):
    one Metadata request, then the ListOffsets requests of every lookup sent together; beyond
    :data:`TIMES_WITH_RANGES_MAX` partitions the time lookups follow the others."""
    return clusters_for(kafka, [view], isolation)[0]


def clusters_for(
    kafka: KafkaConfig,
    views: Sequence[CheckpointView],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    memory: ClusterMemory | None = None,
) -> list[ClusterView]:
    """:func:`cluster_for` of each of ``views``, read in one round for all of them (``fleet serve``
    checks the jobs of a cluster together: one Metadata request and one ListOffsets per broker for
    a thousand checkpoints instead of a thousand of each). Each view gets only its own topics.
    ``memory``: the topic descriptions and time lookups' answers kept from earlier rounds, used
    where they still hold (and the new ones kept)."""
    times: dict[int, set[TopicPartition]] = {}
    for view in views:
        for source in view.sources:
            at_ms = _evidence_time(source)
            if at_ms is not None:
                # asked for every such partition: which of them matter (log start below the position)
                # is known only from the same answers, and an extra partition costs little here
                unrecorded = (tp for tp in source.start if tp.topic not in view.recorded_topic_ids)
                times.setdefault(at_ms, set()).update(unrecorded)
    known = memory.first_offsets if memory is not None else None
    usable = known.usable(times) if known is not None else {}
    ask = {at_ms: tps - usable.get(at_ms, set()) for at_ms, tps in times.items()}
    together = sum(map(len, ask.values())) <= TIMES_WITH_RANGES_MAX
    topics = [checkpoint_topics(view) for view in views]
    asked: set[str] = set().union(*topics)
    topics_known = memory.topics if memory is not None else None
    named = (
        {tp for view in views for s in view.sources for tp in (*s.start, *(s.end or {}))}
        if topics_known is not None
        else ()
    )
    sent_at = time.monotonic()
    whole, found = cluster_with_times(kafka, asked, isolation, ask if together else {}, topics_known, named)
    reused, again = known.still_true(usable, whole) if known is not None else ({}, {})
    if not together:
        lookups: dict[int, set[TopicPartition]] = {}
        for view in views:
            for at_ms, tps in _evidence_lookups(view, whole).items():
                lookups.setdefault(at_ms, set()).update(tps - reused.get(at_ms, {}).keys())
        found = first_offsets_at_times(kafka, lookups)
    elif again:
        found = {**found}
        for at_ms, answers in first_offsets_at_times(kafka, again).items():
            found[at_ms] = {**found.get(at_ms, {}), **answers}
    if known is not None:
        known.keep(found, whole, sent_at)
        found = {at_ms: {**found.get(at_ms, {}), **reused.get(at_ms, {})} for at_ms in {*found, *reused}}
    whole = replace(whole, isolation=isolation)
    judged = [_evidence(view, whole, found) for view in views]
    clusters = [cluster for cluster, _ in judged]
    told: set[str] = set().union(*(names for _, names in judged))
    if told:
        # Only where a timestamp tells of recreation, whose clock it is (one DescribeConfigs request):
        # the broker's (LogAppendTime) or the producer's (CreateTime), which the finding then names.
        types = admin_for(kafka).timestamp_types(told)
        clusters = [
            replace(c, timestamp_types={t: types[t] for t in sorted(names) if t in types}) if names else c
            for c, names in judged
        ]
    if len(views) == 1:
        return clusters
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in whole.partitions:
        by_topic.setdefault(tp.topic, []).append(tp)
    return [_only(cluster, names, by_topic) for cluster, names in zip(clusters, topics, strict=True)]


def _evidence(
    view: CheckpointView, cluster: ClusterView, found: Mapping[int, Mapping[TopicPartition, int | None]]
) -> tuple[ClusterView, set[str]]:
    """``cluster`` with ``view``'s recreation evidence (``newer_than_read``) from the time lookups
    ``found``, and the topics whose timestamps tell of recreation (whose clock it is is asked
    afterwards, for every view at once)."""
    # Where no record is that new: the high watermark (not below the log end): no evidence.
    ends = cluster.high_watermarks
    newer: dict[tuple[str, TopicPartition], int] = {}
    told: set[str] = set()
    for source in view.sources:
        at_ms = _evidence_time(source)
        if at_ms is None:
            continue
        at = found.get(at_ms, {})
        for tp, position in source.start.items():
            available = cluster.partitions.get(tp)
            if tp.topic in view.recorded_topic_ids or available is None or available.start >= position:
                continue
            offset = at.get(tp)
            end = ends[tp] if ends else available.end
            newer[(source.source_id, tp)] = end if offset is None else offset
            if offset is not None and offset < min(position, available.end):
                told.add(tp.topic)  # a record below the position newer than the batch: evidence
    return replace(cluster, newer_than_read=newer), told


def _only(
    cluster: ClusterView, topics: set[str], by_topic: Mapping[str, list[TopicPartition]]
) -> ClusterView:
    """``cluster`` restricted to ``topics`` (a view judged beside others sees only its own)."""
    tps = [tp for topic in topics for tp in by_topic.get(topic, ())]
    return replace(
        cluster,
        partitions={tp: cluster.partitions[tp] for tp in tps},
        topic_ids={t: i for t in topics if (i := cluster.topic_ids.get(t)) is not None},
        unavailable=frozenset(tp for tp in cluster.unavailable if tp.topic in topics),
        high_watermarks={tp: h for tp in tps if (h := cluster.high_watermarks.get(tp)) is not None},
    )


def _evidence_time(source: SourcePosition) -> int | None:
    """The time whose first offset is recreation evidence for ``source``: its batch's time plus the
    clock-skew allowance; None when the checkpoint has no batch time, or one no ListOffsets can ask
    (Spark writes any long as ``batchTimestampMs``: such a checkpoint is read, the lookup skipped)."""
    if source.start_read_by_ms is None:
        return None
    at_ms = source.start_read_by_ms + CLOCK_SKEW_ALLOWANCE_MS
    return at_ms if 0 <= at_ms <= MAX_TIMESTAMP_MS else None


def _evidence_lookups(view: CheckpointView, cluster: ClusterView) -> dict[int, set[TopicPartition]]:
    """The time lookups whose answers can be evidence: in partitions of topics whose ids were
    never recorded, holding records below the position (the log starts below both the position
    and the log end). A log that is empty, or starts at or past the position, holds none."""
    times: dict[int, set[TopicPartition]] = {}
    for source in view.sources:
        at_ms = _evidence_time(source)
        if at_ms is None:
            continue
        wanted = times.setdefault(at_ms, set())
        for tp, position in source.start.items():
            available = cluster.partitions.get(tp)
            if tp.topic in view.recorded_topic_ids or available is None:
                continue
            if available.start < min(position, available.end):
                wanted.add(tp)
    return {ts: tps for ts, tps in times.items() if tps}


def checkpoint_topics(view: CheckpointView) -> set[str]:
    """Every topic any source of the checkpoint reads (start or stored end)."""
    return {tp.topic for s in view.sources for tp in (*s.start, *(s.end or {}))}


def _kafka_offsets(entry: OffsetLogEntry | None, source_id: str) -> dict[TopicPartition, int] | None:
    """The Kafka offsets of ``source_id`` in ``entry``; None if absent, ``-`` or not Kafka."""
    if entry is None:
        return None
    try:
        source = entry.source(source_id)
    except KeyError:
        return None
    return dict(source.kafka.offsets) if source.kind is SourceKind.KAFKA and source.kafka else None


def _read_by(entry: OffsetLogEntry | None) -> int | None:
    """The entry's batchTimestampMs: records below its offsets were in Kafka by then."""
    if entry is None or entry.metadata is None or not entry.metadata.batch_timestamp_ms:
        return None
    return int(entry.metadata.batch_timestamp_ms)


def _resume(
    chk: Checkpoint, source_id: str, latest: OffsetLogEntry, previous: OffsetLogEntry | None, rerun: bool
) -> SourcePosition | None:
    n = latest.batch_id
    here, before = _kafka_offsets(latest, source_id), _kafka_offsets(previous, source_id)
    before_file = CheckpointFile.offsets(previous.batch_id) if previous is not None else None
    initial_file = CheckpointFile.sources(source_id)

    def initial() -> dict[TopicPartition, int] | None:
        found = chk.initial_offsets(source_id)
        return dict(found.kafka.offsets) if found else None

    if not rerun:
        if here is not None:
            return SourcePosition(
                source_id, CheckpointFile.offsets(n), here, start_read_by_ms=_read_by(latest)
            )
        if before is not None and before_file is not None:
            return SourcePosition(source_id, before_file, before, start_read_by_ms=_read_by(previous))
        first = initial()
        return SourcePosition(source_id, initial_file, first) if first is not None else None
    start_file: CheckpointFile
    start_ms: int | None = None
    if before is not None and before_file is not None:
        start_file, start, start_ms = before_file, before, _read_by(previous)
    else:
        first = initial()
        if first is None and here is None:
            return None  # not a Kafka source
        start_file, start = initial_file, first or {}
    if here is None:  # no data for this source in batch N: it resumes from its start
        return SourcePosition(source_id, start_file, start, start_read_by_ms=start_ms)
    return SourcePosition(
        source_id,
        start_file,
        start,
        CheckpointFile.offsets(n),
        here,
        start_read_by_ms=start_ms,
        end_read_by_ms=_read_by(latest),
    )
