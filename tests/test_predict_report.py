"""How the predictions read (issue 14): upper bounds, notes, starting-offsets loss, lag, and a
checkpoint without a Kafka source. Values in, rows and lines out; checkpoints on disk, no Kafka."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.api import _with_loss
from recovery.checkpoint import open_checkpoint
from recovery.cli.flags import in_cli_words
from recovery.cli.report.findings import finding_rows, repair_notes, report_notes
from recovery.core.model import (
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Isolation,
    OffsetRange,
    SourcePosition,
    StartingOffset,
    TopicPartition,
    Verdict,
)
from recovery.core.plan import assess, complete_starting_offsets, decide_repair, resume_positions
from recovery.core.results import PartitionLag, RepairResult, ValidationReport
from recovery.errors import InvalidInput
from recovery.resume import checkpoint_view, refuse_without_kafka_source

T0 = TopicPartition("t", 0)


def view(position: int) -> CheckpointView:
    return CheckpointView(
        "/chk", "q", 1, False, (SourcePosition("0", CheckpointFile.offsets(0), {T0: position}),)
    )


def test_read_committed_loss_reads_at_most_in_tables_and_flags_json() -> None:
    now = ClusterView({T0: OffsetRange(127, 200)}, isolation=Isolation.READ_COMMITTED)
    findings = assess(view(100), now)
    (json_row,) = finding_rows(findings)
    (table_row,) = finding_rows(findings, table=True)
    assert (json_row["records_lost"], json_row["records_lost_upper_bound"]) == (27, True)
    assert table_row["records_lost"] == "at most 27"
    notes = repair_notes(RepairResult(decide_repair(view(100), now), executed=False))
    assert "at most 27 records lost" in notes[-2]


def test_healthy_without_recorded_ids_says_it_cannot_tell() -> None:
    findings = assess(view(100), ClusterView({T0: OffsetRange(0, 150)}))
    report = ValidationReport("/chk", "q", 1, False, Isolation.READ_UNCOMMITTED, findings)
    lines = report_notes(report)
    assert "topic ids never recorded for t" in lines[0]
    assert lines[-1] == "healthy as far as can be told (see the notes above)"
    assert report.exit_code == 0


def test_starting_offsets_from_a_checkpoint_show_the_loss_of_moving_to_the_log_start() -> None:
    now = ClusterView({T0: OffsetRange(110, 130)})
    plan = decide_repair(view(100), now)
    positions = {tp: o for (_, tp), o in resume_positions(plan).items()}
    (row,) = _with_loss(complete_starting_offsets(positions, now, {"t"}, "checkpoint"), plan)
    assert (row.offset, row.lost, row.skipped) == (110, 10, 0)
    assert "checkpoint position 100: 10 records lost" in row.note
    untouched = StartingOffset(T0, 120, "checkpoint")
    assert _with_loss((untouched,), decide_repair(view(120), now)) == (untouched,)


def test_lag_is_from_the_position_as_it_is_with_the_loss_beside_it() -> None:
    lag = PartitionLag("0", T0, 100, 110, 120, Verdict.BELOW_LOG_START, records_lost=10)
    assert (lag.lag, lag.records_lost) == (20, 10)
    assert PartitionLag("0", T0, 130, 0, 120, Verdict.BEYOND_LOG_END).lag == 0


def test_a_checkpoint_whose_only_source_is_delta_is_refused_naming_delta_source_validate(
    tmp_path: Path,
) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "metadata").write_text('{"id":"8e2c1f3a-0000-4000-8000-000000000001"}')
    delta = (
        '{"sourceVersion":1,"reservoirId":"4f2c6e9e-0000-4000-8000-000000000002",'
        '"reservoirVersion":3,"index":-1,"isStartingVersion":false}'
    )
    (tmp_path / "offsets/0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + delta)
    chk = open_checkpoint(str(tmp_path))
    view_, _ = checkpoint_view(chk)
    with pytest.raises(InvalidInput, match="plan_delta_source") as caught:
        refuse_without_kafka_source(chk, view_)
    assert caught.value.exit_code == 2
    said = f"`stream-recovery delta-source validate {tmp_path} --table TABLE`"
    assert said in in_cli_words(str(caught.value))


def test_a_runway_kafka_would_not_give_is_said_with_the_acl_it_needs() -> None:
    from dataclasses import replace

    from recovery.core.model import Runway

    t1 = TopicPartition("t", 1)
    two = CheckpointView(
        "/chk", "q", 1, False, (SourcePosition("0", CheckpointFile.offsets(0), {T0: 5, t1: 5}),)
    )
    findings = assess(
        two, ClusterView({T0: OffsetRange(0, 10), t1: OffsetRange(0, 10)}, topic_ids={"t": "x"})
    )
    refused = "DescribeConfigs TOPIC_AUTHORIZATION_FAILED, needs DescribeConfigs on topic t"
    unread = "record at 5 not read: fetch answered TOPIC_AUTHORIZATION_FAILED, needs Read on topic t"
    runways = [Runway(None, None, f"retention settings not read: {refused}"), Runway(None, None, unread)]
    report = ValidationReport(
        "/chk", "q", 1, False, Isolation.READ_UNCOMMITTED,
        tuple(replace(f, runway=r) for f, r in zip(findings, runways, strict=True)),
    )  # fmt: skip
    lines = report_notes(replace(report, runway_at_ms=0))
    assert f"runway unknown for t [0]: retention settings not read: {refused}" in lines
    assert (
        "runway unknown for t [1]: the first unread record not read: fetch answered "
        "TOPIC_AUTHORIZATION_FAILED, needs Read on topic t" in lines
    )
    nothing = Runway(None, None, "nothing unread")  # no limit, and nothing Kafka withheld: no line
    calm = replace(report, findings=tuple(replace(f, runway=nothing) for f in findings), runway_at_ms=0)
    assert not any("runway unknown" in line for line in report_notes(calm))


def test_past_the_end_of_the_same_topic_is_a_truncation_not_a_recreation() -> None:
    """An unclean leader election keeps the topic id and cuts the log back under the position."""
    from dataclasses import replace

    truncated = ClusterView({T0: OffsetRange(0, 10)}, topic_ids={"t": "same-id"})
    (same,) = assess(replace(view(20), recorded_topic_ids={"t": "same-id"}), truncated)
    assert same.verdict is Verdict.BEYOND_LOG_END
    assert "log was truncated under it, as an unclean leader election does" in same.detail
    (unknown,) = assess(view(20), truncated)  # no id recorded: it may as well be a recreation
    assert "topic recreated or log truncated" in unknown.detail
