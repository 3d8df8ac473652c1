"""Real Spark reading a Delta table as a streaming source, before and after ``delta-source repair``.

Each test builds a real table with delta-spark, streams it into a Delta sink with a real checkpoint,
breaks the source the way production does (log retention with deltalake, VACUUM, re-creation),
checks that ``validate`` predicts the error condition real Spark then raises, repairs, and checks
that Spark runs again and loses exactly what the plan reported.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from recovery.delta.api import sink_warning
from recovery.local.spark import error_conditions

pytestmark = pytest.mark.integration

# Log cleanup keeps nothing older than the latest checkpoint; Spark must not checkpoint or clean
# up by itself in between (checkpointInterval), so deltalake decides what is deleted.
PROPS = (
    "'delta.logRetentionDuration'='interval 0 seconds', 'delta.deletedFileRetentionDuration'="
    "'interval 0 seconds', 'delta.checkpointInterval'='1000'"
)


def _stream(spark: SparkSession, src: Path, sink: Path, chk: Path) -> None:
    query = (
        spark.readStream.format("delta")
        .load(str(src))
        .writeStream.format("delta")
        .option("checkpointLocation", str(chk))
        .trigger(availableNow=True)
        .start(str(sink))
    )
    query.awaitTermination()


def _conditions(spark: SparkSession, src: Path, sink: Path, chk: Path) -> list[str | None]:
    """Run the query expecting a failure; the error conditions along the cause chain."""
    with pytest.raises(Exception) as failure:
        _stream(spark, src, sink, chk)
    return [condition for _, condition, _ in error_conditions(failure.value)]


def _append(spark: SparkSession, table: Path, start: int, count: int = 5) -> None:
    rows = spark.range(start, start + count).selectExpr("id", "CAST(id AS STRING) AS v")
    rows.write.format("delta").mode("append").save(str(table))


def _ids(spark: SparkSession, table: Path) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(str(table)).select("id").collect())


def _create(spark: SparkSession, table: Path) -> None:
    spark.sql(f"CREATE TABLE delta.`{table}` (id BIGINT, v STRING) USING delta TBLPROPERTIES ({PROPS})")


def _query_id(chk: Path) -> str:
    return str(json.loads((chk / "metadata").read_text())["id"])


def test_log_retention_loss_is_predicted_and_repaired(
    spark: SparkSession, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    src, sink, chk = tmp_path / "src", tmp_path / "sink", tmp_path / "chk"
    _create(spark, src)
    _append(spark, src, 0)  # version 1
    _stream(spark, src, sink, chk)  # batch 0: the snapshot of version 1
    for start in (5, 10, 15):  # versions 2-4
        _append(spark, src, start)
    _stream(spark, src, sink, chk)  # batch 1: versions 2-4; offsets/1 = version 5
    for start in (20, 25, 30):  # versions 5-7, never read
        _append(spark, src, start)
    table = DeltaTable(str(src))
    table.create_checkpoint()
    table.cleanup_metadata()  # the log now starts at version 7

    result = cli(
        "delta-source", "validate", str(chk), "--table", str(src), "--sink", str(sink), "--output", "json"
    )
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    [finding] = report["findings"]
    assert finding | {"detail": ""} == {
        "source_id": "0",
        "table": str(src),
        "verdict": "VERSIONS_GONE",
        "needed_from": 2,  # Spark re-plans batch 1 from offsets/0 on restart
        "resume_from": 5,
        "earliest": 7,
        "latest": 7,
        "versions_lost": 2,
        "lost_unknown": False,
        "files_missing": 0,
        "spark_error": "DELTA_MISSING_FILES_UNEXPECTED_VERSION",
        "detail": "",
        # what is gone has no runway left to judge
        "runway_s": None,
        "runway_reason": None,
        "oldest_unread_age_s": None,
    }
    assert report["sink_warning"] is None

    assert "DELTA_MISSING_FILES_UNEXPECTED_VERSION" in _conditions(spark, src, sink, chk)

    before = (chk / "offsets" / "1").read_bytes()
    dry = cli("delta-source", "repair", str(chk), "--table", str(src))
    assert dry.exit_code == 1, dry.stderr  # changes pending
    assert dry.stdout == (
        "SOURCE  FILE       FROM  TO\n0       offsets/0  2     7\n0       offsets/1  5     7\n"
    )
    assert "% clamp: 2 versions lost (commits gone), 0 versions skipped (0 data files)" in dry.stderr
    assert (chk / "offsets" / "1").read_bytes() == before

    done = cli("delta-source", "repair", str(chk), "--table", str(src), "--execute", "--force")
    assert done.exit_code == 0, done.stderr
    assert "% rewrote offsets/0, offsets/1; originals backed up as " in done.stderr

    _stream(spark, src, sink, chk)
    # Versions 5 and 6 (ids 20-29) are the reported loss; version 7 (ids 30-34) is read.
    assert _ids(spark, sink) == [*range(0, 20), *range(30, 35)]
    assert cli("delta-source", "validate", str(chk), "--table", str(src)).exit_code == 0

    # The checkpoint rolled back one batch (e.g. restored from a copy): the sink already holds
    # batch 2, so DeltaSink skips it and version 8 never reaches the sink.
    rolled = tmp_path / "rolled"
    shutil.copytree(chk, rolled)
    for name in ("offsets/2", "offsets/.2.crc", "commits/2", "commits/.2.crc"):
        (rolled / name).unlink(missing_ok=True)
    warning = sink_warning(str(rolled), str(sink))
    assert warning is not None and (warning.sink_version, warning.next_batch) == (2, 2)
    assert warning.query_id == _query_id(chk)
    warned = cli("delta-source", "validate", str(rolled), "--table", str(src), "--sink", str(sink))
    assert warned.exit_code == 1
    assert "warning: Delta sink" in warned.stderr and "DeltaSink skips batch 2" in warned.stderr
    _append(spark, src, 35)  # version 8
    _stream(spark, src, sink, rolled)
    assert _ids(spark, sink) == [*range(0, 20), *range(30, 35)]  # skipped, as warned


def test_recreated_table_is_refused_unless_adopted(
    spark: SparkSession, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    src, sink, chk = tmp_path / "src", tmp_path / "sink", tmp_path / "chk"
    _create(spark, src)
    _append(spark, src, 0)  # version 1
    _stream(spark, src, sink, chk)  # offsets/0: version 2, nothing of it read
    for start in (5, 10, 15):  # versions 2-4 of the old table, 15 rows never read
        _append(spark, src, start)
    shutil.rmtree(src)
    _create(spark, src)
    _append(spark, src, 100)  # the new table: versions 0 (create) and 1

    result = cli("delta-source", "validate", str(chk), "--table", str(src))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1].split()[:2] == ["0", "TABLE_RECREATED"]
    assert result.stdout.splitlines()[1].split()[-2:] == [
        "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE",
        "-",
    ]
    assert "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE" in _conditions(spark, src, sink, chk)

    refused = cli("delta-source", "repair", str(chk), "--table", str(src), "--execute", "--force")
    assert refused.exit_code == 1
    assert "--adopt-new-table" in refused.stderr and "Nothing was written" in refused.stderr

    args = ("delta-source", "repair", str(chk), "--table", str(src), "--adopt-new-table")
    dry = cli(*args)
    # Never "0 versions lost": the old table's unread versions cannot be counted.
    assert "an unknown number of rows lost, from version 2 of the old table" in dry.stdout + dry.stderr
    adopted = cli(*args, "--execute", "--force", "--output", "json")
    assert adopted.exit_code == 0, adopted.stderr
    [loss] = json.loads(adopted.stdout)["losses"]
    assert (loss["lost_unknown"], loss["lost_from"], loss["reads_snapshot"]) == (True, 2, 0)
    [finding] = json.loads(adopted.stdout)["findings"]
    assert finding["lost_unknown"] is True
    _stream(spark, src, sink, chk)
    # The new table, from version 0; the old table's rows 5-19 never reach the sink (the unknown loss).
    assert _ids(spark, sink) == [*range(0, 5), *range(100, 105)]


def test_vacuumed_files_are_predicted_and_skipped(
    spark: SparkSession, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    src, sink, chk = tmp_path / "src", tmp_path / "sink", tmp_path / "chk"
    _create(spark, src)
    _append(spark, src, 0)  # version 1
    _stream(spark, src, sink, chk)  # offsets/0 = version 2
    _append(spark, src, 5)  # version 2, not read yet
    table = DeltaTable(str(src))
    table.optimize.compact()  # version 3 (dataChange=false) removes the files of versions 1-2 ...
    DeltaTable(str(src)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )  # ... gone

    result = cli("delta-source", "validate", str(chk), "--table", str(src), "--output", "json")
    assert result.exit_code == 1
    [finding] = json.loads(result.stdout)["findings"]
    assert (finding["verdict"], finding["spark_error"]) == ("FILES_GONE", "FAILED_READ_FILE.FILE_NOT_EXIST")
    assert finding["files_missing"] >= 1

    assert "FAILED_READ_FILE.FILE_NOT_EXIST" in _conditions(spark, src, sink, chk)

    plan = cli(
        "delta-source", "repair", str(chk), "--table", str(src), "--output", "json", "--execute", "--force"
    )
    assert plan.exit_code == 0, plan.stderr
    report = json.loads(plan.stdout)
    assert [m["new"]["reservoirVersion"] for m in report["moves"]] == [3]
    assert report["losses"] == [
        {
            "source_id": "0",
            "versions_lost": 0,
            "versions_skipped": 1,
            "files_skipped": finding["files_missing"],
            "reads_snapshot": None,
            "rereads": False,
            "lost_unknown": False,
            "lost_from": None,
        }
    ]
    _stream(spark, src, sink, chk)
    assert _ids(spark, sink) == list(range(0, 5))  # version 2 (ids 5-9) skipped, as reported


def test_first_batch_needs_the_snapshot_before_its_end(
    spark: SparkSession, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """With only offsets/0, Spark's getBatch(None, end) rebuilds the snapshot of version end - 1."""
    src, sink, chk = tmp_path / "src", tmp_path / "sink", tmp_path / "chk"
    _create(spark, src)
    _append(spark, src, 0)  # version 1
    _stream(spark, src, sink, chk)  # offsets/0 = version 2, the only batch
    for start in (5, 10, 15):  # versions 2-4, never read
        _append(spark, src, start)
    table = DeltaTable(str(src))
    table.create_checkpoint()
    table.cleanup_metadata()  # the log now starts at version 4 (its checkpoint)

    result = cli("delta-source", "validate", str(chk), "--table", str(src), "--output", "json")
    [finding] = json.loads(result.stdout)["findings"]
    assert (finding["verdict"], finding["spark_error"]) == (
        "SNAPSHOT_GONE",
        "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE",
    )
    assert "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE" in _conditions(spark, src, sink, chk)

    done = cli(
        "delta-source", "repair", str(chk), "--table", str(src), "--execute", "--force", "--output", "json"
    )
    assert done.exit_code == 0, done.stderr
    report = json.loads(done.stdout)
    # Version 4 itself is skipped too: resuming at 4 would need the snapshot of 3, which is gone.
    assert [m["new"]["reservoirVersion"] for m in report["moves"]] == [5]
    [loss] = report["losses"]
    assert (loss["versions_lost"], loss["versions_skipped"]) == (2, 1) and loss["files_skipped"] >= 1
    _stream(spark, src, sink, chk)
    assert _ids(spark, sink) == list(range(0, 5))
    _append(spark, src, 20)  # version 5: read
    _stream(spark, src, sink, chk)
    assert _ids(spark, sink) == [*range(0, 5), *range(20, 25)]
