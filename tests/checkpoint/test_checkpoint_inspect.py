"""The read-only use cases behind ``checkpoint show`` and ``checkpoint backups``, and restore's exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from chk_builder import QUERY_ID, checkpoint_files, tree, write_checkpoint

from recovery.checkpoint import (
    BackupListing,
    CrcStatus,
    FileRead,
    NextRun,
    SourceInfo,
    SourceKind,
    inspect_backups,
    inspect_checkpoint,
    open_checkpoint,
    restore_backup,
    rewrite_offsets,
)
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.errors import CheckpointFormatError, ExitCode, StateError


def orders(*offsets: int) -> tuple[tuple[TopicPartition, int], ...]:
    return tuple((TopicPartition("orders", p), o) for p, o in enumerate(offsets))


def test_inspect_reads_the_latest_batch_its_commit_and_the_initial_offsets(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=3, committed=2)
    before = tree(root)
    info = inspect_checkpoint(str(root))
    assert (info.checkpoint, info.query_id, info.batch) == (str(root), QUERY_ID, 2)
    assert (info.offset_batch_ids, info.commit_batch_ids) == ((0, 1, 2), (0, 1))
    assert info.sources == (SourceInfo("0", SourceKind.KAFKA, orders(30, 30, 30), None, orders(0, 0, 0)),)
    assert info.metadata is not None and info.metadata.batch_timestamp_ms == 1795327212050
    assert (info.restart.next_run, info.restart.start, info.restart.end) == (
        NextRun.RERUN_BATCH,
        CheckpointFile.offsets(1),
        CheckpointFile.offsets(2),
    )
    assert info.files == (
        FileRead("commits/1", 29, CrcStatus.OK),
        FileRead("metadata", 45, CrcStatus.OK),
        FileRead("offsets/1", len(checkpoint_files()["offsets/1"]), CrcStatus.OK),
        FileRead("offsets/2", len(checkpoint_files()["offsets/2"]), CrcStatus.OK),
        FileRead("sources/0/0", 34, CrcStatus.OK),
    )
    assert info.exit_code is ExitCode.OK
    assert tree(root) == before


def test_inspect_a_chosen_batch(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    info = inspect_checkpoint(str(root), batch=0)
    assert info.batch == 0 and info.sources[0].offsets == orders(10, 10, 10)
    with pytest.raises(CheckpointFormatError, match=r"offsets/7: no such batch file$"):
        inspect_checkpoint(str(root), batch=7)


def test_a_checkpoint_spark_would_refuse_is_bad_input(tmp_path: Path) -> None:
    files = {
        k: v
        for k, v in checkpoint_files(committed=1).items()
        if k not in ("offsets/0", "offsets/.0.crc", "offsets/1", "offsets/.1.crc")
    }
    root = write_checkpoint(tmp_path / "chk", files)
    with pytest.raises(
        CheckpointFormatError, match=r"/chk/offsets/1 is missing: .* Spark cannot restart from it$"
    ):
        inspect_checkpoint(str(root))


def test_a_checkpoint_without_batches_has_no_sources_to_show(tmp_path: Path) -> None:
    files = {k: v for k, v in checkpoint_files().items() if not k.startswith(("offsets/", "commits/"))}
    info = inspect_checkpoint(str(write_checkpoint(tmp_path / "chk", files)))
    assert (info.batch, info.sources, info.metadata) == (None, (), None)
    assert (info.restart.next_run, info.restart.start, info.restart.end) == (NextRun.FIRST_BATCH, None, None)
    assert info.exit_code is ExitCode.OK


def test_a_source_without_an_offset_and_an_opaque_source(tmp_path: Path) -> None:
    files = checkpoint_files(batches=1, committed=1, crc=False)
    files["offsets/0"] = b'v2\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n0:-\n1:{"logOffset":3}'
    info = inspect_checkpoint(str(write_checkpoint(tmp_path / "chk", files)))
    assert info.sources == (
        SourceInfo("0", None, None, None, None),
        SourceInfo("1", SourceKind.OPAQUE, None, '{"logOffset":3}', None),
    )


def test_backups_are_listed_oldest_first(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    assert inspect_backups(str(root)) == BackupListing(str(root), ())
    first = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}}, force=True
    )
    second = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 2}}}, force=True
    )
    listing = inspect_backups(str(root))
    assert listing.backups == (first, second)
    assert listing.exit_code is ExitCode.OK


def test_backups_and_restore_need_something_at_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    message = f"{missing}: does not exist; no checkpoint here"
    with pytest.raises(CheckpointFormatError) as raised:
        inspect_backups(str(missing))
    assert (str(raised.value), raised.value.exit_code) == (message, ExitCode.INVALID_INPUT)
    with pytest.raises(CheckpointFormatError) as raised:
        restore_backup(str(missing), execute=True)
    assert str(raised.value) == message
    assert not missing.exists()


def test_restore_exit_codes(tmp_path: Path) -> None:
    """A dry run with changes pending is 1 (as repair's); done or nothing to change is 0."""
    root = write_checkpoint(tmp_path / "chk")
    with pytest.raises(StateError, match="no backups found"):
        restore_backup(str(root))
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}}, force=True
    )
    dry = restore_backup(str(root))
    assert (dry.has_changes, dry.executed, dry.exit_code) == (True, False, ExitCode.ACTION_NEEDED)
    done = restore_backup(str(root), backup.id, execute=True, force=True)
    assert (done.has_changes, done.executed, done.exit_code) == (True, True, ExitCode.OK)
    again = restore_backup(str(root), backup.id)
    assert (again.has_changes, again.exit_code) == (False, ExitCode.OK)
