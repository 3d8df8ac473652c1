"""Use cases: read the checkpoint and the cluster into values, decide with :mod:`recovery.plan`,
apply through the checkpoint library, return values for the caller to print.

    validate_checkpoint(location, kafka)            -> Report   (never writes)
    plan_repair(location, kafka, strategy, policy)  -> Plan     (never writes)
    apply(plan, kafka)                              -> Applied  (backup, atomic rewrite, .crc)
    starting_offsets(...)                           -> StartingOffsets (Spark startingOffsets JSON)

The topic ids seen by ``apply`` and by the pre-start gate are recorded in
``<checkpoint>/_recovery/topic-ids.json`` (Spark ignores that directory), so that a later run can
tell a recreated topic from the old one even where its offsets still look in range.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from recovery.checkpoint import (
    BackupSet,
    Checkpoint,
    Issue,
    Level,
    NextRun,
    OffsetLogEntry,
    SourceKind,
    open_checkpoint,
    rewrite_offsets,
)
from recovery.errors import CheckpointInUse, ExitCode, InvalidInput, LossBudgetExceeded, PlanOutdated
from recovery.kafka.admin import (
    Isolation,
    MissingPartition,
    NoMatch,
    describe_topics,
    offset_ranges,
    offsets_for_time,
)
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets
from recovery.model import (
    CheckpointView,
    ClusterView,
    Finding,
    OffsetRange,
    Plan,
    Policy,
    SourcePosition,
    StartingOffset,
    Strategy,
    TopicPartition,
    Verdict,
)
from recovery.plan import assess, complete_starting_offsets, resume_positions
from recovery.plan import plan_repair as plan_from_values

TOPIC_IDS_FILE = "_recovery/topic-ids.json"
DEFAULT_ACTIVE_WITHIN_S = 300.0


@dataclass(frozen=True)
class Report:
    """What ``validate`` found: per-partition findings plus checkpoint-level issues."""

    checkpoint: str
    query_id: str
    batch_id: int
    rerun: bool
    isolation: str
    findings: tuple[Finding, ...]
    issues: tuple[Issue, ...] = ()
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # as the cluster reported them now

    @property
    def needs_action(self) -> bool:
        return any(f.needs_action for f in self.findings) or any(i.level is Level.ERROR for i in self.issues)

    @property
    def exit_code(self) -> ExitCode:
        if self.needs_action:
            return ExitCode.ACTION_NEEDED
        if any(f.verdict is Verdict.TRANSIENT for f in self.findings):
            return ExitCode.UNREACHABLE
        return ExitCode.OK


@dataclass(frozen=True)
class Applied:
    plan: Plan
    backup: BackupSet | None  # None when nothing needed to change
    recorded_topic_ids: Mapping[str, str]


# -- reading -------------------------------------------------------------------------------------


def checkpoint_view(chk: Checkpoint) -> tuple[CheckpointView, tuple[Issue, ...]]:
    """Where each Kafka source of ``chk`` resumes (spec §5.1-5.2), and what looks wrong in its logs.

    A source whose line is ``-`` (no offset) resumes as Spark resumes it: after a committed batch N
    from ``offsets/N-1`` (``startOffsets = offsets[N-1] ++ offsets[N]``), else from its initial
    offsets ``sources/<i>/0``; a re-run batch starts from ``offsets/N-1`` or ``sources/<i>/0``.
    """
    state = chk.restart_state()
    latest = chk.latest_offsets()
    rerun = state.next_run is NextRun.RERUN_BATCH or (
        state.next_run is NextRun.FIRST_BATCH and latest is not None
    )
    ids, id_issues = _read_topic_ids(chk)
    issues = (*state.issues, *id_issues)
    sources: list[SourcePosition] = []
    if latest is None:  # nothing planned yet: batch 0 starts from each Kafka source's initial offsets
        for entry in chk.store.list("sources"):
            initial = chk.initial_offsets(entry.name) if entry.is_dir else None
            if initial is not None:
                sources.append(SourcePosition(entry.name, f"sources/{entry.name}/0", initial.kafka.offsets))
    else:
        n = latest.batch_id
        previous = chk.offsets(n - 1) if n - 1 in chk.offset_batch_ids else None
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
    return view, issues


def _kafka_offsets(entry: OffsetLogEntry | None, source_id: str) -> dict[TopicPartition, int] | None:
    """The Kafka offsets of ``source_id`` in ``entry``; None if absent, ``-`` or not Kafka."""
    if entry is None:
        return None
    try:
        source = entry.source(source_id)
    except KeyError:
        return None
    return dict(source.kafka.offsets) if source.kind is SourceKind.KAFKA and source.kafka else None


def _resume(
    chk: Checkpoint, source_id: str, latest: OffsetLogEntry, previous: OffsetLogEntry | None, rerun: bool
) -> SourcePosition | None:
    n = latest.batch_id
    here, before = _kafka_offsets(latest, source_id), _kafka_offsets(previous, source_id)
    initial_file = f"sources/{source_id}/0"

    def initial() -> dict[TopicPartition, int] | None:
        found = chk.initial_offsets(source_id)
        return dict(found.kafka.offsets) if found else None

    if not rerun:
        if here is not None:
            return SourcePosition(source_id, f"offsets/{n}", here)
        if before is not None:
            return SourcePosition(source_id, f"offsets/{n - 1}", before)
        first = initial()
        return SourcePosition(source_id, initial_file, first) if first is not None else None
    if before is not None:
        start_file, start = f"offsets/{n - 1}", before
    else:
        first = initial()
        if first is None and here is None:
            return None  # not a Kafka source
        start_file, start = initial_file, first or {}
    if here is None:  # no data for this source in batch N: it resumes from its start
        return SourcePosition(source_id, start_file, start)
    return SourcePosition(source_id, start_file, start, f"offsets/{n}", here)


def cluster_view(kafka: KafkaConfig, topics: Iterable[str], isolation: Isolation) -> ClusterView:
    """Every partition of every existing topic in ``topics``, with log start and end (HW or LSO)."""
    infos = describe_topics(kafka, sorted(set(topics)))
    tps = [TopicPartition(name, p) for name, info in infos.items() if info for p in range(info.partitions)]
    ranges = offset_ranges(kafka, tps, isolation) if tps else {}
    partitions: dict[TopicPartition, OffsetRange] = {
        tp: row.range for tp, row in ranges.items() if not isinstance(row, MissingPartition)
    }
    ids = {name: info.topic_id for name, info in infos.items() if info}
    return ClusterView(partitions, ids)


def checkpoint_topics(view: CheckpointView) -> set[str]:
    return {tp.topic for s in view.sources for tp in (*s.start, *(s.end or {}))}


def recorded_topic_ids(chk: Checkpoint) -> dict[str, str]:
    return _read_topic_ids(chk)[0]


def _read_topic_ids(chk: Checkpoint) -> tuple[dict[str, str], tuple[Issue, ...]]:
    data = chk.store.read(TOPIC_IDS_FILE)
    if data is None:
        return {}, ()
    try:
        return {str(k): str(v) for k, v in json.loads(data)["topic_ids"].items()}, ()
    except (ValueError, KeyError, TypeError, AttributeError):
        # Our own bookkeeping, not Spark's: a damaged file must not block a recovery, but without it
        # a recreated topic whose offsets look in range goes unnoticed. Say so.
        message = (
            f"{chk.store.display(TOPIC_IDS_FILE)} is unreadable: recreated topics cannot be detected "
            "by topic id; it is rewritten by the next repair --execute"
        )
        return {}, (Issue(Level.WARNING, message),)


def record_topic_ids(chk: Checkpoint, ids: Mapping[str, str], by: str) -> dict[str, str]:
    """Remember the topic ids seen now (merged with earlier ones) under ``_recovery/``."""
    merged, data = _topic_ids_file(chk, ids, by)
    chk.store.write_atomic(TOPIC_IDS_FILE, data)
    return merged


def _topic_ids_file(chk: Checkpoint, ids: Mapping[str, str], by: str) -> tuple[dict[str, str], bytes]:
    merged = {**recorded_topic_ids(chk), **ids}
    body = {"topic_ids": dict(sorted(merged.items())), "recorded_at_ms": int(time.time() * 1000), "by": by}
    return merged, (json.dumps(body, indent=2) + "\n").encode()


# -- use cases -----------------------------------------------------------------------------------


def validate_checkpoint(
    location: str,
    kafka: KafkaConfig,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
) -> Report:
    """Compare the position a checkpoint resumes from with what Kafka holds now. Never writes.

    Example: ``validate_checkpoint("/chk", KafkaConfig("localhost:9092")).needs_action``
    """
    chk = open_checkpoint(location, storage_options)
    view, issues = checkpoint_view(chk)
    cluster = cluster_view(kafka, checkpoint_topics(view), isolation)
    findings = assess(view, cluster)
    return Report(
        chk.location,
        view.query_id,
        view.batch_id,
        view.rerun,
        isolation.value,
        findings,
        issues,
        cluster.topic_ids,
    )


def plan_repair(
    location: str,
    kafka: KafkaConfig,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
) -> Plan:
    """The repair ``strategy`` (default: follower-style clamp) would make. Never writes.

    Example: ``plan_repair("/chk", KafkaConfig("localhost:9092"), Strategy(StrategyKind.EARLIEST))``
    """
    chk = open_checkpoint(location, storage_options)
    view, _ = checkpoint_view(chk)
    plan = plan_from_values(view, cluster_view(kafka, checkpoint_topics(view), isolation), strategy, policy)
    return replace(plan, isolation=isolation.value)


def time_targets(
    location: str,
    kafka: KafkaConfig,
    timestamp_ms: int,
    no_match: NoMatch,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[TopicPartition, int]:
    """For ``--to-datetime``/``--by-duration``: the first offset at or after ``timestamp_ms`` in every
    partition of the checkpoint's topics (``no_match`` decides where nothing is that new)."""
    view, _ = checkpoint_view(open_checkpoint(location, storage_options))
    partitions = sorted(cluster_view(kafka, checkpoint_topics(view), isolation).partitions)
    found = offsets_for_time(kafka, partitions, timestamp_ms, no_match=no_match, isolation=isolation)
    return {tp: row.offset for tp, row in found.items() if not isinstance(row, MissingPartition)}


def apply(
    plan: Plan,
    kafka: KafkaConfig,
    *,
    storage_options: Mapping[str, Any] | None = None,
    backup_dir: str | None = None,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
    recorded_by: str = "repair --execute",
) -> Applied:
    """Apply ``plan``: refuse if the policy does, or the checkpoint looks in use (unless ``force``);
    re-plan against offsets read right before writing (retention and producers keep moving them);
    then back up, rewrite in place (atomic, ``.crc``), and record the ids of the topics that are
    healthy afterwards.

    The fresh plan is the one applied (``Applied.plan``). It must touch the same partitions in the
    same files and pass the same policy, else nothing is written (PlanOutdated, LossBudgetExceeded):
    a value that moved with the log (a log start after retention, a log end after new records) is
    taken as it is now, and the budget is checked on it.

    Example: ``apply(plan_repair("/chk", kafka), kafka).backup.id``
    """
    if plan.refused:
        raise LossBudgetExceeded(f"{plan.checkpoint}: repair refused: {plan.refused}. Nothing was written.")
    chk = open_checkpoint(plan.checkpoint, storage_options)
    if not force:
        refuse_if_in_use(chk, active_within_s)
    view, _ = checkpoint_view(chk)
    cluster = cluster_view(kafka, checkpoint_topics(view), Isolation(plan.isolation))
    strategy, policy = plan.made_with or (None, None)
    fresh = replace(plan_from_values(view, cluster, strategy, policy), isolation=plan.isolation)
    if fresh.refused:
        raise LossBudgetExceeded(
            f"{plan.checkpoint}: repair refused on offsets read just now: {fresh.refused}. "
            "Nothing was written."
        )
    if _touched(fresh) != _touched(plan):
        raise PlanOutdated(
            f"{plan.checkpoint}: the checkpoint or the cluster changed since the plan was made "
            "(partitions or batch files differ); plan the repair again. Nothing was written."
        )
    healthy = _healthy_topic_ids(fresh, cluster)
    if not fresh.changes:
        return Applied(fresh, None, record_topic_ids(chk, healthy, recorded_by))
    batches: dict[int, dict[str, dict[TopicPartition, int | None]]] = {}
    initial: dict[str, dict[TopicPartition, int | None]] = {}
    for change in fresh.changes:
        kind, _, rest = change.file.partition("/")
        if kind == "offsets":
            batches.setdefault(int(rest), {}).setdefault(change.source_id, {})[change.tp] = change.new
        else:
            initial.setdefault(change.source_id, {})[change.tp] = change.new
    # The id record changes with the offsets, in the same backup set: a restore puts both back.
    ids, ids_file = _topic_ids_file(chk, healthy, recorded_by)
    backup = rewrite_offsets(
        chk,
        batches,
        initial=initial,
        backup_dir=backup_dir,
        storage_options=storage_options,
        extra={TOPIC_IDS_FILE: ids_file},
    )
    return Applied(fresh, backup, ids)


def _touched(plan: Plan) -> set[tuple[str, str, TopicPartition, bool]]:
    return {(c.file, c.source_id, c.tp, c.new is None) for c in plan.changes}


def _healthy_topic_ids(plan: Plan, cluster: ClusterView) -> dict[str, str]:
    """Ids of the topics whose every partition is fine once ``plan`` is applied. A topic left with
    a problem (out of ``--topic`` scope, say) keeps its old id, so a recreation stays visible."""
    moved = {(m.source_id, m.tp) for m in plan.moves}
    troubled = {f.tp.topic for f in plan.findings if f.needs_action and (f.source_id, f.tp) not in moved}
    return {topic: id_ for topic, id_ in cluster.topic_ids.items() if topic not in troubled}


def refuse_if_in_use(chk: Checkpoint, active_within_s: float) -> None:
    """A running query writes offsets/N before each batch and commits/N after it. If the newest of
    those was written within ``active_within_s``, assume a query is running: a rewrite under it would
    be ignored (Spark caches the last batches) or overwritten. An idle running query writes nothing,
    so this cannot prove a query is stopped: stop the query before repairing."""
    newest = [f"offsets/{i}" for i in chk.offset_batch_ids[-1:]] + [
        f"commits/{i}" for i in chk.commit_batch_ids[-1:]
    ]
    now = time.time()
    for rel in newest:
        try:
            modified = chk.store.fs.modified(chk.store.full(rel)).timestamp()
        except (NotImplementedError, OSError, KeyError, AttributeError):
            continue  # a store that cannot say: nothing to go on
        age = now - modified
        if age < active_within_s:
            raise CheckpointInUse(
                f"{chk.store.display(rel)} was written {age:.0f}s ago: the query looks like it is running. "
                f"Stop it first, or pass --force if it is stopped. Nothing was written."
            )


# -- startingOffsets for a fresh checkpoint ------------------------------------------------------

STARTING_OFFSETS_CAVEATS = (
    "startingOffsets is read only when the checkpoint location has no offsets yet: start the query "
    "with a NEW checkpoint location.",
    "A Delta sink skips batch ids it already committed for the same query id (txn appId = query id): "
    "do not copy the old checkpoint's metadata file into the new one.",
    "A file sink keeps its own batch log in <output>/_spark_metadata and skips batch ids it has seen: "
    "a new checkpoint restarts at batch 0, so write to a new output path.",
)


@dataclass(frozen=True)
class StartingOffsets:
    """A complete ``startingOffsets`` for a fresh checkpoint, with where each value came from."""

    rows: tuple[StartingOffset, ...]
    caveats: tuple[str, ...] = STARTING_OFFSETS_CAVEATS

    def to_json(self) -> str:
        """Spark's ``startingOffsets`` JSON, compact as Spark writes it: ``{"t":{"0":5,"1":7}}``."""
        by_topic: dict[str, dict[str, int]] = {}
        for row in sorted(self.rows, key=lambda r: r.tp):
            by_topic.setdefault(row.tp.topic, {})[str(row.tp.partition)] = row.offset
        return json.dumps(by_topic, separators=(",", ":"))


def starting_offsets(
    kafka: KafkaConfig,
    *,
    checkpoint: str | None = None,
    source_id: str | None = None,
    group: str | None = None,
    timestamp_ms: int | None = None,
    topics: Iterable[str] = (),
    no_match: NoMatch = NoMatch.LATEST,
    on_beyond_end: str = "latest",
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
) -> StartingOffsets:
    """Spark ``startingOffsets`` listing every partition, from exactly one of: an old checkpoint
    (where it would resume, repaired follower-style), a consumer group's committed offsets, or the
    first offsets at or after a timestamp. The documented way to move a query to a fresh checkpoint.

    Example: ``starting_offsets(kafka, checkpoint="/old-chk").to_json()``
    """
    chosen = [x is not None for x in (checkpoint, group, timestamp_ms)]
    if sum(chosen) != 1:
        raise InvalidInput("give exactly one of a checkpoint, a consumer group or a timestamp")
    names = set(topics)
    if checkpoint is not None:
        chk = open_checkpoint(checkpoint, storage_options)
        view, _ = checkpoint_view(chk)
        ids = [s.source_id for s in view.sources]
        if source_id is None and len(ids) != 1:
            raise InvalidInput(
                f"{chk.location}: Kafka sources {', '.join(ids) or '(none)'}; choose one with --source"
            )
        chosen_id = source_id if source_id is not None else ids[0]
        if chosen_id not in ids:
            raise InvalidInput(
                f"{chk.location}: no Kafka source {chosen_id} (has {', '.join(ids) or 'none'})"
            )
        view = replace(view, sources=tuple(s for s in view.sources if s.source_id == chosen_id))
        names |= checkpoint_topics(view)
        cluster = cluster_view(kafka, names, isolation)
        plan = plan_from_values(view, cluster, Strategy(on_beyond_end=on_beyond_end))
        return StartingOffsets(
            complete_starting_offsets(_one_source(resume_positions(plan)), cluster, names, "checkpoint")
        )
    if not names:
        raise InvalidInput("name the topics the query reads with --topic")
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


# -- lag ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """How far a checkpoint is behind: ``lag`` = log end - position (None when it cannot be said)."""

    source_id: str
    tp: TopicPartition
    position: int | None
    log_start: int | None
    log_end: int | None
    verdict: Verdict

    @property
    def lag(self) -> int | None:
        if self.position is None or self.log_end is None:
            return None
        return max(0, self.log_end - max(self.position, self.log_start or 0))


def _one_source(positions: Mapping[tuple[str, TopicPartition], int]) -> dict[TopicPartition, int]:
    return {tp: offset for (_, tp), offset in positions.items()}


def checkpoint_lag(
    location: str,
    kafka: KafkaConfig,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[PartitionLag, ...]:
    """Per partition: where the checkpoint resumes, the log's bounds now, and the records still to read.

    Spark commits no offsets to Kafka, so lag tools cannot see a Spark job; this is what they miss.
    """
    report = validate_checkpoint(location, kafka, isolation=isolation, storage_options=storage_options)
    return tuple(
        PartitionLag(
            f.source_id,
            f.tp,
            f.position,
            f.available.start if f.available else None,
            f.available.end if f.available else None,
            f.verdict,
        )
        for f in report.findings
    )
