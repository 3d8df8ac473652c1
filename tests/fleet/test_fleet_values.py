"""A fleet's verdicts, rows and exit code from values (no broker): the worst partition decides a
job's verdict, and the most urgent job decides the exit code (1 > 2 > 3 > 0)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recovery.cli.report.fleet import fleet_notes, fleet_rows, format_duration, summary_line
from recovery.conf import JobConf
from recovery.core.model import (
    COULD_NOT_READ,
    OFFSET_CHANGED,
    Finding,
    Isolation,
    OffsetRange,
    TopicPartition,
    Verdict,
)
from recovery.core.restart import Issue, Level
from recovery.core.results import ValidationReport
from recovery.errors import (
    CheckpointFormatError,
    ConfigError,
    DeltaTableNotFound,
    ExitCode,
    KafkaUnavailable,
    RecoveryError,
    StorageError,
)
from recovery.fleet import FleetReport, JobFailure, JobResult, JobVerdict


def finding(
    partition: int, verdict: Verdict = Verdict.OK, lost: int = 0, error: str | None = None
) -> Finding:
    return Finding(
        "0",
        TopicPartition("orders", partition),
        verdict,
        100,
        None,
        OffsetRange(100 + lost, 200),
        records_lost=lost,
        spark_error=error,
        silently_skipped=lost,
        detail=f"records [100, {100 + lost}) were deleted before the job read them" if lost else "",
    )


def checked(
    name: str, *findings: Finding, issues: tuple[Issue, ...] = (), sink: str | None = None
) -> JobResult:
    job = JobConf(name, "jobs.toml", "local", f"/chk/{name}")
    report = ValidationReport(
        f"/chk/{name}", "q", 3, False, Isolation.READ_UNCOMMITTED, findings, issues, {}, sink
    )
    return JobResult(job, report=report)


def failed(name: str, error: RecoveryError) -> JobResult:
    return JobResult(JobConf(name, "jobs.toml", "local", f"/chk/{name}"), failure=JobFailure.of(error))


HEALTHY = checked("healthy", finding(0), finding(1))
LOSS = checked(
    "loss",
    finding(0),
    finding(1, Verdict.BELOW_LOG_START, 15, COULD_NOT_READ),
    finding(2, Verdict.BELOW_LOG_START, 5, COULD_NOT_READ),
)
UNREACHABLE = failed("unreachable", KafkaUnavailable("listing topics: no answer from the Kafka cluster"))
BAD = failed("bad", CheckpointFormatError("/chk/bad/metadata: the file is not JSON"))


def test_the_worst_partition_decides_the_verdict() -> None:
    recreated = checked(
        "recreated",
        finding(0, Verdict.BELOW_LOG_START, 3, COULD_NOT_READ),
        finding(1, Verdict.BEYOND_LOG_END, 0, OFFSET_CHANGED),
        finding(2, Verdict.TOPIC_GONE, 0, None),  # does not need action: ranks below those that do
    )
    assert recreated.verdict == "BELOW_LOG_START"
    assert (LOSS.verdict, LOSS.records_lost, LOSS.silently_skipped, LOSS.exit_code) == (
        "BELOW_LOG_START",
        20,
        20,
        ExitCode.ACTION_NEEDED,
    )
    assert (HEALTHY.verdict, HEALTHY.exit_code) == ("OK", ExitCode.OK)


@pytest.mark.parametrize(
    ("error", "verdict", "code"),
    [
        (KafkaUnavailable("x"), JobVerdict.UNREACHABLE, ExitCode.UNREACHABLE),
        (StorageError("x"), JobVerdict.UNREACHABLE, ExitCode.UNREACHABLE),
        (CheckpointFormatError("x"), JobVerdict.BAD_CHECKPOINT, ExitCode.INVALID_INPUT),
        (DeltaTableNotFound("x"), JobVerdict.BAD_SINK, ExitCode.INVALID_INPUT),
        (ConfigError("x"), JobVerdict.BAD_CONFIG, ExitCode.INVALID_INPUT),
    ],
)
def test_a_job_that_cannot_be_checked_says_why(
    error: RecoveryError, verdict: JobVerdict, code: ExitCode
) -> None:
    result = failed("j", error)
    assert (result.verdict, result.exit_code, result.records_lost) == (verdict.value, code, None)


def test_checkpoint_issues_and_sink_warnings_need_action_with_healthy_partitions() -> None:
    issue = checked("issue", finding(0), issues=(Issue(Level.ERROR, "offsets/3 is missing"),))
    sink = checked("sink", finding(0), sink="Delta sink /lake/orders would skip batch 3")
    assert (issue.verdict, issue.exit_code) == ("CHECKPOINT_ISSUE", ExitCode.ACTION_NEEDED)
    assert (sink.verdict, sink.exit_code) == ("SINK_WOULD_SKIP", ExitCode.ACTION_NEEDED)


@pytest.mark.parametrize(
    ("jobs", "code"),
    [
        ((HEALTHY,), ExitCode.OK),
        ((HEALTHY, UNREACHABLE), ExitCode.UNREACHABLE),
        ((HEALTHY, UNREACHABLE, BAD), ExitCode.INVALID_INPUT),
        ((HEALTHY, UNREACHABLE, BAD, LOSS), ExitCode.ACTION_NEEDED),
        ((LOSS, UNREACHABLE), ExitCode.ACTION_NEEDED),
        ((BAD, HEALTHY), ExitCode.INVALID_INPUT),
    ],
    ids=[
        "healthy",
        "unreachable",
        "bad-beats-unreachable",
        "action-beats-all",
        "action-beats-unreachable",
        "bad",
    ],
)
def test_the_most_urgent_job_decides_the_exit_code(jobs: tuple[JobResult, ...], code: ExitCode) -> None:
    assert FleetReport("conf", jobs).exit_code is code


def test_rows_and_notes() -> None:
    report = FleetReport("conf", (BAD, HEALTHY, LOSS, UNREACHABLE))
    rows = fleet_rows(report)
    assert rows[0] == {
        "job": "bad",
        "cluster": "local",
        "checkpoint": "/chk/bad",
        "verdict": "BAD_CHECKPOINT",
        "partitions": None,
        "records_lost": None,
        "silently_skipped": None,
        "spark_version": "4.2",
        "spark_error": None,
        "on_restart": None,
        "runway_s": None,
        "runway": None,
        "needs_action": False,
        "exit_code": 2,
        "detail": "/chk/bad/metadata: the file is not JSON",
    }
    assert rows[2] == {
        "job": "loss",
        "cluster": "local",
        "checkpoint": "/chk/loss",
        "verdict": "BELOW_LOG_START",
        "partitions": 3,
        "records_lost": 20,
        "silently_skipped": 20,
        "spark_version": "4.2",
        "spark_error": COULD_NOT_READ,
        "on_restart": COULD_NOT_READ,
        "runway_s": None,
        "runway": None,
        "needs_action": True,
        "exit_code": 1,
        "detail": "orders [1]: records [100, 115) were deleted before the job read them "
        "(and 1 more partition)",
    }
    assert [r["on_restart"] for r in rows] == [None, "runs", COULD_NOT_READ, None]
    assert fleet_notes(report) == [
        "bad: /chk/bad/metadata: the file is not JSON",
        "loss: orders [1]: records [100, 115) were deleted before the job read them (and 1 more partition)",
        "unreachable: listing topics: no answer from the Kafka cluster",
        "4 jobs: 1 healthy, 1 needs action, 1 with invalid input, 1 not checked (unreachable)",
    ]
    assert summary_line(FleetReport("conf", (HEALTHY,))) == "1 job: 1 healthy"


def test_a_multi_line_error_becomes_one_line() -> None:
    assert failed("j", StorageError("s3://b/chk: boom\n  caused by: timeout")).failure == JobFailure(
        JobVerdict.UNREACHABLE, "s3://b/chk: boom caused by: timeout", ExitCode.UNREACHABLE
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(21600.0, "6h"), (5400, "1h30m"), (0.5, "500ms"), (30.0, "30s")]
)
def test_durations_are_shown_as_written(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_jobs_with_the_same_detail_share_a_note() -> None:
    error = KafkaUnavailable("cluster dr: listing topics: no answer")
    jobs = tuple(failed(f"dr-{i}", error) for i in range(6))
    assert fleet_notes(FleetReport("conf", jobs[:4])) == [
        "dr-0, dr-1, dr-2, dr-3: cluster dr: listing topics: no answer",
        "4 jobs: 4 not checked (unreachable)",
    ]
    assert fleet_notes(FleetReport("conf", jobs))[0] == (
        "dr-0, dr-1, dr-2 and 3 more jobs: cluster dr: listing topics: no answer"
    )


def test_a_job_on_spark_3_5_is_told_in_its_spark_s_words() -> None:
    job = replace(LOSS.job, spark_line="3.5")
    row = fleet_rows(FleetReport("conf", (JobResult(job, report=LOSS.report),)))[0]
    assert (row["spark_version"], row["spark_error"]) == ("3.5", COULD_NOT_READ)  # the neutral name kept
    assert (
        row["on_restart"]
        == "IllegalStateException: Cannot fetch offset 100 (GroupId: …, TopicPartition: orders-1)"
    )
