"""Use cases for a checkpoint's Kafka sources: read the checkpoint and the cluster into values,
decide with :mod:`recovery.core.plan`, write through :mod:`recovery.apply`, return values that carry
their own exit code.

    validate_checkpoint(location, kafka)                 -> ValidationReport  (never writes)
    plan_repair(location, kafka, strategy, policy)       -> Plan              (never writes)
    repair_checkpoint(location, kafka, request, policy)  -> RepairResult      (dry run unless execute=True)
    starting_offsets(kafka, checkpoint=... | group=... | timestamp_ms=...) -> StartingOffsets
    checkpoint_lag(location, kafka)                      -> tuple[PartitionLag, ...]

``validate_checkpoint`` lives in :mod:`recovery.validate`, beside its many-checkpoint form.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

from recovery.checkpoint import Checkpoint, open_checkpoint
from recovery.checkpoint.options import StorageOptions
from recovery.core.model import (
    DEFAULT_ACTIVE_WITHIN_S,
    CheckpointFile,
    ClusterView,
    Isolation,
    NoMatch,
    OnBeyondEnd,
    PartitionRange,
    Plan,
    Policy,
    StartingOffset,
    Strategy,
    StrategyKind,
    TopicPartition,
    TopicSelection,
)
from recovery.core.plan import (
    complete_starting_offsets,
    decide_repair,
    resolve_sink,
    resume_positions,
)
from recovery.core.results import PartitionLag, RepairResult, StartingOffsets, ValidationReport
from recovery.core.specs import check_timestamp_ms
from recovery.core.strategy import StrategyRequest, resolve_strategy
from recovery.delta.log import app_transaction_version
from recovery.delta.model import SinkWarning
from recovery.delta.sink import sink_warning
from recovery.errors import InvalidInput, OffsetSpecError
from recovery.kafka.cluster import cluster_view, time_targets, topics_matching
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets, load_offsets_file
from recovery.kafka.offsets import offsets_for_time
from recovery.kafka.values import MissingPartition
from recovery.resume import (
    checkpoint_topics,
    checkpoint_view,
    cluster_for,
    refuse_without_kafka_source,
    sink_facts,
)
from recovery.validate import validate_checkpoint

__all__ = [
    "PartitionLag",
    "RepairResult",
    "StartingOffsets",
    "ValidationReport",
    "checkpoint_lag",
    "plan_repair",
    "repair_checkpoint",
    "starting_offsets",
    "validate_checkpoint",
]


# -- validate and repair --------------------------------------------------------------------------


def plan_repair(
    location: str,
    kafka: KafkaConfig,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    sink: str | None = None,
) -> Plan:
    """The repair ``strategy`` (default: follower-style clamp) would make. Never writes. With
    ``sink`` (the query's Delta sink), a re-run batch the sink already holds is planned as Spark
    runs it: skipped, the next batch starting from its stored end.

    Example: ``plan_repair("/chk", KafkaConfig("localhost:9092"), Strategy(StrategyKind.EARLIEST))``
    """
    chk = open_checkpoint(location, storage_options)
    return _plan_from(chk, kafka, strategy, policy, isolation, storage_options, sink)


def repair_checkpoint(
    location: str,
    kafka: KafkaConfig,
    strategy: StrategyRequest | Strategy | None = None,
    policy: Policy | None = None,
    *,
    execute: bool = False,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    sink: str | None = None,
    accept_sink_skip: bool = False,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
    backup_dir: str | None = None,
) -> RepairResult:
    """Plan a repair and, with ``execute``, apply it through :func:`recovery.apply.apply` (which
    refuses, writing nothing, when the checkpoint looks in use, the plan is outdated or over budget,
    or the Delta ``sink`` would skip the changed batch unless ``accept_sink_skip``).

    ``strategy`` may be a :class:`StrategyRequest` (as the options were given: time and file targets
    are resolved here) or a ready :class:`Strategy`.

    Example: ``repair_checkpoint("/chk", kafka, Strategy(), Policy(max_loss_records=1000), execute=True)``
    """
    # What a file's targets are called in messages: the field the caller filled in.
    targets_name = "from_file" if isinstance(strategy, StrategyRequest) else "strategy.targets"
    if isinstance(strategy, StrategyRequest):
        strategy = resolve_strategy(
            strategy,
            now_ms=int(time.time() * 1000),
            time_targets=lambda ts, no_match: checkpoint_time_targets(
                location, kafka, ts, no_match, isolation=isolation, storage_options=storage_options
            ),
            file_targets=read_targets_file,
        )
    # Planned before any lock, so a refused plan or bad input writes nothing; apply then proves the
    # checkpoint it was planned from unchanged under its lock (one LIST of offsets/, commits/ and
    # _recovery/ against what was read) instead of reading it all again.
    chk = open_checkpoint(location, storage_options)
    plan = _plan_from(chk, kafka, strategy, policy, isolation, storage_options, sink)
    _refuse_unknown_scope(plan, strategy, targets_name=targets_name)
    if not execute or plan.refused:
        return _not_executed(plan, location, sink, storage_options)
    # Lazy on purpose: validate, plan and starting-offsets never load the write path.
    from recovery.apply import apply

    applied = apply(
        plan,
        kafka,
        storage_options=storage_options,
        backup_dir=backup_dir,
        force=force,
        active_within_s=active_within_s,
        sink=sink,
        accept_sink_skip=accept_sink_skip,
        recorded_by="repair_checkpoint",
        checkpoint=chk,
    )
    warning = _sink_warning(location, sink, _sink_risky_files(applied.plan), storage_options)
    return RepairResult(
        applied.plan,
        True,
        applied.backup.id if applied.backup else None,
        warning.message if warning else None,
    )


def _plan_from(
    chk: Checkpoint,
    kafka: KafkaConfig,
    strategy: Strategy | None,
    policy: Policy | None,
    isolation: Isolation,
    storage_options: StorageOptions | None,
    sink: str | None,
) -> Plan:
    """:func:`plan_repair` on a checkpoint already open."""
    view, _ = checkpoint_view(chk)
    refuse_without_kafka_source(chk, view)
    view = sink_facts(view, sink, storage_options)
    cluster = cluster_for(kafka, resolve_sink(view), isolation)
    return replace(decide_repair(view, cluster, strategy, policy), isolation=isolation)


def _not_executed(
    plan: Plan, location: str, sink: str | None, storage_options: StorageOptions | None
) -> RepairResult:
    """The dry run's result (or a refused plan's): nothing written."""
    warning = _sink_warning(location, sink, _sink_risky_files(plan), storage_options)
    return RepairResult(plan, False, None, warning.message if warning else None)


def _sink_warning(
    checkpoint: str | Checkpoint,
    sink: str | None,
    files: Iterable[CheckpointFile],
    storage_options: StorageOptions | None,
) -> SinkWarning | None:
    """:func:`recovery.delta.sink.sink_warning` when there is a ``sink``, else None."""
    if not sink:
        return None
    return sink_warning(checkpoint, sink, tuple(files), storage_options)


def _sink_risky_files(plan: Plan) -> tuple[CheckpointFile, ...]:
    """The files whose change a sink could skip: a re-run batch the sink holds is skipped whatever
    its range, so its offsets/N (batch N+1's start, changed on purpose) is not one of them."""
    skipped = plan.sink_skips_batch
    return tuple(f for f in plan.files if skipped is None or f != CheckpointFile.offsets(skipped))


def _refuse_unknown_scope(plan: Plan, strategy: Strategy | None, *, targets_name: str = "from_file") -> None:
    """A ``scope`` naming nothing the checkpoint reads, or file targets (``targets_name``) for
    partitions it does not read, are typos, not "nothing to change": exit 2 naming them and the
    closest names it does read."""
    if strategy is None:
        return
    read = {f.tp.topic for f in plan.findings}
    if strategy.scope is not None:
        unmatched = [p.regex for p in strategy.scope.patterns if not any(p.matches_topic(t) for t in read)]
        if unmatched:
            raise OffsetSpecError(
                f"scope {', '.join(unmatched)}: the checkpoint reads no such topic"
                f"{_closest(unmatched, read)} (it reads {_listed(sorted(read))}). Nothing was written.",
                parameter="scope",
            )
        _refuse_unknown_partitions(strategy.scope, {f.tp for f in plan.findings})
    if strategy.kind is StrategyKind.FROM_FILE:
        known = {f.tp for f in plan.findings}  # NEW_PARTITION findings included: the file may add them
        unknown = sorted(tp for tp in strategy.targets if tp not in known)
        if unknown:
            partitions = {
                topic: sorted(tp.partition for tp in known if tp.topic == topic)
                for topic in {tp.topic for tp in unknown} & read
            }
            hints = [
                f"{t} has partitions {_listed([str(p) for p in ps])}" for t, ps in sorted(partitions.items())
            ]
            missing = sorted({tp.topic for tp in unknown} - read)
            closest = _closest(missing, read)
            raise OffsetSpecError(
                f"{targets_name}: the checkpoint does not read {_listed([str(tp) for tp in unknown])}"
                f"{closest}{'; ' if hints else ''}{'; '.join(hints)} (it reads {_listed(sorted(read))}). "
                "Nothing was written.",
                parameter=targets_name,
            )


def _refuse_unknown_partitions(scope: TopicSelection, known: set[TopicPartition]) -> None:
    """A scope naming partitions the checkpoint does not read (``orders:99``, ``orders:5-``) is a
    typo, not "nothing to change": exit 2 naming them and the partitions it does read. Partitions
    the cluster added since the checkpoint count as read (Spark reads them on restart), as for
    file targets."""
    for pattern in scope.patterns:
        topics = sorted({tp.topic for tp in known if pattern.matches_topic(tp.topic)})
        ours = sorted(tp for tp in known if tp.topic in topics)
        wanted = [r for r in pattern.partitions if not any(tp.partition in r for tp in ours)]
        if not wanted:
            continue
        if len(topics) == 1 and all(r.hi == r.lo + 1 for r in wanted):
            named = _listed([str(TopicPartition(topics[0], r.lo)) for r in wanted])
        else:
            ranges = ", ".join(_range_text(r) for r in wanted)
            named = f"partition {ranges} of {_listed(topics)}"
        raise OffsetSpecError(
            f"the checkpoint does not read {named} (it reads {_listed([str(tp) for tp in ours])}). "
            "Nothing was written."
        )


def _range_text(r: PartitionRange) -> str:
    """A partition range as it is typed: ``7``, ``2-5`` (upper bound exclusive), ``5-``."""
    if r.hi == r.lo + 1:
        return str(r.lo)
    return f"{r.lo}-{'' if r.hi is None else r.hi}"


def _closest(names: Iterable[str], read: Iterable[str]) -> str:
    """`` (closest: orders, orders-v2)``: names the checkpoint reads that look like ``names``."""
    candidates = sorted(read)
    near = dict.fromkeys(m for name in names for m in difflib.get_close_matches(name, candidates, n=3))
    return f" (closest: {', '.join(near)})" if near else ""


def _listed(items: list[str], shown: int = 10) -> str:
    if not items:
        return "none"
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def checkpoint_time_targets(
    location: str,
    kafka: KafkaConfig,
    timestamp_ms: int,
    no_match: NoMatch,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
) -> Mapping[TopicPartition, int]:
    """For ``to_datetime``/``by_duration``: the first offset at or after ``timestamp_ms`` in every
    partition of the checkpoint's topics (``no_match`` decides where nothing is that new)."""
    check_timestamp_ms(timestamp_ms)  # before any connection
    view, _ = checkpoint_view(open_checkpoint(location, storage_options))
    partitions = cluster_view(kafka, checkpoint_topics(view), isolation).partitions
    return time_targets(kafka, partitions, timestamp_ms, no_match, isolation)


def read_targets_file(path: str, *, name: str = "path") -> Mapping[TopicPartition, int]:
    """The ``topic,partition,offset`` rows at ``path`` (kafka-consumer-groups ``--export``), read
    strictly (``<name> FILE:LINE: what is wrong``, exit 2; a FIFO or directory refused without
    blocking)."""
    return load_offsets_file(path, name=name)


def export_positions(plan: Plan) -> str:
    """The positions after ``plan`` as ``topic,partition,offset`` rows (kafka-consumer-groups
    ``--export``), readable back by :func:`read_targets_file`. Partitions the plan drops are left out."""
    by_tp: dict[TopicPartition, int] = {}
    for (source_id, tp), offset in resume_positions(plan).items():
        if by_tp.setdefault(tp, offset) != offset:
            raise InvalidInput(
                f"two sources read {tp} at different positions; the CSV cannot say which is which "
                f"(source {source_id})"
            )
    return "".join(f"{tp.topic},{tp.partition},{o}\n" for tp, o in sorted(by_tp.items()))


# -- startingOffsets for a fresh checkpoint ------------------------------------------------------


def starting_offsets(
    kafka: KafkaConfig,
    *,
    checkpoint: str | None = None,
    source_id: str | None = None,
    group: str | None = None,
    timestamp_ms: int | None = None,
    topics: TopicSelection | Iterable[str] | None = None,
    no_match: NoMatch = NoMatch.LATEST,
    on_beyond_end: OnBeyondEnd = OnBeyondEnd.LATEST,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    sink: str | None = None,
) -> StartingOffsets:
    """Spark ``startingOffsets`` listing every partition, from exactly one of: an old checkpoint
    (where it would resume, repaired follower-style), a consumer group's committed offsets, or the
    first offsets at or after a timestamp. The documented way to move a query to a fresh checkpoint.
    With ``sink`` (and a checkpoint), warn when that Delta sink holds batches of the old query id.

    Example: ``starting_offsets(kafka, checkpoint="/old-chk").to_json()``
    """
    if sum(x is not None for x in (checkpoint, group, timestamp_ms)) != 1:
        raise InvalidInput("give exactly one of a checkpoint, a consumer group or a timestamp")
    if timestamp_ms is not None:
        check_timestamp_ms(timestamp_ms)  # before any connection
    if (source_id is not None or sink is not None) and checkpoint is None:
        raise InvalidInput("source_id and sink go with checkpoint")
    names = _topic_names(kafka, topics)
    if checkpoint is not None:
        chk = open_checkpoint(checkpoint, storage_options)
        view, _ = checkpoint_view(chk)
        ids = [s.source_id for s in view.sources]
        chosen = source_id if source_id is not None else (ids[0] if len(ids) == 1 else None)
        if chosen is None:
            raise InvalidInput(
                f"source_id is needed: {chk.location} has Kafka sources {', '.join(ids) or '(none)'}; "
                "choose one",
                parameter="source_id",
            )
        if chosen not in ids:
            raise InvalidInput(f"{chk.location}: no Kafka source {chosen} (has {', '.join(ids) or 'none'})")
        view = replace(view, sources=tuple(s for s in view.sources if s.source_id == chosen))
        names |= checkpoint_topics(view)
        cluster = _with_every_partition(cluster_for(kafka, view, isolation), kafka, names, isolation)
        plan = decide_repair(view, cluster, Strategy(on_beyond_end=on_beyond_end))
        positions = {tp: offset for (_, tp), offset in resume_positions(plan).items()}
        warnings = _old_query_in_sink(sink, chk.query_id) if sink else ()
        completed = complete_starting_offsets(positions, cluster, names, "checkpoint")
        return StartingOffsets(_with_loss(completed, plan), warnings=warnings)
    if not names:
        raise InvalidInput(
            "topics: name the topics the query reads (a group or a timestamp does not say which)",
            parameter="topics",
        )
    cluster = cluster_view(kafka, names, isolation)
    if group is not None:
        committed = group_offsets(kafka, group).offsets
        return StartingOffsets(complete_starting_offsets(committed, cluster, names, f"group {group}"))
    assert timestamp_ms is not None
    found = offsets_for_time(
        kafka, sorted(cluster.partitions), timestamp_ms, no_match=no_match, isolation=isolation
    )
    rows = []
    for tp, lookup in found.items():
        if isinstance(lookup, MissingPartition):
            continue
        note = f"no record at or after the time: {lookup.no_match.value}" if lookup.no_match else ""
        rows.append(StartingOffset(tp, lookup.offset, "timestamp", note))
    return StartingOffsets(tuple(rows))


def _with_every_partition(
    cluster: ClusterView, kafka: KafkaConfig, names: set[str], isolation: Isolation
) -> ClusterView:
    """``cluster`` with every partition of ``names`` (the checkpoint's topics and those ``topics``
    added) and their topic ids."""
    whole = cluster_view(kafka, names, isolation)
    return replace(cluster, partitions=whole.partitions, topic_ids=whole.topic_ids)


def _with_loss(rows: tuple[StartingOffset, ...], plan: Plan) -> tuple[StartingOffset, ...]:
    """Each row with what moving the checkpoint's position there costs (the repair's accounting)."""
    moves = {m.tp: m for m in plan.moves}
    out = []
    for row in rows:
        move = moves.get(row.tp)
        if move is None or move.new != row.offset or not (move.lost or move.skipped):
            out.append(row)
            continue
        bound = "at most " if move.upper_bound else ""
        cost = f"checkpoint position {move.old}: {bound}{move.lost} records lost, {move.skipped} skipped"
        note = f"{row.note}; {cost}" if row.note else cost
        out.append(replace(row, note=note, lost=move.lost, skipped=move.skipped))
    return tuple(out)


def _topic_names(kafka: KafkaConfig, topics: TopicSelection | Iterable[str] | None) -> set[str]:
    """The cluster's topics that ``topics`` names (each item a regex matching whole names)."""
    if topics is None:
        return set()
    if not isinstance(topics, TopicSelection):
        return set(topics)
    found = topics_matching(kafka, topics)
    unmatched = [p.regex for p in topics.patterns if not any(p.matches_topic(t) for t in found)]
    if unmatched:
        raise OffsetSpecError(
            f"topics {', '.join(unmatched)}: no such topic on the cluster, or none these client settings "
            "may Describe (Kafka lists only those)",
            parameter="topics",
        )
    return set(found)


def _old_query_in_sink(sink: str, query_id: str) -> tuple[str, ...]:
    held = app_transaction_version(sink, query_id)
    if held is None:
        return ()
    return (
        f"Delta sink {sink} holds batches up to {held} for query id {query_id} (the old checkpoint's): a new "
        "checkpoint that reused that id would have them skipped; do not copy its metadata file",
    )


# -- lag ------------------------------------------------------------------------------------------


def checkpoint_lag(
    location: str,
    kafka: KafkaConfig,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    runway_warn_s: float | None = None,
) -> tuple[PartitionLag, ...]:
    """Per partition: where the checkpoint resumes, the log's bounds now, the records still to read,
    and the retention runway (``PartitionLag.runway_s``: seconds until retention may delete unread
    records; with ``runway_warn_s``, a shorter one is verdict AT_RISK).

    Spark commits no offsets to Kafka, so lag tools cannot see a Spark job; this is what they miss.
    """
    report = validate_checkpoint(
        location, kafka, isolation=isolation, storage_options=storage_options, runway_warn_s=runway_warn_s
    )
    return tuple(
        PartitionLag(
            f.source_id,
            f.tp,
            f.position,
            f.available.start if f.available else None,
            f.available.end if f.available else None,
            f.verdict,
            records_lost=f.records_lost,
            upper_bound=f.upper_bound,
            runway=f.runway,
            at_ms=report.runway_at_ms,
        )
        for f in report.findings
    )
