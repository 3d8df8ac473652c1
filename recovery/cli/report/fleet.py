"""Values -> rows and ``%`` lines for ``conf check`` and ``fleet validate`` (pure: no IO).

``fleet validate`` rows (JSON/CSV keys; one row per job, sorted by job name):

* ``job``, ``cluster``, ``checkpoint``: as configured (a relative path resolved against its file);
* ``verdict``: the worst partition's verdict (``OK``, ``BELOW_LOG_START``, ... as ``validate``), or,
  when the job could not be judged by its partitions: ``UNREACHABLE``, ``BAD_CHECKPOINT``,
  ``BAD_SINK``, ``BAD_CONFIG``, ``FAILED``, ``CHECKPOINT_ISSUE``, ``SINK_WOULD_SKIP``;
* ``partitions``: how many partitions were judged (null when the job could not be checked);
* ``records_lost``: records already deleted before the job read them, all partitions (null: unknown);
* ``silently_skipped``: records Spark would skip with ``failOnDataLoss=false`` (null: unknown);
* ``spark_version``: the job's Spark line (its ``spark_version`` key; default 4.2);
* ``spark_error``: the error condition Spark fails with on restart (the worst partition's; Spark 4's
  name on every line); null when it runs or when unknown;
* ``on_restart``: the table's SPARK-ON-RESTART cell: what the job's Spark prints for ``spark_error``
  (the condition from 4.0 on, the exception and its message's start on 3.5), ``runs``, ``runs,
  silently skips N``, ``not predicted (Real-Time Mode)``, or null when unknown;
* ``runway_s``: the shortest retention runway of the job's partitions, in seconds at the time of
  the check (negative: retention may delete unread records now; null: no partition has a time
  limit, or unknown); ``runway``: the table's RUNWAY cell: that time (``5h12m``, ``due``), else
  ``compacted``, ``infinite``, ``-`` (nothing unread) or ``unknown``; null when not checked;
* ``needs_action``, ``exit_code``: the job's own, as ``stream-recovery validate`` would exit for it;
* ``detail``: one line: why the job could not be checked, or what needs action (null when healthy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from recovery.cli.report.findings import runway_cell
from recovery.cli.report.hold import (
    HOLD_COLUMNS,
    RELEASE_COLUMNS,
    hold_notes,
    hold_rows,
    release_notes,
    release_rows,
)
from recovery.core.hold import HoldPlan, ReleasePlan
from recovery.core.model import Finding, JsonObject, Verdict
from recovery.core.restart import Level
from recovery.core.runway import shortest
from recovery.core.wording import spark_outcome
from recovery.errors import ExitCode

if TYPE_CHECKING:  # values only: this module reads their fields and imports neither pydantic nor threads
    from recovery.conf import ClusterConf, FleetConf, JobConf
    from recovery.core.results import ValidationReport
    from recovery.fleet import FleetReport, JobResult
    from recovery.fleet_hold import FleetHold

FLEET_COLUMNS = (
    ("job", "JOB"),
    ("cluster", "CLUSTER"),
    ("verdict", "VERDICT"),
    ("records_lost", "LOST"),
    ("silently_skipped", "SKIPPED"),
    ("on_restart", "SPARK-ON-RESTART"),
    ("runway", "RUNWAY"),
)

CLUSTER_COLUMNS = (
    ("cluster", "CLUSTER"),
    ("bootstrap", "BOOTSTRAP-SERVERS"),
    ("timeout", "TIMEOUT"),
    ("client_properties", "PROPERTIES"),
    ("file", "FILE"),
)

JOB_COLUMNS = (
    ("job", "JOB"),
    ("cluster", "CLUSTER"),
    ("checkpoint", "CHECKPOINT"),
    ("isolation", "ISOLATION"),
    ("spark_version", "SPARK"),
    ("gate", "GATE"),
    ("sink", "SINK"),
    ("runway", "RUNWAY-WARN"),
    ("storage", "STORAGE-OPTIONS"),
    ("file", "FILE"),
)


# -- fleet validate ------------------------------------------------------------------------------


def job_row(result: JobResult) -> JsonObject:
    report = result.report
    worst = result.worst
    return {
        "job": result.name,
        "cluster": result.job.cluster,
        "checkpoint": result.job.checkpoint,
        "verdict": result.verdict,
        "partitions": len(report.findings) if report else None,
        "records_lost": result.records_lost,
        "silently_skipped": result.silently_skipped,
        "spark_version": result.job.spark_line,
        "spark_error": worst.spark_error if worst else None,
        "on_restart": _on_restart(result, worst),
        **job_runway(report),
        "needs_action": result.needs_action,
        "exit_code": int(result.exit_code),
        "detail": job_detail(result),
    }


def job_runway(report: ValidationReport | None) -> JsonObject:
    """``runway_s`` and ``runway`` of a job row (module docstring)."""
    if report is None or report.runway_at_ms is None:
        return {"runway_s": None, "runway": None}
    found = shortest(report.findings, report.runway_at_ms)
    if found is not None:
        finding, left = found
        return {"runway_s": left / 1000, "runway": runway_cell(finding.runway, report.runway_at_ms)}
    cells = {runway_cell(f.runway, report.runway_at_ms) for f in report.findings if f.runway}
    for word in ("unknown", "compacted", "infinite", "-"):
        if word in cells:
            return {"runway_s": None, "runway": word}
    return {"runway_s": None, "runway": None}


def fleet_rows(report: FleetReport) -> list[JsonObject]:
    """``fleet validate``'s rows (keys in the module docstring)."""
    return [job_row(job) for job in report.jobs]


def _on_restart(result: JobResult, worst: Finding | None) -> str | None:
    if result.report is None:
        return None
    if worst is not None and worst.spark_error:
        return spark_outcome(worst, short=True, line=result.job.spark_line)
    skipped = result.silently_skipped or 0
    return f"runs, silently skips {skipped}" if skipped else "runs"


def job_detail(result: JobResult) -> str | None:
    """One line: why the job could not be checked, or what needs action; None when healthy."""
    if result.failure is not None:
        return result.failure.message
    report = result.report
    assert report is not None
    acting = [f for f in report.findings if f.needs_action]
    if acting:
        worst = result.worst
        assert worst is not None
        others = len(acting) - 1
        more = f" (and {others} more partition{'s' if others > 1 else ''})" if others else ""
        return f"{worst.tp}: {worst.detail}{more}" if worst.detail else f"{worst.tp}: {worst.verdict}{more}"
    errors = [i.message for i in report.issues if i.level is Level.ERROR]
    if errors:
        return errors[0]
    if report.sink_warning:
        return report.sink_warning
    if any(f.verdict is Verdict.TRANSIENT for f in report.findings):
        return "offsets of some partitions could not be read now; try again"
    if not report.findings:
        return "the checkpoint has no Kafka source"
    return None


def fleet_notes(report: FleetReport) -> list[str]:
    """The ``%`` lines after the table: one per detail (jobs with the same detail, such as those of
    an unreachable cluster, share one line), then the totals."""
    by_detail: dict[str, list[str]] = {}
    for job in report.jobs:
        detail = job_detail(job)
        if detail:
            by_detail.setdefault(detail, []).append(job.name)
    lines = [f"{_names(names)}: {detail}" for detail, names in by_detail.items()]
    lines.append(summary_line(report))
    return lines


def _names(names: list[str], shown: int = 3) -> str:
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more jobs"


def summary_line(report: FleetReport) -> str:
    """``30 jobs: 26 healthy, 3 need action, 1 not checked (unreachable)`` (counts that are not 0)."""
    parts = [
        (report.count(ExitCode.OK), "healthy"),
        (need := report.count(ExitCode.ACTION_NEEDED), "needs action" if need == 1 else "need action"),
        (report.count(ExitCode.INVALID_INPUT), "with invalid input"),
        (report.count(ExitCode.UNREACHABLE), "not checked (unreachable)"),
    ]
    noun = "job" if len(report.jobs) == 1 else "jobs"
    return f"{len(report.jobs)} {noun}: " + ", ".join(f"{n} {what}" for n, what in parts if n)


# -- conf check ------------------------------------------------------------------------------------


def format_duration(seconds: float | None) -> str | None:
    """``21600.0`` -> ``6h``; ``5400`` -> ``1h30m``; ``0.5`` -> ``500ms``."""
    if seconds is None:
        return None
    ms = round(seconds * 1000)
    out = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out) or "0s"


def _pairs(values: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(values.items()))


def cluster_row(cluster: ClusterConf, *, table: bool = False) -> JsonObject:
    """JSON keys: cluster, bootstrap_servers, bootstrap_servers_env (null: from the file), timeout_s,
    properties (``$NAME`` for values from the environment, ``[redacted]`` for secrets), file."""
    row: JsonObject = {
        "cluster": cluster.name,
        "bootstrap_servers": cluster.bootstrap_servers,
        "bootstrap_servers_env": cluster.bootstrap_env,
        "timeout_s": cluster.kafka.timeout_s,
        "properties": dict(cluster.shown),
        "file": cluster.file,
    }
    if table:
        env = f" (${cluster.bootstrap_env})" if cluster.bootstrap_env else ""
        row |= {
            "bootstrap": cluster.bootstrap_servers + env,
            "timeout": format_duration(cluster.kafka.timeout_s),
            "client_properties": _pairs(cluster.shown),
        }
    return row


def conf_job_row(job: JobConf, *, table: bool = False) -> JsonObject:
    """JSON keys: job, cluster, checkpoint, isolation, spark_version, gate, sink, runway_warn_s, hold_s,
    delta_tables, storage_options (``$NAME`` for values from the environment), file."""
    row: JsonObject = {
        "job": job.name,
        "cluster": job.cluster,
        "checkpoint": job.checkpoint,
        "isolation": job.isolation.value,
        "spark_version": job.spark_line,
        "gate": job.gate.value,
        "sink": job.sink,
        "runway_warn_s": job.runway_warn_s,
        "hold_s": job.hold_s,
        "delta_tables": dict(job.delta_tables),
        "storage_options": dict(job.storage_shown),
        "file": job.file,
    }
    if table:
        row |= {"runway": format_duration(job.runway_warn_s), "storage": _pairs(job.storage_shown)}
    return row


def conf_body(conf: FleetConf) -> JsonObject:
    """``conf check --output json``: ``{"source", "files", "clusters": [...], "jobs": [...]}``."""
    return {
        "source": conf.source,
        "files": list(conf.files),
        "clusters": [cluster_row(c) for _, c in sorted(conf.clusters.items())],
        "jobs": [conf_job_row(j) for _, j in sorted(conf.jobs.items())],
    }


def conf_summary(conf: FleetConf) -> str:
    """``2 clusters and 5 jobs in 2 files (conf/examples)``."""
    return (
        f"{len(conf.clusters)} clusters and {len(conf.jobs)} jobs in {len(conf.files)} "
        f"file{'s' if len(conf.files) != 1 else ''} ({conf.source})"
    )


# -- fleet hold | release --------------------------------------------------------------------------

FLEET_HOLD_COLUMNS = (("job", "JOB"), *HOLD_COLUMNS)
FLEET_RELEASE_COLUMNS = (("job", "JOB"), *RELEASE_COLUMNS)


def fleet_hold_rows(result: FleetHold, fmt: str) -> list[JsonObject]:
    """One row per job and topic (a job without a plan: one row saying why)."""
    rows: list[JsonObject] = []
    for held in result.jobs:
        if isinstance(held.plan, HoldPlan):
            rows += [{"job": held.job.name, **row} for row in hold_rows(held.plan, fmt)]
        elif isinstance(held.plan, ReleasePlan):
            rows += [{"job": held.job.name, **row} for row in release_rows(held.plan)]
        else:
            action = held.failure.verdict.value if held.failure else "SKIPPED"
            reason = held.failure.message if held.failure else held.skipped
            rows.append({"job": held.job.name, "topic": None, "action": action, "reason": reason})
    return rows


def fleet_hold_notes(result: FleetHold) -> list[str]:
    """Each job's own lines, prefixed with its name, then the count of jobs by exit code."""
    lines = []
    for held in result.jobs:
        if isinstance(held.plan, HoldPlan):
            lines += [f"{held.job.name}: {line}" for line in hold_notes(held.plan)]
        elif isinstance(held.plan, ReleasePlan) and held.plan.topics:
            lines += [f"{held.job.name}: {line}" for line in release_notes(held.plan)]
    skipped = sum(1 for h in result.jobs if h.skipped)
    if skipped:
        lines.append(f'{skipped} job(s) without a hold key: not held (opt in with hold = "2d")')
    return lines
