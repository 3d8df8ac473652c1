"""The runway of a Delta source on real Delta tables (delta-rs): log cleanup and VACUUM remove what
a stopped stream needs no earlier than the runway says, and do when it has passed; the verdicts,
AT_RISK and the CLI's column follow.

Log cleanup goes by the commit files' times. Rather than wait a day, the tests set those times back
(``os.utime``) and let delta-rs' own cleanup judge them, as it would files that old."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from recovery.cli import cli
from recovery.delta.api import plan_delta_source
from recovery.delta.model import DeltaVerdict
from recovery.delta.runway import parse_interval_ms

HOUR_S = 3600
META = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}})


def delta_checkpoint(path: Path, table_id: str, version: int) -> str:
    """A stopped stream's checkpoint whose one committed batch read the table up to ``version``
    (nothing of it yet): the restart lists the commits from ``version`` on."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text('{"id":"5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e03"}')
    delta = {
        "sourceVersion": 1,
        "reservoirId": table_id,
        "reservoirVersion": version,
        "index": -1,
        "isStartingVersion": False,
    }
    (path / "offsets" / "0").write_text(f"v1\n{META}\n{json.dumps(delta, separators=(',', ':'))}")
    (path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    return str(path)


def commit_file(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def age(table: Path, versions: range, seconds: float) -> None:
    """Set the commit files of ``versions`` to have been written ``seconds`` ago."""
    stamp = time.time() - seconds
    for v in versions:
        os.utime(commit_file(table, v), (stamp, stamp))


def test_log_cleanup_removes_a_needed_version_only_once_its_runway_has_passed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for i in range(6):
        write_deltalake(
            str(table),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.logRetentionDuration": "interval 1 days"},
        )
    dt = DeltaTable(str(table))
    chk = delta_checkpoint(tmp_path / "chk", str(dt.metadata().id), 2)
    age(table, range(6), 23 * HOUR_S)  # version 2 is 23 h old: a day's retention leaves it an hour

    result = plan_delta_source(chk, str(table), runway_warn_s=2 * HOUR_S)
    (finding,) = result.plan.findings
    assert finding.verdict is DeltaVerdict.AT_RISK and result.exit_code == 1
    assert finding.runway is not None and finding.runway.earliest_delete_ms is not None
    left_s = finding.runway.left_ms(int(time.time() * 1000)) / 1000  # type: ignore[operator]
    assert 0.9 * HOUR_S < left_s <= HOUR_S
    # a first batch re-plans from the snapshot before it: version 1's, rebuilt from version 0
    reason = "log cleanup may delete version 0 (to rebuild the snapshot of version 1)"
    assert reason in finding.runway.reason
    assert "start the query" in finding.detail
    relaxed = plan_delta_source(chk, str(table), runway_warn_s=HOUR_S / 2)
    assert relaxed.plan.findings[0].verdict is DeltaVerdict.OK and relaxed.exit_code == 0

    dt.create_checkpoint()
    dt.cleanup_metadata()  # not yet: the runway has not passed
    assert all(commit_file(table, v).exists() for v in range(6))

    # The runway has passed (for the checkpoint's commit too: delta-rs also waits for that).
    age(table, range(6), 25 * HOUR_S)
    due = plan_delta_source(chk, str(table), runway_warn_s=HOUR_S)
    assert due.plan.findings[0].verdict is DeltaVerdict.AT_RISK
    assert due.plan.findings[0].runway.left_ms(int(time.time() * 1000)) < 0  # type: ignore[union-attr,operator]
    DeltaTable(str(table)).cleanup_metadata()
    assert not commit_file(table, 0).exists() and not commit_file(table, 2).exists()
    gone = plan_delta_source(chk, str(table), runway_warn_s=HOUR_S)
    assert gone.plan.findings[0].verdict is DeltaVerdict.SNAPSHOT_GONE
    assert gone.plan.findings[0].spark_error == "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE"


def test_vacuum_removes_a_file_still_to_read_only_once_its_runway_has_passed(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(
        str(table),
        pa.table({"id": [0]}),
        configuration={"delta.deletedFileRetentionDuration": "interval 4 seconds"},
    )
    write_deltalake(str(table), pa.table({"id": [1]}), mode="append")  # version 1: still to read
    write_deltalake(str(table), pa.table({"id": [2]}), mode="overwrite")  # version 2 removes it
    dt = DeltaTable(str(table))
    chk = delta_checkpoint(tmp_path / "chk", str(dt.metadata().id), 1)

    result = plan_delta_source(chk, str(table), runway_warn_s=60)
    (finding,) = result.plan.findings
    assert finding.verdict is DeltaVerdict.AT_RISK, finding
    assert finding.runway is not None and finding.runway.earliest_delete_ms is not None
    assert (
        "delta.deletedFileRetentionDuration=4s: VACUUM may delete a file of version 1"
        in finding.runway.reason
    )
    assert "no VACUUM in the table's history" in finding.runway.reason

    assert dt.vacuum(dry_run=False) == []  # before the runway: nothing goes
    assert plan_delta_source(chk, str(table)).plan.findings[0].verdict is DeltaVerdict.OK

    time.sleep(max(0.0, (finding.runway.earliest_delete_ms - time.time() * 1000) / 1000) + 0.5)
    assert len(DeltaTable(str(table)).vacuum(dry_run=False)) == 2  # versions 0 and 1's files
    gone = plan_delta_source(chk, str(table))
    assert gone.plan.findings[0].verdict is DeltaVerdict.FILES_GONE
    assert gone.plan.findings[0].spark_error == "FAILED_READ_FILE.FILE_NOT_EXIST"


def test_the_cli_shows_the_runway_and_exits_1_when_at_risk(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(table), pa.table({"id": [i]}), mode="append")  # Delta's defaults: 30 d, 7 d
    chk = delta_checkpoint(tmp_path / "chk", str(DeltaTable(str(table)).metadata().id), 1)
    runner = CliRunner()

    at_risk = runner.invoke(
        cli, ["delta-source", "validate", chk, "--table", str(table), "--runway-warn", "8d"]
    )
    healthy = runner.invoke(
        cli,
        ["delta-source", "validate", chk, "--table", str(table), "--runway-warn", "6d", "--output", "json"],
    )

    assert at_risk.exit_code == 1, at_risk.output
    header, row = at_risk.stdout.splitlines()
    assert (
        header.split()[-1] == "RUNWAY"
        and row.split()[1] == "AT_RISK"
        and row.split()[-1].startswith(("7d", "6d23h"))
    )
    assert healthy.exit_code == 0, healthy.output
    (found,) = json.loads(healthy.stdout)["findings"]
    # versions 1 and 2 are still to read: if an OPTIMIZE removed their files now, VACUUM could
    # delete them in 7 days (log cleanup would take 30)
    assert found["verdict"] == "OK" and 6 * 86_400 < found["runway_s"] <= 7 * 86_400
    assert found["runway_reason"].startswith(
        "delta.deletedFileRetentionDuration=7d: a file still to read, if removed from now on"
    )
    assert 0 <= found["oldest_unread_age_s"] < 600


def test_delta_intervals_read_as_delta_reads_them() -> None:
    assert parse_interval_ms("interval 30 days") == 30 * 86_400_000
    assert parse_interval_ms("interval 1 week") == parse_interval_ms("7 days") == 604_800_000
    assert parse_interval_ms("interval 2 hours 30 minutes") == 9_000_000
    assert parse_interval_ms("INTERVAL 0 SECONDS") == 0
    for bad in ("interval 1 month", "forever", "interval", "interval 3 fortnights"):
        try:
            parse_interval_ms(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was read")
