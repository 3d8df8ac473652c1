"""Rewriting offsets in place, backups and restore on the local file system (and fsspec memory://)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pytest
from chk_builder import META, QUERY_ID, checkpoint_files, kafka_json, tree, write_checkpoint

from recovery.checkpoint import (
    CrcStatus,
    NextRun,
    apply_rewrite,
    list_backups,
    open_checkpoint,
    plan_offset_rewrite,
    restore_backup,
    rewrite_offsets,
)
from recovery.checkpoint.crc import checksum_file
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.errors import CheckpointFormatError, CheckpointInUse, InvalidInput, PlanOutdated, StateError

ORDERS_1 = TopicPartition("orders", 1)


def test_rewrite_changes_only_the_chosen_partition_and_regenerates_the_crc(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    before = tree(root)
    backup = rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, force=True)
    after = tree(root)
    expected = f"v1\n{META}\n{kafka_json('orders', [30, 25, 30])}".encode()
    assert after["offsets/2"] == expected
    assert after["offsets/.2.crc"] == checksum_file(expected)
    changed = {k for k in after if not k.startswith("_recovery/") and before.get(k) != after[k]}
    assert changed == {"offsets/2", "offsets/.2.crc"}
    assert not [k for k in after if k.endswith(".tmp")]
    # The backup holds the original bytes, with their sha256 in the manifest.
    assert {f.path for f in backup.files} == {"offsets/2", "offsets/.2.crc"}
    assert backup.absent == ()
    for f in backup.files:
        assert after[f"_recovery/backups/{backup.id}/files/{f.path}"] == before[f.path]
    manifest = json.loads(after[f"_recovery/backups/{backup.id}/manifest.json"])
    assert manifest["query_id"] == QUERY_ID and manifest["reason"] == "rewrite-offsets"
    assert {f["path"]: f["size"] for f in manifest["files"]} == {
        "offsets/2": len(before["offsets/2"]),
        "offsets/.2.crc": 12,
    }
    # And it reads back, crc verified.
    chk = open_checkpoint(str(root))
    assert chk.offsets(2).source(0).kafka.offsets[ORDERS_1] == 25  # type: ignore[union-attr]
    assert {f.crc for f in chk.files_read} == {CrcStatus.OK}


def test_the_low_level_writers_refuse_a_checkpoint_a_query_looks_like_it_runs_on(tmp_path: Path) -> None:
    """Every writer of batch files checks liveness where it writes (issue 28): a Python caller of
    rewrite_offsets or apply_rewrite on a checkpoint written seconds ago is refused, nothing written."""
    root = write_checkpoint(tmp_path / "chk")  # its batch files are seconds old: a running query
    before = tree(root)
    chk = open_checkpoint(str(root))
    with pytest.raises(CheckpointInUse, match=r"offsets/2 was written \d+s ago.*`force=True`"):
        rewrite_offsets(chk, {2: {0: {ORDERS_1: 25}}})
    with pytest.raises(CheckpointInUse):
        apply_rewrite(chk, plan_offset_rewrite(chk, {2: {0: {ORDERS_1: 25}}}))
    assert tree(root) == before  # no backup set, no lock record left either
    for path in root.rglob("*"):  # the query stopped an hour ago
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime - 3600))
    assert rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}) is not None


def test_initial_offsets_file_keeps_its_nul_and_version_header(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=1, committed=0)
    chk = open_checkpoint(str(root))
    assert chk.restart_state().next_run is NextRun.FIRST_BATCH
    rewrite_offsets(chk, {0: {0: {ORDERS_1: 4}}}, initial={0: {ORDERS_1: 2}}, force=True)
    assert (root / "sources/0/0").read_bytes() == b'\x00v1\n{"orders":{"0":0,"1":2,"2":0}}'
    assert (root / "sources/0/.0.crc").read_bytes() == checksum_file((root / "sources/0/0").read_bytes())
    assert b'"1":4' in (root / "offsets/0").read_bytes()


def test_unchanged_offsets_write_nothing_at_all(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    plan = plan_offset_rewrite(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 30}}})
    assert plan.changes == ()


@pytest.mark.parametrize(
    ("batches", "initial", "message"),
    [
        ({7: {0: {ORDERS_1: 1}}}, None, "/chk/offsets/7: no such batch file (batch files are never created)"),
        ({2: {1: {ORDERS_1: 1}}}, None, "/chk/offsets/2: batch 2: no source 1"),
        (
            {2: {0: {ORDERS_1: -3}}},
            None,
            "/chk/offsets/2: orders [1]: offset must be a non-negative integer, got -3",
        ),
        (None, {1: {ORDERS_1: 1}}, "/chk/sources/1/0: no Kafka initial-offset file to rewrite"),
    ],
    ids=["missing-batch", "missing-source", "negative", "missing-initial"],
)
def test_bad_requests_write_nothing(tmp_path: Path, batches: object, initial: object, message: str) -> None:
    root = write_checkpoint(tmp_path / "chk")
    before = tree(root)
    with pytest.raises(InvalidInput) as raised:
        rewrite_offsets(open_checkpoint(str(root)), batches, initial=initial, force=True)  # type: ignore[arg-type]
    assert str(raised.value) == str(tmp_path) + message
    assert tree(root) == before


def test_a_stale_crc_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    files = checkpoint_files()
    files["offsets/2"] = files["offsets/2"].replace(b'"1":30', b'"1":31')  # edited by hand, crc kept
    root = write_checkpoint(tmp_path / "chk", files)
    before = tree(root)
    with pytest.raises(CheckpointFormatError) as raised:
        rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, force=True)
    assert str(raised.value).startswith(f"{root}/offsets/2: does not match its checksum file .2.crc")
    assert tree(root) == before
    chk = open_checkpoint(str(root), verify_crc=False)
    chk.offsets(2)
    assert {f.path: f.crc for f in chk.files_read}["offsets/2"] is CrcStatus.MISMATCH


def test_plan_outdated_when_the_file_changed_after_planning(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    chk = open_checkpoint(str(root))
    plan = plan_offset_rewrite(chk, {2: {0: {ORDERS_1: 25}}})
    (root / "offsets/2").write_bytes(
        b"v1\n" + META.encode() + b"\n" + kafka_json("orders", [1, 1, 1]).encode()
    )
    before = tree(root)
    with pytest.raises(PlanOutdated, match="changed since the plan was made; nothing was written"):
        apply_rewrite(chk, plan, force=True)
    assert tree(root) == before


def test_restore_puts_back_the_original_bytes_and_backs_up_the_current_ones(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    original = tree(root)
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, initial={0: {ORDERS_1: 5}}, force=True
    )
    rewritten = tree(root)

    dry = restore_backup(str(root))
    assert (dry.executed, dry.safety_backup) == (False, None)
    assert set(dry.written) == {"offsets/2", "offsets/.2.crc", "sources/0/0", "sources/0/.0.crc"}
    assert tree(root) == rewritten

    done = restore_backup(str(root), backup.id, execute=True, force=True)
    assert done.safety_backup is not None and done.safety_backup.reason == f"restore-of-{backup.id}"
    now = tree(root)
    assert {k: v for k, v in now.items() if not k.startswith("_recovery/")} == original
    assert [b.id for b in list_backups(str(root))] == [backup.id, done.safety_backup.id]
    # Restoring the safety backup brings back the rewritten state: restores are reversible.
    restore_backup(str(root), done.safety_backup.id, execute=True, force=True)
    assert {k: v for k, v in tree(root).items() if not k.startswith("_recovery/")} == {
        k: v for k, v in rewritten.items() if not k.startswith("_recovery/")
    }


def test_restore_removes_side_files_that_did_not_exist(tmp_path: Path) -> None:
    files = {k: v for k, v in checkpoint_files().items() if not k.endswith(".crc")}
    root = write_checkpoint(tmp_path / "chk", files)
    backup = rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, force=True)
    assert backup.absent == ("offsets/.2.crc",)
    assert (root / "offsets/.2.crc").exists()  # the local store keeps side files: one is written
    result = restore_backup(str(root), execute=True, force=True)
    assert result.removed == ("offsets/.2.crc",)
    assert not (root / "offsets/.2.crc").exists()
    assert (root / "offsets/2").read_bytes() == files["offsets/2"]


def test_restore_refuses_a_tampered_backup(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    backup = rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, force=True)
    saved = root / f"_recovery/backups/{backup.id}/files/offsets/2"
    saved.write_bytes(saved.read_bytes().replace(b"30", b"31"))
    before = tree(root)
    with pytest.raises(CheckpointFormatError, match="sha256 does not match the manifest; not restoring"):
        restore_backup(str(root), execute=True)
    assert tree(root) == before


def test_restore_needs_a_backup(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    with pytest.raises(StateError, match=r"chk: no backups found$"):
        restore_backup(str(root))
    rewrite_offsets(open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, force=True)
    with pytest.raises(InvalidInput, match="no backup 'nope'"):
        restore_backup(str(root), "nope")


def test_backups_can_live_elsewhere(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    elsewhere = tmp_path / "backups"
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {ORDERS_1: 25}}}, backup_dir=str(elsewhere), force=True
    )
    assert not (root / "_recovery/backups").exists()
    assert (elsewhere / backup.id / "manifest.json").is_file()
    assert list_backups(str(root)) == ()
    assert list_backups(str(root), backup_dir=str(elsewhere)) == (backup,)
    restore_backup(str(root), execute=True, backup_dir=str(elsewhere), force=True)
    assert (root / "offsets/2").read_bytes() == checkpoint_files()["offsets/2"]


def test_ten_thousand_batches_cost_two_listings_and_a_few_reads(tmp_path: Path) -> None:
    """Batches 0..9997 are directories here: reading any of them would fail, so none is read."""
    files = checkpoint_files(batches=2, committed=2, first=9998)
    root = write_checkpoint(tmp_path / "chk", files)
    for b in range(9998):
        (root / "offsets" / str(b)).mkdir()
        (root / "commits" / str(b)).mkdir()
    chk = open_checkpoint(str(root))
    chk.validate()
    state = chk.restart_state()
    assert (state.next_run, state.batch_id, state.start) == (
        NextRun.NEXT_BATCH,
        10000,
        CheckpointFile.offsets(9999),
    )
    assert [f.path for f in chk.files_read] == [
        "commits/9999",
        "metadata",
        "offsets/9998",
        "offsets/9999",
        "sources/0/0",
    ]
    assert any("10000 offsets batches retained" in i.message for i in state.issues)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda r: None, "{root}: does not exist; no checkpoint here"),
        (lambda r: r.mkdir(), "{root}: is empty; no checkpoint here"),
        (
            lambda r: write_checkpoint(r, {"offsets/0": b"v1\n{}\n1"}),
            "{root}/metadata: missing (not a checkpoint",
        ),
        (lambda r: (r / "metadata").mkdir(parents=True), "{root}/metadata: is a directory, expected a file"),
        (lambda r: write_checkpoint(r, {"metadata": b'{"id":'}), "{root}/metadata: the file is not JSON"),
        (lambda r: r.write_bytes(b"x"), "{root}: is a file, expected a checkpoint directory"),
    ],
    ids=["missing", "empty", "no-metadata", "metadata-is-a-directory", "metadata-truncated", "a-file"],
)
def test_not_a_checkpoint(tmp_path: Path, setup: object, message: str) -> None:
    root = tmp_path / "chk"
    setup(root)  # type: ignore[operator]
    with pytest.raises(CheckpointFormatError) as raised:
        open_checkpoint(str(root))
    assert str(raised.value).startswith(message.format(root=root))


def test_a_directory_where_a_batch_file_belongs(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    (root / "offsets/3").mkdir()
    with pytest.raises(CheckpointFormatError, match=r"/chk/offsets/3: is a directory, expected a file$"):
        open_checkpoint(str(root)).latest_offsets()


def test_memory_filesystem_uses_rename_and_writes_no_side_files() -> None:
    fs = fsspec.filesystem("memory")
    base = "memory://stream-recovery-test-chk"
    files = {k: v for k, v in checkpoint_files().items() if not k.endswith(".crc")}
    for rel, data in files.items():
        fs.pipe_file(f"{base}/{rel}", data)
    try:
        chk = open_checkpoint(base)
        backup = rewrite_offsets(chk, {2: {0: {ORDERS_1: 25}}}, force=True)
        assert fs.cat_file(f"{base}/offsets/2") == files["offsets/2"].replace(b'"1":30', b'"1":25')
        assert not fs.exists(f"{base}/offsets/.2.crc")
        assert not [p for p in fs.find(base) if p.endswith(".tmp")]
        restore_backup(base, backup.id, execute=True, force=True)
        assert fs.cat_file(f"{base}/offsets/2") == files["offsets/2"]
    finally:
        fs.rm(base, recursive=True)
