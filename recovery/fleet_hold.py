"""``fleet hold`` and ``fleet release``: retention holds for every job of a conf that opted in.

    report = hold_fleet(load_conf("conf/"), execute=True)     # jobs with ``hold = "2d"``
    report = release_fleet(load_conf("conf/"), execute=True)  # every job with a hold recorded

A job is held only with its ``hold`` key (the opt-in; its value is ``keep``). Jobs run one after
the other, not at once: two jobs reading one topic must not raise it at the same time (each would
record the other's value, or the lower one win). A release runs for every job chosen (it changes
something only where the job's checkpoint records a hold). A job that fails is reported with why,
as ``fleet validate`` does; the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from recovery.conf import FleetConf, JobConf, load_conf
from recovery.core.hold import HoldPlan, ReleasePlan
from recovery.errors import ExitCode, RecoveryError
from recovery.fleet import URGENCY, JobFailure, choose_jobs
from recovery.hold import hold_retention, release_retention
from recovery.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["FleetHold", "JobHold", "hold_fleet", "release_fleet"]


@dataclass(frozen=True)
class JobHold:
    """One job's hold (or release) plan, or why there is none (``failure``; ``skipped``: the job
    did not opt in)."""

    job: JobConf
    plan: HoldPlan | ReleasePlan | None = None
    failure: JobFailure | None = None
    skipped: str | None = None

    @property
    def exit_code(self) -> ExitCode:
        if self.failure is not None:
            return self.failure.exit_code
        return self.plan.exit_code if self.plan is not None else ExitCode.OK


@dataclass(frozen=True)
class FleetHold:
    """Every chosen job's hold or release, sorted by job name."""

    source: str
    jobs: tuple[JobHold, ...]
    executed: bool

    @property
    def exit_code(self) -> ExitCode:
        """The most urgent of the jobs' codes, as ``fleet validate`` combines them."""
        codes = {job.exit_code for job in self.jobs}
        return next((code for code in URGENCY if code in codes), ExitCode.OK)


def hold_fleet(
    conf: FleetConf | str | Path, *, execute: bool = False, jobs: Iterable[str] | None = None
) -> FleetHold:
    """:func:`recovery.hold.hold_retention` for each chosen job with a ``hold`` key, keeping its
    unread records that long (dry run unless ``execute``); the others are skipped and said.

    Example: ``hold_fleet("conf/", execute=True).exit_code``
    """

    def hold(job: JobConf, kafka: KafkaConfig) -> HoldPlan | str:
        if job.hold_s is None:
            return "no hold key: not opted in"
        return hold_retention(
            job.checkpoint,
            kafka,
            keep_s=job.hold_s,
            execute=execute,
            isolation=job.isolation,
            storage_options=dict(job.storage_options),
            why=f"fleet hold of job {job.name}",
        )

    return _each_job(conf, jobs, execute, hold)


def release_fleet(
    conf: FleetConf | str | Path,
    *,
    execute: bool = False,
    now: bool = False,
    jobs: Iterable[str] | None = None,
) -> FleetHold:
    """:func:`recovery.hold.release_retention` for each chosen job (dry run unless ``execute``).

    Example: ``release_fleet("conf/", execute=True).exit_code``
    """

    def release(job: JobConf, kafka: KafkaConfig) -> ReleasePlan:
        return release_retention(
            job.checkpoint,
            kafka,
            execute=execute,
            now=now,
            isolation=job.isolation,
            storage_options=dict(job.storage_options),
        )

    return _each_job(conf, jobs, execute, release)


def _each_job(
    conf: FleetConf | str | Path,
    jobs: Iterable[str] | None,
    execute: bool,
    run: Callable[[JobConf, KafkaConfig], HoldPlan | ReleasePlan | str],
) -> FleetHold:
    """``run`` for each chosen job, by name, one after the other: its plan, why it was skipped (a
    string), or why it failed (the others go on)."""
    fleet = conf if isinstance(conf, FleetConf) else load_conf(conf)
    out = []
    for job in sorted(choose_jobs(fleet, jobs), key=lambda j: j.name):
        try:
            done = run(job, fleet.cluster_of(job).kafka)
        except RecoveryError as exc:
            log.info("job %s: %s", job.name, exc)
            out.append(JobHold(job, failure=JobFailure.of(exc)))
            continue
        out.append(JobHold(job, skipped=done) if isinstance(done, str) else JobHold(job, plan=done))
    return FleetHold(fleet.source, tuple(out), execute)
