"""Real-Time Mode (recovery.core.real_time): the restart a caller declares, judged as Spark 4.1/4.2's
source runs it. What real Spark does is checked by tests/integration/test_spark_real_time.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from boundary import boundary
from click.testing import CliRunner

from recovery.cli.report.findings import context_line, finding_rows, report_body
from recovery.cli.report.fleet import job_row
from recovery.conf import load_conf
from recovery.core.model import (
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Finding,
    Isolation,
    OffsetRange,
    SourcePosition,
    TopicPartition,
    Verdict,
)
from recovery.core.plan import assess
from recovery.core.real_time import NOT_PREDICTED, OUT_OF_RANGE, real_time_findings, real_time_view
from recovery.core.results import ValidationReport
from recovery.core.wording import describe_finding
from recovery.errors import ConfigError
from recovery.fleet import JobResult

T = [TopicPartition("orders", p) for p in range(3)]


def judged(view: CheckpointView, now: dict[TopicPartition, OffsetRange]) -> dict[TopicPartition, Finding]:
    return {f.tp: f for f in real_time_findings(assess(real_time_view(view), ClusterView(now)))}


def committed(positions: dict[TopicPartition, int]) -> CheckpointView:
    return CheckpointView("/chk", "q", 2, False, (SourcePosition("0", CheckpointFile.offsets(1), positions),))


def test_a_deleted_offset_fails_with_the_consumers_exception_whatever_failondataloss() -> None:
    found = judged(committed({T[0]: 60, T[1]: 5}), {T[0]: OffsetRange(80, 100), T[1]: OffsetRange(0, 10)})
    below, fine = found[T[0]], found[T[1]]
    assert (below.verdict, below.spark_error, below.records_lost) == (
        Verdict.BELOW_LOG_START,
        OUT_OF_RANGE,
        20,
    )
    assert below.silently_skipped == 0  # failOnDataLoss=false fails too
    assert any("failOnDataLoss=false too" in n for n in below.notes)
    assert "on restart Spark fails with OffsetOutOfRangeException" in describe_finding(below)
    assert (fine.verdict, fine.spark_error) == (Verdict.OK, None)
    assert not any("Real-Time Mode" in n for n in fine.notes)


def test_what_the_rig_did_not_run_is_not_predicted_but_needs_action() -> None:
    zero, past, gone = TopicPartition("zero", 0), TopicPartition("past", 0), TopicPartition("gone", 1)
    found = judged(
        committed({zero: 0, past: 50, gone: 3}),
        {zero: OffsetRange(5, 9), past: OffsetRange(0, 10), TopicPartition("gone", 0): OffsetRange(0, 9)},
    )
    for tp, source in (
        (zero, "offset 0 is asked again and again"),
        (past, "an offset past the log end"),
        (gone, "a deleted partition fails"),
    ):
        f = found[tp]
        assert (f.spark_error, f.silently_skipped) == (NOT_PREDICTED, 0), f
        assert f.needs_repair  # a repair is what it needs, whatever Spark would do
        notes = [n for n in f.notes if n.startswith("Real-Time Mode: what Spark does here is not predicted")]
        assert len(notes) == 1 and source in notes[0], f.notes
    assert found[TopicPartition("gone", 0)].spark_error is None  # healthy, untouched
    (cell,) = finding_rows([found[past]], table=True)
    assert cell["on_restart"] == "not predicted (Real-Time Mode)"


def test_an_uncommitted_batch_runs_anew_from_its_start_not_over_its_stored_range() -> None:
    # offsets/2 stored an end past the log end: a micro-batch re-run fails on it; Real-Time Mode
    # deletes offsets/2 on restart and runs batch 2 from offsets/1 up to what Kafka holds.
    rerun = CheckpointView(
        "/chk",
        "q",
        2,
        True,
        (SourcePosition("0", CheckpointFile.offsets(1), {T[0]: 5}, CheckpointFile.offsets(2), {T[0]: 40}),),
    )
    now = {T[0]: OffsetRange(0, 10)}
    assert assess(rerun, ClusterView(now))[0].verdict is Verdict.BEYOND_LOG_END
    view = real_time_view(rerun)
    assert not view.rerun and view.sources[0].end is None and view.sources[0].start == {T[0]: 5}
    assert judged(rerun, now)[T[0]].verdict is Verdict.OK


def test_the_report_and_fleet_row_say_the_mode(tmp_path: Path) -> None:
    found = tuple(judged(committed({T[1]: 50}), {T[1]: OffsetRange(0, 10)}).values())
    report = ValidationReport("/chk", "q", 2, False, Isolation.READ_UNCOMMITTED, found, real_time=True)
    conf_file = tmp_path / "a.toml"
    conf_file.write_text(
        '[cluster.main]\nbootstrap_servers = "localhost:9092"\n'
        '[job.rtm]\ncluster = "main"\ncheckpoint = "/chk"\nreal_time = true\nspark_version = "4.1"\n'
    )
    job = load_conf(conf_file, environ={}).jobs["rtm"]
    assert job.real_time
    assert report_body(report)["real_time"] is True
    assert context_line(report).endswith("Spark starts batch 2 next in Real-Time Mode")
    row = job_row(JobResult(job, report=report))
    assert (row["verdict"], row["on_restart"], row["exit_code"]) == (
        "BEYOND_LOG_END",
        "not predicted (Real-Time Mode)",
        1,
    )


def test_a_spark_without_real_time_mode_is_refused_in_conf_and_on_the_command_line(tmp_path: Path) -> None:
    conf_file = tmp_path / "a.toml"
    conf_file.write_text(
        '[cluster.main]\nbootstrap_servers = "localhost:9092"\n'
        '[job.rtm]\ncluster = "main"\ncheckpoint = "/chk"\nreal_time = true\nspark_version = "3.5.7"\n'
    )
    with pytest.raises(
        ConfigError,
        match=r"a\.toml: job\.rtm\.real_time: Real-Time Mode needs Spark 4\.1 or 4\.2, not 3\.5 \(its spark_",
    ):
        load_conf(conf_file, environ={})

    result = CliRunner().invoke(
        boundary,
        ["validate", str(tmp_path / "chk"), "-b", "localhost:1", "--real-time", "--spark-version", "4.0"],
    )
    assert result.exit_code == 2
    assert "Real-Time Mode needs Spark 4.1 or 4.2, not 4.0 (the query's Spark)" in result.output
    assert "--real-time" in result.output
    assert "Traceback" not in result.output
