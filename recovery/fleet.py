"""``fleet validate``: every job of a :class:`~recovery.conf.FleetConf` checked at once, as
:func:`recovery.validate.validate_checkpoint` checks one.

    report = validate_fleet(load_conf("conf/"), parallel=8)
    report.exit_code                      # the most urgent of the jobs' (see FleetReport.exit_code)
    [(j.name, j.verdict) for j in report.jobs]

Steps:

1. each cluster some job reads is asked once whether it answers (a Metadata request for its
   brokers only), so an unreachable cluster costs one timeout, not one per job; its jobs are
   reported ``UNREACHABLE`` with that one-line reason and are not checked further;
2. every other job runs :func:`~recovery.validate.validate_checkpoint` in a bounded thread pool
   (the work is waiting on Kafka and storage);
3. a job that fails is reported with a verdict saying why (``UNREACHABLE``, ``BAD_CHECKPOINT``,
   ``BAD_SINK``, ``BAD_CONFIG``, ``FAILED``) and the error's one-line message; the other jobs are
   unaffected. Exceptions that are not :class:`~recovery.errors.RecoveryError` are bugs and propagate.
"""

from __future__ import annotations

import functools
import logging
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from recovery.conf import ClusterConf, FleetConf, JobConf, load_conf
from recovery.core.model import Finding, Verdict
from recovery.core.results import ValidationReport
from recovery.errors import (
    CheckpointFormatError,
    ConfigError,
    DeltaTableNotFound,
    ExitCode,
    ExternalError,
    InvalidInput,
    KafkaAccessDenied,
    RecoveryError,
)
from recovery.kafka.admin import admin_for
from recovery.kafka.cluster import ClusterMemory
from recovery.kafka.runway_facts import StampCache
from recovery.validate import CheckpointCache, Validation, validate_checkpoint, validate_checkpoints

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PARALLEL",
    "FleetReport",
    "JobFailure",
    "JobResult",
    "JobVerdict",
    "check_job",
    "check_jobs",
    "choose_jobs",
    "in_shard",
    "probe_cluster",
    "validate_fleet",
]

DEFAULT_PARALLEL = 8

# How bad a partition verdict is, to pick a job's worst partition (among those that need action
# first: a NEW_PARTITION Spark fails on outranks a BELOW_LOG_START it would not).
_RANK = {
    Verdict.OK: 0,
    Verdict.AT_RISK: 1,  # needs action (start the query), but nothing is lost yet
    Verdict.NEW_PARTITION: 2,
    Verdict.TRANSIENT: 3,
    Verdict.OPEN_TRANSACTION: 4,
    Verdict.BEYOND_LOG_END: 5,
    Verdict.BELOW_LOG_START: 6,
    Verdict.PARTITION_GONE: 7,
    Verdict.TOPIC_RECREATED: 8,
    Verdict.TOPIC_GONE: 9,
}

# The urgency of a job's exit code: what an operator must act on first. See FleetReport.exit_code.
URGENCY = (ExitCode.ACTION_NEEDED, ExitCode.INVALID_INPUT, ExitCode.UNREACHABLE, ExitCode.OK)


class JobVerdict(StrEnum):
    """A job's verdict when it is not the verdict of one of its partitions (:class:`Verdict`)."""

    UNREACHABLE = "UNREACHABLE"  # its Kafka cluster or its storage did not answer (exit 3)
    UNAUTHORIZED = "UNAUTHORIZED"  # its cluster refused the credentials, or an ACL is missing (exit 3)
    BAD_CHECKPOINT = "BAD_CHECKPOINT"  # no checkpoint at the location, or a malformed one (exit 2)
    BAD_SINK = "BAD_SINK"  # no Delta table at the job's sink (exit 2)
    BAD_CONFIG = "BAD_CONFIG"  # the cluster's client settings are refused by the Kafka client (exit 2)
    FAILED = "FAILED"  # any other error, with its own exit code
    CHECKPOINT_ISSUE = "CHECKPOINT_ISSUE"  # partitions fine, but Spark refuses the checkpoint (exit 1)
    SINK_WOULD_SKIP = "SINK_WOULD_SKIP"  # partitions fine, but the Delta sink would skip batches (exit 1)


@dataclass(frozen=True)
class JobFailure:
    """Why a job could not be checked: its verdict, the error's one-line message and exit code."""

    verdict: JobVerdict
    message: str
    exit_code: ExitCode

    @classmethod
    def of(cls, exc: RecoveryError, prefix: str = "") -> JobFailure:
        if isinstance(exc, KafkaAccessDenied):
            verdict = JobVerdict.UNAUTHORIZED
        elif isinstance(exc, ExternalError):
            verdict = JobVerdict.UNREACHABLE
        elif isinstance(exc, CheckpointFormatError):
            verdict = JobVerdict.BAD_CHECKPOINT
        elif isinstance(exc, DeltaTableNotFound):
            verdict = JobVerdict.BAD_SINK
        elif isinstance(exc, ConfigError):
            verdict = JobVerdict.BAD_CONFIG
        else:
            verdict = JobVerdict.FAILED
        message = " ".join(str(exc).split())  # one line, whatever the error said
        return cls(verdict, f"{prefix}{message}", exc.exit_code)


@dataclass(frozen=True)
class JobResult:
    """One job: the report of its checkpoint, or why there is none."""

    job: JobConf
    report: ValidationReport | None = None
    failure: JobFailure | None = None

    @property
    def name(self) -> str:
        return self.job.name

    @functools.cached_property  # a scan of every partition, asked for by every column of a row
    def worst(self) -> Finding | None:
        """The partition that decides the job's verdict (None: no report, or no Kafka partition)."""
        if self.report is None or not self.report.findings:
            return None
        return max(self.report.findings, key=lambda f: (f.needs_action, _RANK.get(f.verdict, 0)))

    @functools.cached_property
    def verdict(self) -> str:
        """The worst partition's :class:`Verdict`, or a :class:`JobVerdict`."""
        if self.failure is not None:
            return self.failure.verdict.value
        assert self.report is not None
        worst = self.worst
        if worst is not None and (worst.needs_action or not self.report.needs_action):
            return worst.verdict.value
        if self.report.needs_action:
            return (
                JobVerdict.SINK_WOULD_SKIP if self.report.sink_warning else JobVerdict.CHECKPOINT_ISSUE
            ).value
        return Verdict.OK.value

    @property
    def records_lost(self) -> int | None:
        return sum(f.records_lost for f in self.report.findings) if self.report else None

    @property
    def silently_skipped(self) -> int | None:
        return sum(f.silently_skipped for f in self.report.findings) if self.report else None

    @property
    def needs_action(self) -> bool:
        return self.report is not None and self.report.needs_action

    @property
    def exit_code(self) -> ExitCode:
        if self.failure is not None:
            return self.failure.exit_code
        assert self.report is not None
        return self.report.exit_code


@dataclass(frozen=True)
class FleetReport:
    """Every job's result, sorted by job name."""

    source: str
    jobs: tuple[JobResult, ...]

    @property
    def exit_code(self) -> ExitCode:
        """The most urgent of the jobs' exit codes: 1 when any job needs action (its restart would
        fail or lose data); else 2 when any job's checkpoint, sink or settings are invalid; else 3
        when any job could not be checked (cluster or storage unreachable); else 0. Known problems
        come before unknowns: an unreachable cluster may be transient, a job that will fail is not."""
        codes = {job.exit_code for job in self.jobs}
        for code in URGENCY:
            if code in codes:
                return code
        return ExitCode.OK

    def count(self, code: ExitCode) -> int:
        return sum(job.exit_code is code for job in self.jobs)


def validate_fleet(
    conf: FleetConf | str | Path,
    *,
    parallel: int = DEFAULT_PARALLEL,
    jobs: Iterable[str] | None = None,
    on_done: Callable[[JobResult], None] | None = None,
    runway_warn_s: float | None = None,
) -> FleetReport:
    """Check every job of ``conf`` (or of the conf directory it names) concurrently, at most
    ``parallel`` at a time. Never writes. ``jobs`` limits the check to those names; ``on_done`` is
    called (from a worker thread) as each job finishes, e.g. to advance a progress bar.
    ``runway_warn_s``: the AT_RISK threshold of jobs whose conf sets no ``runway_warn``.

    Example: ``validate_fleet("conf/examples", parallel=4).exit_code``
    """
    if parallel < 1:
        raise InvalidInput(f"parallel must be at least 1, not {parallel}", parameter="parallel")
    fleet = conf if isinstance(conf, FleetConf) else load_conf(conf)
    chosen = choose_jobs(fleet, jobs)
    clusters = sorted({job.cluster for job in chosen})
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="fleet")
    try:
        # Probes are queued first: a job waiting on its cluster's probe never blocks a probe from running.
        probes = {name: pool.submit(probe_cluster, fleet.clusters[name]) for name in clusters}
        futures = [
            pool.submit(_check, job, fleet.cluster_of(job), probes[job.cluster], on_done, runway_warn_s)
            for job in chosen
        ]
        results = [future.result() for future in futures]
    finally:
        # On Ctrl-C (or a bug in one job) the queued jobs are dropped; running ones end within their timeouts.
        pool.shutdown(wait=True, cancel_futures=True)
    return FleetReport(fleet.source, tuple(sorted(results, key=lambda r: r.name)))


def choose_jobs(fleet: FleetConf, names: Iterable[str] | None) -> list[JobConf]:
    """The jobs named (all when None), in that order; ConfigError for a name the conf lacks."""
    if names is None:
        chosen = list(fleet.jobs.values())
    else:
        wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in fleet.jobs]
        if unknown:
            raise ConfigError(
                f"{fleet.source}: no job {', '.join(unknown)} "
                f"(defined: {', '.join(sorted(fleet.jobs)) or 'none'})"
            )
        chosen = [fleet.jobs[n] for n in wanted]
    if not chosen:
        raise ConfigError(f"{fleet.source}: no jobs defined ([job.NAME] tables)")
    return chosen


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether job ``name`` belongs to shard ``(index, count)`` (None: every job does): a stable
    hash of the name (CRC-32, the same in every process and release), so N replicas given shards
    0..N-1 of one conf split its jobs between them, each job to exactly one."""
    if shard is None:
        return True
    index, count = shard
    return zlib.crc32(name.encode()) % count == index


def probe_cluster(cluster: ClusterConf) -> JobFailure | None:
    """Whether the cluster answers at all (one metadata request for its brokers only, bounded by
    its timeout): None, or the failure its jobs are reported with."""
    try:
        admin_for(cluster.kafka).ping()
    except RecoveryError as exc:
        log.info("cluster %s: %s", cluster.name, exc)
        return JobFailure.of(exc, f"cluster {cluster.name}: ")
    return None


def _check(
    job: JobConf,
    cluster: ClusterConf,
    probe: Future[JobFailure | None],
    on_done: Callable[[JobResult], None] | None,
    runway_warn_s: float | None = None,
) -> JobResult:
    failure = probe.result()
    result = (
        JobResult(job, failure=failure) if failure is not None else check_job(job, cluster, runway_warn_s)
    )
    log.debug("job %s: %s", job.name, result.verdict)
    if on_done is not None:
        on_done(result)
    return result


def check_job(
    job: JobConf,
    cluster: ClusterConf,
    runway_warn_s: float | None = None,
    stamp_cache: StampCache | None = None,
) -> JobResult:
    """One job checked (its cluster assumed to answer): its report, or why there is none.
    ``runway_warn_s``: the AT_RISK threshold when the job's conf sets none; ``stamp_cache``: the
    cluster's record stamps kept across checks."""
    request = _validation(job, runway_warn_s)
    try:
        report = validate_checkpoint(
            request.location,
            cluster.kafka,
            isolation=request.isolation,
            storage_options=request.storage_options,
            sink=request.sink,
            runway_warn_s=request.runway_warn_s,
            delta_tables=request.delta_tables,
            stamp_cache=stamp_cache,
            spark_version=request.spark_version,
            real_time=request.real_time,
        )
    except RecoveryError as exc:
        return _failed(job, exc)
    return JobResult(job, report=report)


def check_jobs(
    jobs: Sequence[JobConf],
    cluster: ClusterConf,
    runway_warn_s: float | None = None,
    stamp_cache: StampCache | None = None,
    parallel: int = DEFAULT_PARALLEL,
    checkpoint_cache: CheckpointCache | None = None,
    cluster_memory: ClusterMemory | None = None,
) -> list[JobResult]:
    """:func:`check_job` of each of ``jobs``, all of ``cluster``, judged against one read of it
    (:func:`recovery.validate.validate_checkpoints`: ``fleet serve`` checks a thousand jobs with one
    Metadata request and one ListOffsets per broker); their checkpoints are read ``parallel`` at a
    time (``checkpoint_cache``: those read before, not read again while unchanged;
    ``cluster_memory``: the cluster's answers kept from earlier checks, used while they hold). A
    failure of the cluster is every job's; a bad checkpoint is its job's alone."""
    requests = [_validation(job, runway_warn_s) for job in jobs]
    answers = validate_checkpoints(
        cluster.kafka,
        requests,
        stamp_cache=stamp_cache,
        checkpoint_cache=checkpoint_cache,
        cluster_memory=cluster_memory,
        parallel=parallel,
    )
    return [
        JobResult(job, report=answer) if isinstance(answer, ValidationReport) else _failed(job, answer)
        for job, answer in zip(jobs, answers, strict=True)
    ]


def _validation(job: JobConf, runway_warn_s: float | None) -> Validation:
    """What validating ``job``'s checkpoint takes (its own ``runway_warn`` before ``runway_warn_s``)."""
    return Validation(
        job.checkpoint,
        isolation=job.isolation,
        storage_options=dict(job.storage_options),
        sink=job.sink,
        runway_warn_s=job.runway_warn_s if job.runway_warn_s is not None else runway_warn_s,
        delta_tables=dict(job.delta_tables) or None,
        spark_version=job.spark_line,
        real_time=job.real_time,
    )


def _failed(job: JobConf, exc: RecoveryError) -> JobResult:
    log.info("job %s: %s", job.name, exc)
    return JobResult(job, failure=JobFailure.of(exc))
