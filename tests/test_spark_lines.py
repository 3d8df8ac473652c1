"""Spark lines (recovery.core.spark_lines): what each prints for a predicted failure, beside the
version-neutral condition, through the report layer and the CLI. Real Spark 3.5 printing these
words is checked by the fidelity tests on that line (`make test-matrix`: the rig's restarts are
read with ``condition_of``)."""

from __future__ import annotations

import pytest
from boundary import boundary
from click.testing import CliRunner

from recovery.cli.report.findings import finding_rows, report_body
from recovery.core.model import (
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Finding,
    Isolation,
    OffsetRange,
    SourcePosition,
    TopicPartition,
)
from recovery.core.plan import assess
from recovery.core.results import ValidationReport
from recovery.core.spark_lines import condition_of, says, spark_line
from recovery.core.wording import describe_finding

T = [TopicPartition("orders", p) for p in range(3)]


def judged(
    positions: dict[TopicPartition, int], now: dict[TopicPartition, OffsetRange]
) -> tuple[Finding, ...]:
    view = CheckpointView("/chk", "q", 1, False, (SourcePosition("0", CheckpointFile.offsets(0), positions),))
    return assess(view, ClusterView(now))


def test_each_failure_in_3_5_words_and_4_x_conditions() -> None:
    below_start_changed_added = judged(
        {T[0]: 60, T[1]: 50},
        {T[0]: OffsetRange(80, 100), T[1]: OffsetRange(0, 10), T[2]: OffsetRange(5, 9)},
    )
    (deleted,) = [f for f in judged({T[0]: 5, T[2]: 3}, {T[0]: OffsetRange(0, 10)}) if f.tp == T[2]]
    failing = [f for f in (*below_start_changed_added, deleted) if f.spark_error]
    assert [says(f, "3.5") for f in failing] == [
        "IllegalStateException: Cannot fetch offset 60 (GroupId: …, TopicPartition: orders-0)",
        "IllegalStateException: Partition orders-1's offset was changed from 50 to 10",
        "IllegalStateException: Added partition orders-2 starts from 5 instead of 0",
        "IllegalStateException: Set(orders-2) are gone",
    ]
    for f in failing:
        # 4.x prints the condition itself; the 3.5 words are recognised as the same condition
        assert says(f, "4.0") == says(f, "4.2") == says(f) == f.spark_error
        assert condition_of(str(says(f, "3.5"))) == f.spark_error


def test_spark_3_5_messages_as_the_rig_saw_them_are_recognised() -> None:
    # Messages as Spark 3.5.7 printed them on the rig (docs/spark-versions.md).
    seen = [
        (
            "Cannot fetch offset 60 (GroupId: spark-kafka-source-1a2b-executor, TopicPartition: t-0). "
            "Some data may have been lost because they are not available in Kafka any more",
            "COULD_NOT_READ_OFFSET_RANGE",
        ),
        (
            "Partition t-1's offset was changed from 50 to 10, some data may have been missed.",
            "PARTITION_OFFSET_CHANGED",
        ),
        (
            "Added partition t-2 starts from 5 instead of 0. Some data may have been missed",
            "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
        ),
        ("Set(t-2) are gone. Some data may have been missed..", "PARTITIONS_DELETED"),
    ]
    for message, condition in seen:
        assert condition_of(message) == f"KAFKA_DATA_LOSS.{condition}"
    assert condition_of("[STREAM_FAILED] Query terminated with exception: None.get") is None


def test_the_report_keeps_the_neutral_condition_beside_the_lines_words() -> None:
    findings = judged({T[0]: 60}, {T[0]: OffsetRange(80, 100)})
    report = ValidationReport("/chk", "q", 1, False, Isolation.READ_UNCOMMITTED, findings, spark_line="3.5")
    body = report_body(report)
    (row,) = body["partitions"]  # type: ignore[misc]
    assert body["spark_version"] == "3.5"
    assert row["spark_error"] == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
    assert row["spark_says"].startswith("IllegalStateException: Cannot fetch offset 60")
    (cell,) = finding_rows(findings, table=True, line="3.5")
    assert cell["on_restart"] == row["spark_says"]
    assert "on restart Spark fails with IllegalStateException: Cannot fetch offset 60" in describe_finding(
        findings[0], "3.5"
    )
    (default,) = finding_rows(findings, table=True)
    assert default["on_restart"] == default["spark_says"] == "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"


@pytest.mark.parametrize(
    ("text", "line"), [("3.5.7", "3.5"), ("3.5", "3.5"), ("4.1.0-preview2", "4.1"), (" 4.2.0 ", "4.2")]
)
def test_versions_name_their_line(text: str, line: str) -> None:
    assert spark_line(text) == line


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("3.4.4", "Spark 3.4 is not a line this tool was verified on (3.5, 4.0, 4.1, 4.2)"),
        ("4.3.0", "Spark 4.3 is not a line this tool was verified on"),
        ("four", "'four' is not a Spark version (e.g. 3.5 or 4.2.0)"),
    ],
)
def test_other_versions_are_refused_in_one_line_naming_the_flag(tmp_path, text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        spark_line(text)
    # the CLI refuses before reading anything: the checkpoint does not even exist
    result = CliRunner().invoke(
        boundary, ["validate", str(tmp_path / "none"), "-b", "127.0.0.1:1", "--spark-version", text]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: --spark-version: {problem}"), line


def test_spark_4_2_fails_its_own_restart_check_only_where_its_source_says() -> None:
    from recovery.core.restart import plan_restart
    from recovery.core.spark_lines import CHECK_REPARTITION, restart_check_failure

    rerun = plan_restart([0, 1], [0])  # batch 1 uncommitted, batch 0 committed
    keyed = {"spark.sql.shuffle.partitions": "2"}
    issue = restart_check_failure("4.2", rerun, {0: {}, 1: keyed})
    assert issue is not None and issue.level.value == "error"
    assert (
        "batch 1 is uncommitted and the batch metadata of offsets/0 has no spark.sql.shuffle" in issue.message
    )
    assert f"{CHECK_REPARTITION}=false" in issue.message and "from batch 3 on" in issue.message
    both = restart_check_failure("4.2", rerun, {0: None, 1: None})
    assert both is not None and "the batch metadata of offsets/0 and offsets/1 has no" in both.message
    assert restart_check_failure("4.2", rerun, {0: keyed, 1: keyed}) is None  # both keyed: it passes
    for line in ("3.5", "4.0", "4.1"):  # the check came in 4.2.0 (SPARK-55111)
        assert restart_check_failure(line, rerun, {0: {}, 1: {}}) is None
    committed = plan_restart([0, 1], [0, 1])
    assert restart_check_failure("4.2", committed, {0: {}, 1: {}}) is None
    never_committed = plan_restart([0, 1], [])  # no batch committed: the check does not run
    assert restart_check_failure("4.2", never_committed, {0: {}, 1: {}}) is None
    gaps = plan_restart([0, 3, 4], [0, 3])  # async progress tracking skips the check
    assert restart_check_failure("4.2", gaps, {3: {}, 4: {}}) is None
    # the session turned the check off: the way out the issue names
    assert restart_check_failure("4.2", rerun, {0: {}, 1: {}}, {CHECK_REPARTITION: "false"}) is None
    assert restart_check_failure("4.2", rerun, {0: {}, 1: {}}, {CHECK_REPARTITION: "true"}) is not None
    # no metadata line at all: Spark's require() fails before the .get (batch N is read first)
    bare = restart_check_failure("4.2", rerun, {0: keyed, 1: None})
    assert bare is not None and "fails with 'requirement failed: Batch 1 metadata not found'" in bare.message
