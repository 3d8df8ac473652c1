"""``recovery.cli.report.checkpoint``: values in, rows and ``%`` lines out (no IO)."""

from __future__ import annotations

from recovery.checkpoint import (
    BackupFile,
    BackupListing,
    BackupSet,
    CheckpointInfo,
    CrcStatus,
    FileRead,
    OffsetSeqMetadata,
    RestoreResult,
    SourceInfo,
    SourceKind,
    plan_restart,
)
from recovery.cli.report import checkpoint as report
from recovery.core.model import TopicPartition

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
KAFKA = SourceInfo(
    "0",
    SourceKind.KAFKA,
    ((ORDERS_0, 30), (ORDERS_1, 31)),
    None,
    ((ORDERS_0, 0),),
)
RATE = SourceInfo("1", SourceKind.OPAQUE, None, "7\r", None)
VOID = SourceInfo("2", None, None, None, None)


def info(
    *sources: SourceInfo, offsets: tuple[int, ...] = (0, 1, 2), commits: tuple[int, ...] = (0, 1, 2)
) -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint="/data/chk",
        query_id="q-1",
        offset_batch_ids=offsets,
        commit_batch_ids=commits,
        batch=offsets[-1] if offsets else None,
        metadata=OffsetSeqMetadata(5, 1795327212050, ()) if offsets else None,
        sources=sources,
        restart=plan_restart(offsets, commits),
        files=(FileRead("offsets/2", 188, CrcStatus.OK), FileRead("metadata", 45, CrcStatus.NOT_KEPT)),
    )


def test_show_body_keeps_the_documented_keys() -> None:
    body = report.show_body(info(KAFKA, RATE))
    assert body == {
        "checkpoint": "/data/chk",
        "query_id": "q-1",
        "offsets": {"batches": [0, 1, 2], "latest": 2},
        "commits": {"batches": [0, 1, 2], "latest": 2},
        "batch": 2,
        "batch_timestamp_ms": 1795327212050,
        "batch_watermark_ms": 5,
        "sources": [
            {
                "source_id": "0",
                "kind": "kafka",
                "offsets": [
                    {"topic": "orders", "partition": 0, "offset": 30},
                    {"topic": "orders", "partition": 1, "offset": 31},
                ],
                "text": None,
                "initial_offsets": [{"topic": "orders", "partition": 0, "offset": 0}],
            },
            {"source_id": "1", "kind": "opaque", "offsets": None, "text": "7\r", "initial_offsets": None},
        ],
        "next_run": {"action": "next_batch", "batch_id": 3, "start": "offsets/2", "end": None},
        "issues": [],
        "files": [
            {"path": "offsets/2", "size": 188, "crc": "ok"},
            {"path": "metadata", "size": 45, "crc": "n/a"},
        ],
    }


def test_next_run_spells_the_initial_offsets_and_the_files() -> None:
    first = report.show_body(info(offsets=(), commits=()))["next_run"]
    assert first == {"action": "first_batch", "batch_id": 0, "start": "sources/<i>/0", "end": None}
    rerun = report.show_body(info(commits=(0, 1)))["next_run"]
    assert rerun == {"action": "rerun_batch", "batch_id": 2, "start": "offsets/1", "end": "offsets/2"}
    assert report.next_run_text(info(commits=(0, 1))) == "batch 2 runs again over [offsets/1, offsets/2)"
    assert report.next_run_text(info(offsets=(0,), commits=())) == (
        "batch 0 runs from the initial offsets (sources/<i>/0) to offsets/0"
    )


def test_source_rows_one_per_kafka_partition_one_per_other_source() -> None:
    value = info(KAFKA, RATE, VOID)
    assert report.source_rows(value) == [
        {
            "source_id": "0",
            "kind": "kafka",
            "topic": "orders",
            "partition": 0,
            "offset": 30,
            "initial_offset": 0,
        },
        {
            "source_id": "0",
            "kind": "kafka",
            "topic": "orders",
            "partition": 1,
            "offset": 31,
            "initial_offset": None,
        },
        {"source_id": "1", "kind": "opaque", "text": "7"},
        {"source_id": "2", "kind": None, "text": "-"},
    ]
    assert report.source_columns(value) == (*report.SOURCE_COLUMNS, report.TEXT_COLUMN)


def test_source_columns_fit_the_sources() -> None:
    assert report.source_columns(info(KAFKA)) == report.SOURCE_COLUMNS
    assert report.source_columns(info()) == report.SOURCE_COLUMNS
    assert report.source_columns(info(RATE)) == (("source_id", "SOURCE"), ("kind", "KIND"), ("text", "TEXT"))


def test_show_notes() -> None:
    assert report.show_notes(info(KAFKA)) == [
        "checkpoint /data/chk (query q-1)",
        "offsets/ 0..2 (3 files); commits/ 0..2 (3 files)",
        "sources of batch 2 (offsets/2, batch timestamp 2026-11-22T06:00:12.050Z)",
        "next run: batch 3 starts from offsets/2; its end is read fresh from the source",
        "read offsets/2: 188 bytes, .crc ok",
        "read metadata: 45 bytes, .crc n/a",
    ]


def test_show_notes_name_each_issue_and_say_when_action_is_needed() -> None:
    notes = report.show_notes(info(KAFKA, offsets=(2,), commits=(0,)))
    assert notes[1] == "offsets/ 2..2 (1 file); commits/ 0..0 (1 file)"
    assert notes[4:6] == [
        "warning: latest commit 0 does not trail latest offsets 2 by one; Spark warns and re-runs batch 2",
        "error: offsets/1 is missing: Spark needs it to restart from batch 2 "
        "(The offset log for batch 1 doesn't exist)",
    ]
    assert notes[-1] == "action needed: Spark would refuse to restart from this checkpoint"
    gapped = report.show_notes(info(KAFKA, offsets=(0, 4, 5, 9), commits=(0, 4, 5)))
    assert gapped[4:6] == [
        "warning: offsets/ has gaps (missing 1-3, 6-8): written with async progress tracking, which "
        "restarts from the previous batch on disk (offsets/5); restarted without "
        "asyncProgressTrackingEnabled, Spark fails (batch 8 doesn't exist)",
        "info: commits/ has gaps (missing 1-3)",
    ]
    empty = report.show_notes(info(offsets=(), commits=()))
    assert empty[1:3] == ["offsets/ empty; commits/ empty", "no batch planned yet: no sources to show"]


BACKUP = BackupSet(
    id="20261123T000000000000Z",
    location="/data/chk/_recovery/backups/20261123T000000000000Z",
    created="2026-11-23T00:00:00Z",
    reason="rewrite-offsets",
    checkpoint="/data/chk",
    query_id="q-1",
    files=(BackupFile("offsets/2", "ab", 188),),
    absent=("offsets/.2.crc",),
)


def test_backup_rows() -> None:
    rows = report.backup_rows(BackupListing("/data/chk", (BACKUP,)))
    assert rows == [
        {
            "id": BACKUP.id,
            "created": "2026-11-23T00:00:00Z",
            "reason": "rewrite-offsets",
            "files": ["offsets/2"],
            "absent": ["offsets/.2.crc"],
            "location": BACKUP.location,
        }
    ]
    (table_row,) = report.backup_table_rows(rows)
    assert (table_row["paths"], table_row["absent_paths"]) == ("offsets/2", "offsets/.2.crc")
    assert report.backup_notes(BackupListing("/data/chk", (BACKUP,))) == []
    assert report.backup_notes(BackupListing("/data/chk", ())) == ["no backups of /data/chk"]


def restore(*, executed: bool, written: tuple[str, ...] = ("offsets/2",)) -> RestoreResult:
    safety = BACKUP if executed and written else None
    return RestoreResult(
        BACKUP, written, ("offsets/.2.crc",) if written else (), ("metadata",), safety, executed
    )


def test_restore_rows_and_body() -> None:
    result = restore(executed=False)
    assert report.restore_rows(result) == [
        {"path": "offsets/2", "change": "restore"},
        {"path": "offsets/.2.crc", "change": "remove"},
        {"path": "metadata", "change": "unchanged"},
    ]
    assert report.restore_body(result) == {
        "backup": BACKUP.id,
        "executed": False,
        "written": ["offsets/2"],
        "removed": ["offsets/.2.crc"],
        "unchanged": ["metadata"],
        "safety_backup": None,
    }
    assert report.restore_body(restore(executed=True))["safety_backup"] == BACKUP.id


def test_restore_notes() -> None:
    assert report.restore_notes(restore(executed=False)) == [
        f"dry run of backup {BACKUP.id}: nothing was written; add --execute to restore"
    ]
    assert report.restore_notes(restore(executed=True)) == [
        f"restored backup {BACKUP.id}; the previous files were backed up as {BACKUP.id}"
    ]
    assert report.restore_notes(restore(executed=False, written=())) == [
        f"nothing to restore: the files already match backup {BACKUP.id}"
    ]
