"""Watch every job of a conf all the time: what ``fleet serve`` runs (never writes).

    watch = FleetWatch("conf/", interval_s=60)
    threading.Thread(target=watch.run, args=(stop,)).start()
    watch.snapshot()        # {job: JobCheck}: the latest check of each job
    watch.reload()          # SIGHUP: read the conf again; a broken one keeps the last good one

Each job is checked on its own schedule: its interval (the job's ``interval`` key, else its
cluster's, else ``interval_s``) after its previous check ended (so a slow job never makes the
others wait for a round to end). The jobs of a cluster that are due are checked together
(:func:`recovery.fleet.check_jobs`: one Metadata request, one ListOffsets per broker and one
DescribeConfigs for all of them), in batches of about :data:`BATCH_PARTITIONS` partitions, at most
``parallel`` batches and :data:`IN_FLIGHT_PARTITIONS` partitions at a time; a job's check duration
is its batch's. A cluster is probed (one metadata request for its brokers) as often as its most
often checked job, by one worker; while it does not answer, its jobs are reported ``UNREACHABLE``
from that probe without asking it again, so a dead cluster takes one worker per interval, not one
per job, and never delays another cluster's batches. Kafka clients are the process's shared ones
(:func:`recovery.kafka.admin.admin_for`), kept across checks, and so are the record stamps the
runway read (:class:`~recovery.kafka.runway_facts.StampCache`, one per cluster): a stopped query's
records are fetched once, not every interval; and a local checkpoint is read again only once it
changed (:class:`~recovery.validate.CheckpointCache`). So are the cluster's topic descriptions
and time lookups' answers (:class:`~recovery.kafka.cluster.ClusterMemory`), used again while the
offsets read each round show them true (a description at most 5 minutes, as Kafka's clients do).

``shard=(i, n)`` keeps the jobs of shard ``i`` of ``n`` (:func:`recovery.fleet.in_shard`): n
replicas of the service, each given its own ``i``, watch one conf together, each job once.

It never writes, except with ``holds``, and then only for jobs that opted in (``hold = "2d"`` in
their conf): after each check of such a job, its topics' retention is held
(:func:`recovery.hold.hold_retention`) when its runway is shorter than that, and a hold it placed is
put back (:func:`recovery.hold.release_retention`) once the job has caught up.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from recovery.conf import ClusterConf, FleetConf, JobConf, load_conf
from recovery.core.hold import HoldAction, ReleaseAction
from recovery.core.runway import shortest
from recovery.errors import InvalidInput, RecoveryError
from recovery.fleet import DEFAULT_PARALLEL, JobFailure, JobResult, check_jobs, in_shard, probe_cluster
from recovery.hold import hold_retention, read_holds, release_retention
from recovery.kafka.cluster import ClusterMemory
from recovery.kafka.runway_facts import StampCache
from recovery.validate import CheckpointCache

log = logging.getLogger(__name__)

__all__ = ["FleetWatch", "JobCheck"]

_TICK_S = 0.1  # how often the scheduler looks for jobs that are due
# A cluster's due jobs are checked together (one Metadata request and one ListOffsets per broker for
# all of them), in batches of about this many partitions, and at most IN_FLIGHT_PARTITIONS of them
# checked at once: a partition being checked costs ~3 KB (the answers, the findings), so 100,000 at
# once took the service from 480 MB to 820 MB; a few batches side by side still overlap their waits.
BATCH_PARTITIONS = 5_000
IN_FLIGHT_PARTITIONS = 20_000
_UNKNOWN_PARTITIONS = 100  # what a job not checked yet is counted as


@dataclass(frozen=True)
class JobCheck:
    """A job's latest check: its result, when it ended (ms since the epoch) and how long it took,
    and when the job was last checked successfully (a report, whatever its verdict)."""

    result: JobResult
    checked_at_ms: int
    duration_s: float
    last_success_ms: int | None
    hold: str | None = None  # what the retention hold of this check did (with ``holds`` on)


@dataclass
class _Probe:
    failure: JobFailure | None = None
    at: float = -1e18  # monotonic time of the probe's answer
    running: bool = False


@dataclass
class _State:
    checks: dict[str, JobCheck] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)  # job -> monotonic time of its next check
    ended: dict[str, float] = field(default_factory=dict)  # job -> monotonic end of its last check
    running: set[str] = field(default_factory=set)  # jobs being checked
    batches: int = 0  # checks running (each a batch of jobs of one cluster)
    in_flight: int = 0  # the partitions of the batches running (as counted by _batches)
    sizes: dict[str, int] = field(default_factory=dict)  # job -> partitions in its last report
    probes: dict[str, _Probe] = field(default_factory=dict)
    errors: dict[tuple[str, str], int] = field(default_factory=dict)  # (job, kind) -> count
    holds: dict[tuple[str, str], int] = field(default_factory=dict)  # (job, action) -> count
    ended_work: int = 0  # batches and probes ended, and reloads, so far
    full_at: int | None = None  # ended_work when the partitions in flight last left no room
    wake: tuple[int, float] | None = None  # (ended_work, the earliest time a waiting job is due then)


class FleetWatch:
    """The jobs of ``source`` (a conf directory or file), each checked every ``interval_s``."""

    def __init__(
        self,
        source: str | Path,
        *,
        interval_s: float = 60.0,
        parallel: int = DEFAULT_PARALLEL,
        runway_warn_s: float | None = None,
        conf: FleetConf | None = None,
        holds: bool = False,
        shard: tuple[int, int] | None = None,
        on_check: Callable[[str, JobCheck], None] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise InvalidInput(f"interval_s must be positive, not {interval_s:g}", parameter="interval_s")
        if parallel < 1:
            raise InvalidInput(f"parallel must be at least 1, not {parallel}", parameter="parallel")
        if shard is not None and not (shard[1] >= 1 and 0 <= shard[0] < shard[1]):
            raise InvalidInput(
                f"shard must be I of N with 0 <= I < N, not {shard[0]} of {shard[1]}", parameter="shard"
            )
        self.source = str(source)
        self.interval_s = interval_s
        self.parallel = parallel
        self.runway_warn_s = runway_warn_s
        self.holds = holds
        self.shard = shard
        self.on_check = on_check  # called in the worker thread after each check (e.g. to render it)
        # a bad conf at start raises
        self.conf = self._sharded(conf if conf is not None else load_conf(source))
        # cluster -> the record stamps its checks read, and its answers kept
        self._stamps: dict[str, tuple[StampCache, ClusterMemory]] = {}
        self._checkpoints = CheckpointCache(size=100_000)  # read again only once changed
        self.reloads = {"success": 0, "failure": 0}
        self.last_reload_error: str | None = None
        self._lock = threading.Lock()
        self._state = _State(due=dict.fromkeys(self.conf.jobs, 0.0))

    # -- what the service shows -----------------------------------------------------------------

    def snapshot(self) -> dict[str, JobCheck]:
        """The latest check of each job of the current conf (a job not checked yet is absent)."""
        with self._lock:
            return {name: check for name, check in self._state.checks.items() if name in self.conf.jobs}

    def hold_actions(self) -> dict[tuple[str, str], int]:
        """How many retention holds each job's checks placed (``raised``) and released (``released``)
        or tried and could not (``refused``, ``failed``)."""
        with self._lock:
            return dict(self._state.holds)

    def check_errors(self) -> dict[tuple[str, str], int]:
        """How many checks of each job failed, by kind (``unreachable``, ``bad_checkpoint``, ...)."""
        with self._lock:
            return dict(self._state.errors)

    def interval_of(self, job: JobConf) -> float:
        """How often ``job`` is checked: its ``interval``, else its cluster's, else the service's."""
        cluster = self.conf.clusters.get(job.cluster)
        return job.interval_s or (cluster.interval_s if cluster else None) or self.interval_s

    # -- configuration ----------------------------------------------------------------------------

    def _sharded(self, conf: FleetConf) -> FleetConf:
        if self.shard is None:
            return conf
        return replace(conf, jobs={n: j for n, j in conf.jobs.items() if in_shard(n, self.shard)})

    def reload(self) -> str | None:
        """Read the conf again (SIGHUP). New jobs are checked at once, removed ones forgotten; a conf
        that cannot be read keeps the last good one: the error is returned (None: reloaded)."""
        try:
            conf = self._sharded(load_conf(self.source))
        except RecoveryError as exc:
            message = " ".join(str(exc).split())
            log.warning("configuration not reloaded, the last good one stays: %s", message)
            with self._lock:
                self.reloads["failure"] += 1
                self.last_reload_error = message
            return message
        with self._lock:
            before, self.conf = self.conf, conf
            state = self._state
            # a job's new interval applies from its last check, not from the next one (1h -> 10s: now)
            state.due = {
                name: min(state.due.get(name, 0.0), state.ended.get(name, 0.0) + self.interval_of(job))
                for name, job in conf.jobs.items()
            }
            state.ended = {n: t for n, t in state.ended.items() if n in conf.jobs}
            state.checks = {n: c for n, c in state.checks.items() if n in conf.jobs}
            state.errors = {k: v for k, v in state.errors.items() if k[0] in conf.jobs}
            state.sizes = {n: c for n, c in state.sizes.items() if n in conf.jobs}
            state.probes = {n: p for n, p in state.probes.items() if n in conf.clusters}
            # a cluster whose settings changed may be another cluster: nothing of it is kept
            self._stamps = {
                n: c for n, c in self._stamps.items() if conf.clusters.get(n) == before.clusters.get(n)
            }
            self.reloads["success"] += 1
            self.last_reload_error = None
            state.ended_work += 1  # other jobs: scheduled anew
        log.info("configuration reloaded: %d clusters, %d jobs", len(conf.clusters), len(conf.jobs))
        return None

    # -- the loop -----------------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Check jobs as they fall due until ``stop`` is set; then wait for the checks running."""
        with ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="watch") as pool:
            while not stop.is_set():
                for task in self._due(clock()):
                    pool.submit(task)
                stop.wait(_TICK_S)
            log.info("stopping: waiting for the checks running")

    def _due(self, now: float) -> list[Callable[[], None]]:
        """The work to start now: probes of clusters whose last answer is older than an interval,
        and checks of due jobs whose cluster answered (or failed) within the last interval: the
        due jobs of a cluster together, in batches of about :data:`BATCH_PARTITIONS` partitions."""
        tasks: list[Callable[[], None]] = []
        with self._lock:
            conf, state = self.conf, self._state
            # no room since the last call, and no batch or probe ended since: no need to look (a
            # thousand jobs waiting, ten times a second, cost a tenth of the first round's CPU)
            if state.full_at == state.ended_work:
                return tasks
            # Ten times a second: the next due time is looked for again only once work ended (a
            # reload may bring jobs forward), or a job recorded is due sooner than the time kept
            # (_record). Jobs started since only make it later, so the one kept is never too late.
            # (Looking each time cost ~0.4 s of CPU a minute at 1,000 jobs.)
            if state.wake is None or state.wake[0] != state.ended_work or state.wake[1] <= now:
                waiting = (at for n, at in state.due.items() if n not in state.running)
                state.wake = (state.ended_work, min(waiting, default=math.inf))
            if state.wake[1] > now:
                return tasks
            busy = state.batches + sum(p.running for p in state.probes.values())
            ready: dict[str, list[JobConf]] = {}  # cluster -> its due jobs, most overdue first
            for name, at in sorted(state.due.items(), key=lambda item: item[1]):
                if at > now or name in state.running:
                    continue
                job = conf.jobs[name]
                cluster = conf.clusters[job.cluster]
                probe = state.probes.setdefault(cluster.name, _Probe())
                if probe.running:
                    continue
                # as often as its most frequently checked job: a job checked every 10 s on a cluster
                # back up is not reported UNREACHABLE from a probe of minutes ago
                if now - probe.at >= self.interval_of(job):
                    if busy < self.parallel:
                        probe.running = True
                        busy += 1
                        tasks.append(functools.partial(self._probe, cluster))
                    continue
                ready.setdefault(cluster.name, []).append(job)
            for cluster_name, jobs in ready.items():
                cluster = conf.clusters[cluster_name]
                kept = self._stamps.setdefault(cluster_name, (StampCache(), ClusterMemory()))
                failure = state.probes[cluster_name].failure
                for batch, size in self._batches(jobs):
                    if busy >= self.parallel:
                        break
                    if state.in_flight and state.in_flight + size > IN_FLIGHT_PARTITIONS:
                        state.full_at = state.ended_work
                        return tasks  # the most overdue batch goes next, before any other cluster's
                    busy += 1
                    state.running.update(job.name for job in batch)
                    state.batches += 1
                    state.in_flight += size
                    tasks.append(functools.partial(self._check, batch, size, cluster, failure, kept))
            state.full_at = state.ended_work if busy >= self.parallel else None
        return tasks

    def _batches(self, jobs: list[JobConf]) -> list[tuple[list[JobConf], int]]:
        """``jobs`` in batches of about :data:`BATCH_PARTITIONS` partitions, each with its size
        (each job counted as many as its last report found, one never reported as
        :data:`_UNKNOWN_PARTITIONS`)."""
        batches: list[tuple[list[JobConf], int]] = []
        batch: list[JobConf] = []
        size = 0
        for job in jobs:
            count = self._state.sizes.get(job.name, _UNKNOWN_PARTITIONS)
            if batch and size + count > BATCH_PARTITIONS:
                batches.append((batch, size))
                batch, size = [], 0
            batch.append(job)
            size += count
        if batch:
            batches.append((batch, size))
        return batches

    def _hold(self, job: JobConf, cluster: ClusterConf, result: JobResult) -> str | None:
        """For a job that opted in (``hold``): hold its topics' retention when its runway is shorter
        than that, else put back a hold once it has caught up. ``action: what``, None: nothing done.
        Every action is logged; a refusal or failure is said and the service goes on."""
        report = result.report
        if report is None:
            return None
        assert job.hold_s is not None
        found = shortest(report.findings, report.runway_at_ms) if report.runway_at_ms else None
        try:
            if found is not None and found[1] < job.hold_s * 1000:
                plan = hold_retention(
                    job.checkpoint,
                    cluster.kafka,
                    keep_s=job.hold_s,
                    execute=True,
                    isolation=job.isolation,
                    storage_options=dict(job.storage_options),
                    why=f"fleet serve: runway of job {job.name} under its hold",
                )
                raised = [t.topic for t in plan.topics if t.action is HoldAction.RAISE and not t.error]
                problems = [
                    f"{t.topic}: {t.error or t.reason}"
                    for t in plan.topics
                    if t.error or t.action is HoldAction.REFUSED
                ]
                if problems:
                    what = f"refused: {'; '.join(problems)}"
                elif raised:
                    what = f"raised: {', '.join(raised)}"
                else:
                    return None
            else:
                if not read_holds(job.checkpoint, dict(job.storage_options)):
                    return None
                done = release_retention(
                    job.checkpoint,
                    cluster.kafka,
                    execute=True,
                    isolation=job.isolation,
                    storage_options=dict(job.storage_options),
                )
                back = [t.topic for t in done.topics if t.action is ReleaseAction.RESTORE and not t.error]
                if not back:
                    return None
                what = f"released: {', '.join(back)}"
        except RecoveryError as exc:
            what = f"failed: {' '.join(str(exc).split())}"
        log.info("job %s: retention hold %s", job.name, what)
        return what

    def _probe(self, cluster: ClusterConf) -> None:
        try:
            failure = probe_cluster(cluster)
        except Exception as exc:  # a bug in a probe must not stop the cluster's checks: said, and counted
            log.exception("cluster %s: the probe failed", cluster.name)
            failure = JobFailure.of(RecoveryError(f"internal error: {exc!r}"))
        with self._lock:
            probe = self._state.probes.setdefault(cluster.name, _Probe())
            probe.failure, probe.at, probe.running = failure, time.monotonic(), False
            self._state.ended_work += 1

    def _check(
        self,
        jobs: list[JobConf],
        size: int,
        cluster: ClusterConf,
        failure: JobFailure | None,
        kept: tuple[StampCache, ClusterMemory],
    ) -> None:
        started = time.monotonic()
        try:
            try:
                results = (
                    [JobResult(job, failure=failure) for job in jobs]
                    if failure is not None
                    else check_jobs(
                        jobs,
                        cluster,
                        self.runway_warn_s,
                        kept[0],
                        self.parallel,
                        self._checkpoints,
                        cluster_memory=kept[1],
                    )
                )
            except Exception as exc:  # a bug in a check must not stop the service; said, and counted
                log.exception("jobs %s: the check failed", ", ".join(job.name for job in jobs))
                failed = JobFailure.of(RecoveryError(f"internal error: {exc!r}"))
                results = [JobResult(job, failure=failed) for job in jobs]
            duration = time.monotonic() - started
            for job, result in zip(jobs, results, strict=True):
                hold = None
                try:
                    if self.holds and job.hold_s is not None:
                        hold = self._hold(job, cluster, result)
                except Exception:  # a bug in a hold must not stop the service, nor the job's checks
                    log.exception("job %s: the retention hold failed", job.name)
                finally:
                    self._record(job, result, duration, hold)
        finally:
            with self._lock:
                self._state.batches -= 1
                self._state.in_flight -= size
                self._state.ended_work += 1

    def _record(self, job: JobConf, result: JobResult, duration: float, hold: str | None) -> None:
        """Keep ``job``'s check; it is due again an interval from now."""
        ended = time.monotonic()
        with self._lock:
            state = self._state
            state.running.discard(job.name)
            if hold is not None:
                action = hold.split(":", 1)[0]
                state.holds[(job.name, action)] = state.holds.get((job.name, action), 0) + 1
            if job.name not in self.conf.jobs:  # removed by a reload meanwhile
                return
            due = state.due[job.name] = ended + self.interval_of(self.conf.jobs[job.name])
            if state.wake is not None and due < state.wake[1]:  # sooner than the time kept: look again
                state.wake = None
            state.ended[job.name] = ended
            before = state.checks.get(job.name)
            now_ms = int(time.time() * 1000)
            success = now_ms if result.report is not None else (before.last_success_ms if before else None)
            check = state.checks[job.name] = JobCheck(result, now_ms, duration, success, hold)
            if result.report is not None:
                state.sizes[job.name] = len(result.report.findings)
            if result.failure is not None:
                key = (job.name, result.failure.verdict.value.lower())
                state.errors[key] = state.errors.get(key, 0) + 1
        if self.on_check is not None:
            try:
                self.on_check(job.name, check)
            except Exception:  # a bug in showing a check must not stop the service; said
                log.exception("job %s: showing the check failed", job.name)
