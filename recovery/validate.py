"""Validate checkpoints against what Kafka holds now: one (:func:`validate_checkpoint`, the
``validate`` command) or many of one cluster at once (:func:`validate_checkpoints`, what
``fleet serve`` runs each round). Never writes.

    report = validate_checkpoint("/chk/orders", kafka)
    reports = validate_checkpoints(kafka, [Validation("/chk/a"), Validation("/chk/b")])

Each validation has three steps: the checkpoint (and its Delta sink and sources) read into a view
(:func:`_prepare`), the cluster read (:func:`recovery.resume.clusters_for`, one round of requests for
every view), and the judging (:func:`recovery.core.plan.assess`, then the runway). Many checkpoints
share the middle step, and the runway's reads: a thousand checkpoints of a cluster cost one
Metadata request, one ListOffsets per broker and one DescribeConfigs, not a thousand of each.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from recovery.checkpoint import Issue, open_checkpoint
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.store import Signature, local_signature, record_local_reads
from recovery.core.model import CheckpointView, ClusterView, Finding, Isolation, TopicPartition, Verdict
from recovery.core.plan import assess, resolve_sink
from recovery.core.real_time import real_time_findings, real_time_refusal, real_time_view
from recovery.core.results import ValidationReport
from recovery.core.runway import TopicRetention, apply_runway, wanted_positions
from recovery.core.spark_lines import DEFAULT_LINE, spark_line
from recovery.delta.api import DELTA_AT_RISK, delta_source_issues
from recovery.delta.sink import sink_warning
from recovery.errors import InvalidInput, KafkaAccessDenied, RecoveryError
from recovery.kafka.admin import admin_for
from recovery.kafka.cluster import ClusterMemory
from recovery.kafka.config import KafkaConfig
from recovery.kafka.runway_facts import RunwayFacts, RunwayReader, StampCache
from recovery.resume import (
    checkpoint_view,
    clusters_for,
    has_delta_source,
    refuse_without_kafka_source,
    sink_facts,
    spark_check_issues,
)

log = logging.getLogger(__name__)

__all__ = [
    "CheckpointCache",
    "Validation",
    "parsed_spark_line",
    "validate_checkpoint",
    "validate_checkpoints",
]


@dataclass(frozen=True)
class Validation:
    """One checkpoint to validate, with :func:`validate_checkpoint`'s parameters."""

    location: str
    isolation: Isolation = Isolation.READ_UNCOMMITTED
    storage_options: StorageOptions | None = None
    sink: str | None = None
    runway: bool = True
    runway_warn_s: float | None = None
    delta_tables: Mapping[str, str] | None = None
    spark_version: str | None = None
    spark_conf: Mapping[str, str] | None = None
    real_time: bool = False

    @property
    def reads_runway(self) -> bool:
        return self.runway or self.runway_warn_s is not None  # a threshold needs the runway


class CheckpointCache:
    """Checkpoints read before, kept across validations (``fleet serve`` reads every checkpoint each
    interval; a stopped query's does not change): a local checkpoint is read again only once a file
    or directory its reading saw (:func:`recovery.checkpoint.store.record_local_reads`) changed,
    was added or went. A checkpoint on an object store, or with a Delta sink or Delta sources (whose
    tables change on their own), is always read. At most ``size`` are kept, the least recently used
    dropped first. A checkpoint with a file or directory changed less than ``recent_s`` before it
    was read is not kept (see :meth:`prepared`). Thread-safe."""

    def __init__(self, size: int = 10_000, recent_s: float = 2.0) -> None:
        self.size = size
        self.recent_ns = int(recent_s * 1e9)
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[Validation, dict[str, Signature], _Ready]] = OrderedDict()
        self._judged: dict[str, _Judged] = {}  # location -> the last judging of the checkpoint kept

    def judged(self, ready: _Ready, cluster: ClusterView) -> _Judged | None:
        """The last judging of ``ready`` (a checkpoint kept) against a cluster equal to ``cluster``."""
        with self._lock:
            kept = self._judged.get(ready.request.location)
        return kept if kept is not None and kept.ready is ready and kept.cluster == cluster else None

    def keep_judged(self, ready: _Ready, judged: _Judged | None) -> None:
        """Keep ``judged`` (None: forget the last) as ``ready``'s while that checkpoint read is kept."""
        location = ready.request.location
        with self._lock:
            kept = self._kept.get(location)
            if judged is not None and kept is not None and kept[2] is ready:
                self._judged[location] = judged
            else:
                self._judged.pop(location, None)
            if len(self._judged) > len(self._kept):  # checkpoints the cache dropped
                for gone in [name for name in self._judged if name not in self._kept]:
                    del self._judged[gone]

    def prepared(self, request: Validation) -> _Ready:
        """``request``'s checkpoint read, or the one read before when nothing it saw changed."""
        with self._lock:
            kept = self._kept.get(request.location)
        if kept is not None:
            before, seen, ready = kept
            if before == request and all(local_signature(p) == sig for p, sig in seen.items()):
                with self._lock:
                    if request.location in self._kept:
                        self._kept.move_to_end(request.location)
                return ready
        started_ns = time.time_ns()
        with record_local_reads() as seen:
            ready = _prepare(request)
        recent = started_ns - self.recent_ns
        keep = (
            bool(seen)
            and ready.local
            and request.sink is None
            and not ready.delta_source
            # a writing command's record: whether its process still runs is asked, not read
            and not ready.interrupted
            # a change within the file system's clock tick keeps the same times: a file or directory
            # changed that recently is not trusted to show the next change (as git does)
            and all(sig is None or max(sig[3], sig[4]) < recent for sig in seen.values())
        )
        with self._lock:
            if keep:
                self._kept[request.location] = (request, seen, ready)
                self._kept.move_to_end(request.location)
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(request.location, None)
        return ready


def validate_checkpoint(
    location: str,
    kafka: KafkaConfig,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    sink: str | None = None,
    runway: bool = True,
    runway_warn_s: float | None = None,
    delta_tables: Mapping[str, str] | None = None,
    stamp_cache: StampCache | None = None,
    spark_version: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    real_time: bool = False,
) -> ValidationReport:
    """Compare the position a checkpoint resumes from with what Kafka holds now. Never writes.
    With ``sink`` (the query's Delta sink table), also say whether it would skip batches.

    Delta sources of the same checkpoint are covered too
    (:func:`recovery.delta.api.delta_source_issues`): judged against ``delta_tables`` (source id ->
    table path), with their runway against ``runway_warn_s`` (:mod:`recovery.delta.runway`), and
    reported as issues, or, when not named, an error issue saying they were not
    checked (a checkpoint records a Delta table's id, not its path), so a mixed checkpoint is never
    called healthy on its Kafka sources alone.

    With ``runway`` (default), each partition Spark resumes cleanly gets its retention runway
    (:mod:`recovery.core.runway`: one DescribeConfigs and a one-record fetch per partition); with
    ``runway_warn_s`` too, one whose runway is shorter becomes AT_RISK (exit 1). ``stamp_cache``:
    record stamps kept across validations of one cluster (:class:`~recovery.kafka.runway_facts.StampCache`).
    ``spark_version`` (``3.5.7``, ``3.5``; default the primary line, 4.2): the Spark the query runs, whose
    words the report gives for each failure, and whose own restart checks it predicts
    (:mod:`recovery.core.spark_lines`); ``spark_conf``: the query's session settings, where known
    (``spark.sql.streaming.checkUnfinishedRepartitionOnRestart=false`` turns Spark 4.2's check off).
    ``real_time``: the query runs in Real-Time Mode (Spark 4.1+; nothing in a checkpoint says so),
    whose restart is predicted as :mod:`recovery.core.real_time` says.

    Example: ``validate_checkpoint("/chk", KafkaConfig("localhost:9092"), runway_warn_s=6 * 3600)``
    """
    request = Validation(
        location,
        isolation,
        storage_options,
        sink,
        runway,
        runway_warn_s,
        delta_tables,
        spark_version,
        spark_conf,
        real_time,
    )
    ready = _prepare(request)
    reader = RunwayReader(kafka, isolation, stamp_cache) if request.reads_runway else None
    try:
        if reader is not None:
            # The runway's record reads start at once, beside the describe and the ListOffsets (on 2
            # cores, ~50 ms sooner than after the describe at 2,000 partitions). A position in a
            # partition that does not exist is never wanted: the read stops once facts() says what
            # is (ReadUntil). The shared admin client is made first, not by both threads at once.
            admin_for(kafka)
            reader.start(
                (tp, position) for source in ready.resumed.sources for tp, position in source.start.items()
            )
        (cluster,) = clusters_for(kafka, [ready.resumed], isolation)
        findings = _findings(ready, cluster)
        at_ms = None
        if reader is not None:
            facts = reader.facts(wanted_positions(findings), cluster.topic_ids)
            at_ms = int(time.time() * 1000)
            findings = _with_runway(findings, facts, runway_warn_s, at_ms)
    finally:
        if reader is not None:
            reader.close()
    return _report(ready, cluster, findings, at_ms)


def validate_checkpoints(
    kafka: KafkaConfig,
    requests: Sequence[Validation],
    *,
    stamp_cache: StampCache | None = None,
    checkpoint_cache: CheckpointCache | None = None,
    cluster_memory: ClusterMemory | None = None,
    parallel: int = 8,
) -> list[ValidationReport | RecoveryError]:
    """:func:`validate_checkpoint` of each of ``requests``, checkpoints of one cluster: each
    checkpoint is read on its own (``parallel`` at a time: storage waits), then the cluster once for
    all of them (per isolation level), and the runway's facts once. Each answer is the report, or
    the error that validation raised (a bad checkpoint is its own; an unreachable cluster is every
    one's; a checkpoint whose topics the credentials may not describe is its own). A bug in reading
    one checkpoint is its error (``internal error: ...``, logged with its traceback).
    ``stamp_cache``, ``checkpoint_cache``, ``cluster_memory``: the record stamps, the checkpoints and
    the cluster's answers read before, kept across calls
    (:class:`~recovery.kafka.runway_facts.StampCache`, :class:`CheckpointCache`,
    :class:`~recovery.kafka.cluster.ClusterMemory`)."""
    if parallel < 1:
        raise InvalidInput(f"parallel must be at least 1, not {parallel}", parameter="parallel")
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="validate") as pool:
        prepare = checkpoint_cache.prepared if checkpoint_cache is not None else _prepare
        prepared = list(pool.map(functools.partial(_prepared_or_error, prepare), requests))
    answers: list[ValidationReport | RecoveryError | None] = [
        ready if isinstance(ready, RecoveryError) else None for ready in prepared
    ]
    levels: dict[Isolation, dict[int, _Ready]] = {}
    for i, ready in enumerate(prepared):
        if isinstance(ready, _Ready):
            levels.setdefault(ready.request.isolation, {})[i] = ready
    for isolation, chosen in levels.items():
        reports: list[ValidationReport | RecoveryError]
        try:
            reports = [
                *_validated(
                    kafka, list(chosen.values()), isolation, stamp_cache, cluster_memory, checkpoint_cache
                )
            ]
        except KafkaAccessDenied as exc:
            # maybe one topic's ACL: then only the checkpoints reading it fail (each on its own)
            reports = (
                [exc]
                if len(chosen) == 1
                else [_alone(kafka, r, stamp_cache, cluster_memory) for r in chosen.values()]
            )
        except RecoveryError as exc:  # the cluster's: every checkpoint's
            reports = [exc] * len(chosen)
        for i, report in zip(chosen, reports, strict=True):
            answers[i] = report
    done = [answer for answer in answers if answer is not None]
    assert len(done) == len(requests)  # every request is answered, in order
    return done


def parsed_spark_line(spark_version: str | None) -> str:
    """The Spark line of ``spark_version`` (None: the default line), or InvalidInput naming it."""
    if spark_version is None:
        return DEFAULT_LINE
    try:
        return spark_line(spark_version)
    except ValueError as exc:
        raise InvalidInput(f"spark_version: {exc}", parameter="spark_version") from None


@dataclass(frozen=True)
class _Ready:
    """A checkpoint read, ready to be judged against the cluster."""

    request: Validation
    location: str  # as the checkpoint names itself
    local: bool  # on a local file system
    delta_source: bool  # reads a Delta table
    interrupted: bool  # holds a writing command's record (running or interrupted)
    view: CheckpointView  # where each source resumes, as the checkpoint says (and its sink)
    resumed: CheckpointView  # the same, once a re-run batch the sink holds is skipped
    issues: tuple[Issue, ...]
    line: str
    warning: str | None  # the Delta sink's, when it would skip batches
    delta_at_risk: tuple[str, ...]


def _prepare(request: Validation) -> _Ready:
    """The checkpoint read (its Delta sources judged, its sink read): everything but Kafka."""
    line = parsed_spark_line(request.spark_version)
    if request.real_time and (refused := real_time_refusal(line)):
        raise InvalidInput(f"real_time: {refused} (the query's Spark)", parameter="real_time")
    chk = open_checkpoint(request.location, request.storage_options)
    view, issues = checkpoint_view(chk)
    if request.real_time:
        view = real_time_view(view)
    issues = (*issues, *spark_check_issues(chk, line, request.spark_conf))
    refuse_without_kafka_source(chk, view)
    warn_s = request.runway_warn_s
    if warn_s is not None and warn_s <= 0:
        raise InvalidInput(f"runway_warn_s must be positive, not {warn_s:g}s", parameter="runway_warn_s")
    delta_at_risk: tuple[str, ...] = ()
    if has_delta_source(chk):
        judged = delta_source_issues(
            chk, request.delta_tables, storage_options=request.storage_options, runway_warn_s=warn_s
        )
        issues = (*issues, *judged)
        delta_at_risk = tuple(i.message for i in judged if i.message.startswith(DELTA_AT_RISK))
    view = sink_facts(view, request.sink, request.storage_options)
    warning = sink_warning(chk, request.sink, (), request.storage_options) if request.sink else None
    return _Ready(
        request,
        chk.location,
        chk.store.is_local,
        has_delta_source(chk),
        chk.interrupted() is not None,
        view,
        resolve_sink(view),
        issues,
        line,
        warning.message if warning else None,
        delta_at_risk,
    )


def _prepared_or_error(
    prepare: Callable[[Validation], _Ready], request: Validation
) -> _Ready | RecoveryError:
    try:
        return prepare(request)
    except RecoveryError as exc:
        return exc
    except Exception as exc:  # a bug reading one checkpoint fails its validation, not the others'
        log.exception("%s: reading the checkpoint failed", request.location)
        return RecoveryError(f"internal error: {exc!r}")


def _validated(
    kafka: KafkaConfig,
    ready: list[_Ready],
    isolation: Isolation,
    stamp_cache: StampCache | None,
    memory: ClusterMemory | None = None,
    checkpoints: CheckpointCache | None = None,
) -> list[ValidationReport]:
    """Every checkpoint of ``ready`` judged against one read of the cluster and of the runway. With
    ``checkpoints``, a checkpoint kept there is given its last judging again while that holds
    (:class:`_Judged`)."""
    clusters = clusters_for(kafka, [r.resumed for r in ready], isolation, memory)
    before = [
        checkpoints.judged(r, cluster) if checkpoints is not None else None
        for r, cluster in zip(ready, clusters, strict=True)
    ]
    # judged again, unless judged before against the same cluster (then judged again only if its
    # runway no longer holds, below): the same findings
    judged = [
        kept.findings if kept is not None else _findings(r, cluster)
        for r, cluster, kept in zip(ready, clusters, before, strict=True)
    ]
    positions = [
        wanted_positions(findings) if r.request.reads_runway else None
        for r, findings in zip(ready, judged, strict=True)
    ]
    wanted: set[tuple[TopicPartition, int]] = set().union(*(p for p in positions if p))
    ids: dict[str, str] = {}
    for r, cluster in zip(ready, clusters, strict=True):
        if r.request.reads_runway:
            ids.update(cluster.topic_ids)
    facts = (
        RunwayReader(kafka, isolation, stamp_cache).facts(wanted, ids) if wanted else RunwayFacts({}, {}, {})
    )
    now_ms = int(time.time() * 1000)
    reports = []
    for r, cluster, findings, kept, where in zip(ready, clusters, judged, before, positions, strict=True):
        at_ms = None
        if where is not None:
            at_ms = now_ms
            if kept is None or not kept.holds(where, facts, now_ms):
                if kept is not None:  # its runway changed: judged from the start
                    findings = _findings(r, cluster)
                findings = _with_runway(findings, facts, r.request.runway_warn_s, now_ms)
                if checkpoints is not None:
                    checkpoints.keep_judged(r, _Judged.of(r, cluster, findings, where, facts))
        elif kept is None and checkpoints is not None:
            checkpoints.keep_judged(r, _Judged(r, cluster, findings))
        reports.append(_report(r, cluster, findings, at_ms))
    return reports


@dataclass(frozen=True)
class _Judged:
    """A checkpoint's last judging (:meth:`CheckpointCache.judged`), given again while what it was
    made of is the same: the very checkpoint read kept, a cluster equal to ``cluster``, and the same
    runway facts of its positions (``facts``: the topics' retention, and the record stamps, the very
    ones :class:`~recovery.kafka.runway_facts.StampCache` keeps). ``fleet serve`` judges every
    partition each interval, and a stopped query's judging seldom changes: only its runway's time
    left, which the report computes from its time.

    A judging whose verdicts depend on the time is not given again: one with an AT_RISK partition
    (whose text counts the time left), one whose runway is shorter than ``runway_warn_s`` now, and
    one of a topic limited by ``retention.bytes`` (whose estimate moves with the time)."""

    ready: _Ready
    cluster: ClusterView
    findings: tuple[Finding, ...]
    facts: tuple[object, ...] | None = None  # None: judged without the runway
    warn_ms: int | None = None

    @classmethod
    def of(
        cls,
        ready: _Ready,
        cluster: ClusterView,
        findings: tuple[Finding, ...],
        wanted: frozenset[tuple[TopicPartition, int]],
        facts: RunwayFacts,
    ) -> _Judged | None:
        """The judging to keep, None when it depends on the time."""
        used = _facts_of(wanted, facts)
        if used is None or any(f.verdict is Verdict.AT_RISK for f in findings):
            return None
        warn_s = ready.request.runway_warn_s
        return cls(ready, cluster, findings, used, None if warn_s is None else int(warn_s * 1000))

    def holds(self, wanted: frozenset[tuple[TopicPartition, int]], facts: RunwayFacts, now_ms: int) -> bool:
        """Whether this judging is still the one ``facts`` give at ``now_ms`` (``wanted``: the
        positions of its findings whose runway is read)."""
        if self.facts is None or self.facts != _facts_of(wanted, facts):
            return False
        if self.warn_ms is not None:
            for f in self.findings:
                left = f.runway.left_ms(now_ms) if f.runway is not None else None
                if left is not None and left < self.warn_ms:
                    return False
        return True


def _facts_of(wanted: frozenset[tuple[TopicPartition, int]], facts: RunwayFacts) -> tuple[object, ...] | None:
    """The runway facts of ``wanted``, to compare (None: a topic limited by ``retention.bytes``)."""
    retention = {topic: facts.retention.get(topic) for topic in {tp.topic for tp, _ in wanted}}
    if any(isinstance(r, TopicRetention) and r.retention_bytes >= 0 for r in retention.values()):
        return None
    return (retention, {key: facts.stamps.get(key) for key in wanted})  # dicts: equal in any order


def _alone(
    kafka: KafkaConfig, ready: _Ready, stamp_cache: StampCache | None, memory: ClusterMemory | None
) -> ValidationReport | RecoveryError:
    try:
        return _validated(kafka, [ready], ready.request.isolation, stamp_cache, memory)[0]
    except RecoveryError as exc:
        return exc


def _findings(ready: _Ready, cluster: ClusterView) -> tuple[Finding, ...]:
    findings = assess(ready.view, cluster)
    return real_time_findings(findings) if ready.request.real_time else findings


def _with_runway(
    findings: tuple[Finding, ...], facts: RunwayFacts, warn_s: float | None, now_ms: int
) -> tuple[Finding, ...]:
    """``findings`` with their retention runway, judged at ``now_ms`` (when the facts were read)."""
    warn_ms = None if warn_s is None else int(warn_s * 1000)
    return apply_runway(
        findings, facts.retention, facts.stamps, sizes=facts.sizes, now_ms=now_ms, warn_ms=warn_ms
    )


def _report(
    ready: _Ready, cluster: ClusterView, findings: tuple[Finding, ...], at_ms: int | None
) -> ValidationReport:
    view, request = ready.view, ready.request
    return ValidationReport(
        ready.location,
        view.query_id,
        view.batch_id,
        view.rerun,
        request.isolation,
        findings,
        ready.issues,
        cluster.topic_ids,
        ready.warning,
        runway_at_ms=at_ms,
        runway_warn_s=request.runway_warn_s,
        delta_at_risk=ready.delta_at_risk,
        spark_line=ready.line,
        real_time=request.real_time,
    )
