"""Kill (SIGKILL) a rewrite and a restore before each of their file operations, then run the same
command again: the checkpoint ends byte for byte as the uninterrupted command leaves it, and at every
kill point every file Spark reads is readable (no stale ``.crc``), the interruption is reported, and
the lock is taken over with a warning.

The kill comes from the test-only hook of recovery.checkpoint.store (STREAM_RECOVERY_FAULT_AT), inert
unless set.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from chk_builder import checkpoint_files, tree, write_checkpoint
from stopped import stopped

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.checkpoint.intent import read_interrupted
from recovery.checkpoint.recovery_dir import INTENT_FILE
from recovery.checkpoint.store import FAULT_AT_ENV, FAULT_LOG_ENV, Store
from recovery.core.model import TopicPartition
from recovery.core.restart import Level

REWRITE = """
import sys
from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.core.model import TopicPartition as TP
chk = open_checkpoint(sys.argv[1])
rewrite_offsets(chk, {1: {0: {TP("orders", 0): 15}}, 2: {0: {TP("orders", 0): 25, TP("orders", 2): 5}}},
                initial={0: {TP("orders", 1): 3}}, extra={"_recovery/topic-ids.json": b"{}"}, force=True)
"""
LOCKED_REWRITE = """
import sys
from recovery.checkpoint import checkpoint_lock, open_checkpoint, rewrite_offsets
from recovery.core.model import TopicPartition as TP
with checkpoint_lock(sys.argv[1], command="test"):
    chk = open_checkpoint(sys.argv[1])
    rewrite_offsets(chk, {1: {0: {TP("orders", 0): 15}}, 2: {0: {TP("orders", 0): 25, TP("orders", 2): 5}}},
                    initial={0: {TP("orders", 1): 3}}, extra={"_recovery/topic-ids.json": b"{}"}, force=True)
"""
RESTORE = """
import sys
from recovery.cli import main
main(["checkpoint", "restore", sys.argv[1], "--backup", sys.argv[2], "--execute"])
"""


def proper(root: Path) -> dict[str, bytes]:
    """The checkpoint's own files (``_recovery/`` holds the toolkit's backups and records)."""
    return {k: v for k, v in tree(root).items() if not k.startswith("_recovery/")}


def run(script: str, *args: str, fault_at: int | None = None, log: Path | None = None) -> int:
    env = dict(os.environ)
    env.pop(FAULT_AT_ENV, None)
    if fault_at is not None:
        env[FAULT_AT_ENV] = str(fault_at)
    if log is not None:
        env[FAULT_LOG_ENV] = str(log)
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, timeout=120)
    return done.returncode


def operations(script: str, root: Path, *args: str) -> list[str]:
    log = root.parent / "ops.log"
    assert run(script, str(root), *args, log=log) == 0
    return log.read_text().splitlines()


def assert_spark_readable(root: Path) -> None:
    """Every file a restart reads parses and matches its .crc if it has one (the strict reader)."""
    open_checkpoint(str(root))


@pytest.mark.slow
def test_rewrite_killed_before_each_file_operation(tmp_path: Path) -> None:
    original = checkpoint_files(batches=3, committed=2)
    done = write_checkpoint(tmp_path / "done" / "chk", original)
    ops = operations(REWRITE, done)
    result = proper(done)
    assert result != original
    # backup files, intent records, then: for each of offsets/1, offsets/2, sources/0/0 remove the
    # .crc, replace the file, write the new .crc; then the extra file; then the record goes.
    assert [o.split(" ", 1)[1].replace(f"{done}/", "") for o in ops if "_recovery/" not in o] == [
        f"{verb} {rel}"
        for rel, crc in (
            ("offsets/1", "offsets/.1.crc"),
            ("offsets/2", "offsets/.2.crc"),
            ("sources/0/0", "sources/0/.0.crc"),
        )
        for verb, rel in (("remove", crc), ("write", rel), ("write", crc))
    ]
    for k in range(1, len(ops) + 1):
        root = write_checkpoint(tmp_path / f"k{k}" / "chk", original)
        assert run(REWRITE, str(root), fault_at=k) == -signal.SIGKILL, ops[k - 1]
        assert_spark_readable(root)
        state = open_checkpoint(str(root)).restart_state()
        if (root / INTENT_FILE).exists():
            assert any(i.level is Level.ERROR and "was interrupted" in i.message for i in state.issues)
        assert run(REWRITE, str(root)) == 0, ops[k - 1]
        assert proper(root) == result, ops[k - 1]
        assert not (root / INTENT_FILE).exists()
        shutil.rmtree(root.parent)


@pytest.mark.slow
def test_restore_killed_before_each_file_operation(tmp_path: Path) -> None:
    original = checkpoint_files(batches=3, committed=2)
    base = stopped(write_checkpoint(tmp_path / "base" / "chk", original))  # restore refuses a live one
    O0 = TopicPartition("orders", 0)
    backup = rewrite_offsets(open_checkpoint(str(base)), {2: {0: {O0: 25}}}, initial={0: {O0: 3}}, force=True)
    rewritten = tree(base)
    done = tmp_path / "done" / "chk"
    shutil.copytree(base, done)
    ops = operations(RESTORE, done, backup.id)
    assert proper(done) == original
    for k in range(1, len(ops) + 1):
        root = tmp_path / f"k{k}" / "chk"
        shutil.copytree(base, root)
        assert tree(root) == rewritten
        assert run(RESTORE, str(root), backup.id, fault_at=k) == -signal.SIGKILL, ops[k - 1]
        assert_spark_readable(root)
        assert run(RESTORE, str(root), backup.id) == 0, ops[k - 1]
        assert proper(root) == original, ops[k - 1]
        assert not (root / INTENT_FILE).exists()
        shutil.rmtree(root.parent)


def test_a_dead_holder_is_reported_then_rolled_back_by_the_next_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from recovery.checkpoint import inspect_checkpoint
    from recovery.errors import ExitCode

    original = checkpoint_files(batches=3, committed=2)
    root = write_checkpoint(tmp_path / "chk", original)
    ops = operations(REWRITE, write_checkpoint(tmp_path / "probe" / "chk", original))
    kill_at = next(
        i for i, o in enumerate(ops, 1) if o.endswith(" write " + str(tmp_path / "probe/chk/offsets/2"))
    )
    assert run(REWRITE, str(root), fault_at=kill_at) == -signal.SIGKILL
    assert proper(root) != original  # offsets/1 was already rewritten

    interrupted = read_interrupted(Store(str(root)))
    assert interrupted is not None and interrupted.state == "dead"
    holder = interrupted.intent.holder
    assert interrupted.message == (
        f"`rewrite_offsets` (host {holder.host}, pid {holder.pid}, started {holder.started}) was interrupted "
        f"while writing this checkpoint; the original files are in backup set {interrupted.intent.backup_id} "
        f"({root}/_recovery/backups); running any writing command again (repair, restore) first rolls it back"
    )
    info = inspect_checkpoint(str(root))  # `checkpoint show`: action needed, saying so
    assert info.exit_code is ExitCode.ACTION_NEEDED
    assert any(i.message == interrupted.message for i in info.restart.issues)

    # Another writing command rolls the interrupted one back first, says so, then does its own work.
    O1 = TopicPartition("orders", 1)
    expected = write_checkpoint(tmp_path / "expected" / "chk", original)
    rewrite_offsets(open_checkpoint(str(expected)), {2: {0: {O1: 7}}}, force=True)
    with caplog.at_level("WARNING"):
        rewrite_offsets(open_checkpoint(str(root)), {2: {0: {O1: 7}}}, force=True)
    assert "was interrupted; rolled back what it had changed from backup set" in caplog.text
    assert proper(root) == proper(expected)
    assert read_interrupted(Store(str(root))) is None


LOCK_HOLDER = """
import sys, time
from recovery.checkpoint.intent import checkpoint_lock, Phase
with checkpoint_lock(sys.argv[1], command="repair --execute") as lock:
    lock.record(Phase.BACKUP)
    print("locked", flush=True)
    time.sleep(30)
"""


def test_two_writers_one_proceeds_the_other_is_refused_naming_the_holder(tmp_path: Path) -> None:
    from recovery.errors import StateError

    root = write_checkpoint(tmp_path / "chk", batches=3, committed=2)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        before = tree(root)
        with pytest.raises(StateError) as refused:
            rewrite_offsets(
                open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}}, force=True
            )
        message = str(refused.value)
        assert f"`repair --execute` (host {os.uname().nodename}, pid {holder.pid}, started " in message
        assert "is writing this checkpoint; nothing was written" in message and "\n" not in message
        assert tree(root) == before
        state = open_checkpoint(str(root)).restart_state()
        assert any(
            i.level is Level.WARNING and "is writing this checkpoint now" in i.message for i in state.issues
        )
    finally:
        holder.kill()
        holder.wait()
    # The holder was killed with its record still there: the next writer rolls back (nothing had
    # changed) and proceeds.
    rewrite_offsets(open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}}, force=True)
    assert not (root / INTENT_FILE).exists()


def test_concurrent_rewrites_exactly_one_applies(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=3, committed=2)
    # As the executor does: read the checkpoint under the lock (a read outside it can meet a file
    # between its data and its .crc, and fail as malformed).
    script = LOCKED_REWRITE
    slow = dict(os.environ, STREAM_RECOVERY_FAULT_LOG=str(tmp_path / "log"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(root)], env=slow, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in results)
    # Either one was refused (StateError: the other holds the lock), or they ran one after the
    # other: then the second found the files already rewritten and wrote the same bytes again.
    if codes == [0, 1]:
        assert any("is writing this checkpoint; nothing was written" in err for _, err in results), results
    else:
        assert codes == [0, 0]
    assert not (root / INTENT_FILE).exists()


def test_a_rollback_refuses_an_intent_record_naming_a_backup_outside_the_backup_dir(tmp_path: Path) -> None:
    """The intent record is read back from disk: a ``backup_id`` that is a path is refused, so a
    crafted record cannot make the rollback read or delete files outside the backup directory."""
    import json

    from recovery.errors import CheckpointFormatError

    original = checkpoint_files(batches=3, committed=2)
    root = write_checkpoint(tmp_path / "chk", original)
    ops = operations(REWRITE, write_checkpoint(tmp_path / "probe" / "chk", original))
    kill_at = next(
        i for i, o in enumerate(ops, 1) if o.endswith(" write " + str(tmp_path / "probe/chk/offsets/2"))
    )
    assert run(REWRITE, str(root), fault_at=kill_at) == -signal.SIGKILL
    record = json.loads((root / INTENT_FILE).read_text())
    record["backup_id"] = "../../outside"
    (root / INTENT_FILE).write_text(json.dumps(record))
    before = tree(tmp_path)

    with pytest.raises(CheckpointFormatError, match="is not a backup set name"):
        rewrite_offsets(open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 1): 7}}}, force=True)
    assert tree(tmp_path) == before
