"""The heartbeat (recovery.checkpoint.heartbeat) on local disk, and how the write path judges it
(recovery.checkpoint.heartbeat.refuse_if_in_use). The real-Spark version is
tests/safety/test_heartbeat_spark.py."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path

import pytest
from chk_builder import QUERY_ID, tree, write_checkpoint

from recovery.checkpoint import open_checkpoint, restore_backup, rewrite_offsets
from recovery.checkpoint.heartbeat import (
    NO_HEARTBEAT,
    Heartbeat,
    Liveness,
    judge,
    read_heartbeat,
    refuse_if_in_use,
    write_heartbeat,
)
from recovery.checkpoint.recovery_dir import HEARTBEAT_FILE, LAST_WRITE_FILE
from recovery.core.model import TopicPartition
from recovery.errors import CheckpointInUse

RUN_ID = "0b7e4c1a-1111-4222-8333-944455566677"
NOW_MS = 1_800_000_000_000


def beat(path: Path, state: str = "running", *, at_ms: int = NOW_MS, interval_s: float = 10.0) -> None:
    write_heartbeat(
        str(path), query_id=QUERY_ID, run_id=RUN_ID, state=state, interval_s=interval_s, now_ms=at_ms
    )


def age_batch_files(root: Path, seconds_ago: float, now_s: float) -> None:
    for rel in ("offsets", "commits"):
        for f in (root / rel).iterdir():
            os.utime(f, (now_s - seconds_ago, now_s - seconds_ago))


# -- write and read ---------------------------------------------------------------------------------


def test_round_trip_and_nothing_else_touched(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    before = tree(tmp_path)
    beat(tmp_path, interval_s=2.5)
    after = tree(tmp_path)
    assert set(after) - set(before) == {HEARTBEAT_FILE}
    assert {k: v for k, v in after.items() if k != HEARTBEAT_FILE} == before
    hb = read_heartbeat(str(tmp_path))
    assert hb == Heartbeat(QUERY_ID, RUN_ID, "running", 2.5, NOW_MS, socket.gethostname(), os.getpid())
    assert json.loads(after[HEARTBEAT_FILE])["format"] == 1


def test_replaced_atomically_without_temp_files(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    for i in range(5):
        beat(tmp_path, "running", at_ms=NOW_MS + i)
    beat(tmp_path, "terminated", at_ms=NOW_MS + 10)
    assert sorted(p.name for p in (tmp_path / "_recovery").iterdir()) == ["heartbeat.json"]
    hb = read_heartbeat(str(tmp_path))
    assert hb is not None and (hb.state, hb.written_ms) == ("terminated", NOW_MS + 10)


def test_no_heartbeat_reads_as_none(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    assert read_heartbeat(str(tmp_path)) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"format": 2}',
        json.dumps({"format": 1, "query_id": "q", "run_id": "r", "state": "asleep"}).encode(),
        json.dumps(
            {
                "format": 1,
                "query_id": "q",
                "run_id": "r",
                "state": "running",
                "interval_s": "10",
                "written_ms": 1,
                "host": "h",
                "pid": 1,
            }
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "query_id": "q",
                "run_id": "r",
                "state": "running",
                "interval_s": 10,
                "written_ms": -5,
                "host": "h",
                "pid": 1,
            }
        ).encode(),
    ],
)
def test_malformed_reads_as_none_with_a_warning(
    tmp_path: Path, data: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    write_checkpoint(tmp_path)
    (tmp_path / "_recovery").mkdir()
    (tmp_path / HEARTBEAT_FILE).write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="recovery"):
        assert read_heartbeat(str(tmp_path)) is None
    assert any("heartbeat.json: not a heartbeat record" in r.getMessage() for r in caplog.records)


def test_a_directory_in_its_place_reads_as_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_checkpoint(tmp_path)
    (tmp_path / HEARTBEAT_FILE).mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="recovery"):
        assert read_heartbeat(str(tmp_path)) is None
    assert caplog.records


@pytest.mark.parametrize("blocker", ["file", "symlink-out"])
def test_write_failure_is_logged_never_raised(
    tmp_path: Path, blocker: str, caplog: pytest.LogCaptureFixture
) -> None:
    chk = write_checkpoint(tmp_path / "chk")
    if blocker == "file":  # _recovery is a plain file: the directory cannot be made
        (chk / "_recovery").write_bytes(b"x")
    else:  # _recovery leads out of the checkpoint: confinement refuses to write through it
        (tmp_path / "elsewhere").mkdir()
        (chk / "_recovery").symlink_to(tmp_path / "elsewhere")
    before = tree(tmp_path)
    with caplog.at_level(logging.WARNING, logger="recovery"):
        beat(chk)
    assert tree(tmp_path) == before
    assert read_heartbeat(str(chk)) is None
    assert any("could not write the heartbeat" in r.getMessage() for r in caplog.records)


def test_write_to_a_checkpoint_that_is_a_file_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "plain-file"
    target.write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="recovery"):
        beat(target)
    assert target.read_bytes() == b"x"
    assert any("could not write the heartbeat" in r.getMessage() for r in caplog.records)


def test_unknown_state_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="heartbeat state"):
        beat(tmp_path, "sleeping")


# -- judging (pure) ---------------------------------------------------------------------------------


def hb(state: str, written_ms: int, interval_s: float = 10.0) -> Heartbeat:
    return Heartbeat(QUERY_ID, RUN_ID, state, interval_s, written_ms, "host-a", 42)


def test_judge() -> None:
    assert judge(None, NOW_MS, NOW_MS).liveness is Liveness.GUESS
    assert judge(None, NOW_MS, NOW_MS).note == NO_HEARTBEAT
    # fresh for max(60 s, 3 x interval)
    assert judge(hb("running", NOW_MS - 59_000), None, NOW_MS).liveness is Liveness.RUNNING
    assert judge(hb("running", NOW_MS - 61_000), None, NOW_MS).liveness is Liveness.GUESS
    assert judge(hb("running", NOW_MS - 119_000, 40), None, NOW_MS).liveness is Liveness.RUNNING
    assert judge(hb("running", NOW_MS - 121_000, 40), None, NOW_MS).liveness is Liveness.GUESS
    assert "stale" in judge(hb("running", NOW_MS - 121_000, 40), None, NOW_MS).note
    # a writer's clock ahead of ours: still fresh
    assert judge(hb("running", NOW_MS + 5_000), None, NOW_MS).liveness is Liveness.RUNNING
    # terminated: stopped when written after the newest batch file, else a guess
    assert judge(hb("terminated", NOW_MS - 1_000), NOW_MS - 2_000, NOW_MS).liveness is Liveness.STOPPED
    assert judge(hb("terminated", NOW_MS - 1_000), None, NOW_MS).liveness is Liveness.STOPPED
    later = judge(hb("terminated", NOW_MS - 3_000), NOW_MS - 2_000, NOW_MS)
    assert later.liveness is Liveness.GUESS and "without the toolkit's listener" in later.note
    running = judge(hb("running", NOW_MS - 7_000), None, NOW_MS)
    assert f"query {QUERY_ID} (run {RUN_ID}) on host host-a, pid 42, reported running 7s ago" == running.note


# -- the write path ---------------------------------------------------------------------------------


def test_fresh_running_heartbeat_refuses_even_with_old_batch_files(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 3600, now)
    beat(tmp_path, at_ms=int(now * 1000) - 5_000)
    with pytest.raises(CheckpointInUse) as err:
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))
    message = str(err.value)
    assert f"query {QUERY_ID} (run {RUN_ID}) on host {socket.gethostname()}" in message
    assert "reported running 5s ago" in message and "`force=True`" in message


def test_terminated_heartbeat_after_the_last_batch_allows_even_fresh_batch_files(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 10, now)
    beat(tmp_path, "terminated", at_ms=int(now * 1000) - 5_000)
    refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))  # no raise


def test_terminated_heartbeat_before_the_last_batch_falls_back_to_file_ages(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 10, now)
    beat(tmp_path, "terminated", at_ms=int(now * 1000) - 60_000)
    with pytest.raises(CheckpointInUse, match="without the toolkit's listener"):
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))


def test_no_heartbeat_says_liveness_is_guessed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 10, now)
    with pytest.raises(CheckpointInUse) as err:
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))
    assert NO_HEARTBEAT in str(err.value) and "offsets/2 was written 10s ago" in str(err.value)
    age_batch_files(tmp_path, 3600, now)
    with caplog.at_level(logging.WARNING, logger="recovery"):
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))
    assert any(NO_HEARTBEAT in r.getMessage() for r in caplog.records)


def test_stale_running_heartbeat_falls_back_to_file_ages(tmp_path: Path) -> None:
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 3600, now)
    beat(tmp_path, at_ms=int(now * 1000) - 600_000)
    refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))  # no raise
    age_batch_files(tmp_path, 10, now)
    with pytest.raises(CheckpointInUse, match="the heartbeat is stale"):
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 300, now_ms=int(now * 1000))


def test_heartbeat_only_check_of_the_gate_ignores_fresh_batch_files_but_not_a_running_query(
    tmp_path: Path,
) -> None:
    # The pre-start gate passes active_within_s=0: a job restarting right after a crash finds fresh
    # batch files (no refusal), but another instance of it, running, is refused.
    write_checkpoint(tmp_path)
    now = time.time()
    age_batch_files(tmp_path, 1, now)
    refuse_if_in_use(open_checkpoint(str(tmp_path)), 0, now_ms=int(now * 1000))  # no raise
    beat(tmp_path, at_ms=int(now * 1000) - 2_000)
    with pytest.raises(CheckpointInUse, match="the query is running"):
        refuse_if_in_use(open_checkpoint(str(tmp_path)), 0, now_ms=int(now * 1000))


# -- restore ----------------------------------------------------------------------------------------


def test_restore_is_refused_while_the_heartbeat_is_fresh_unless_forced(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk")
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 1): 25}}}, force=True
    )
    age_batch_files(root, 3600, time.time())
    beat(root, at_ms=int(time.time() * 1000))
    rewritten = tree(root)
    with pytest.raises(CheckpointInUse, match=f"query {QUERY_ID} \\(run {RUN_ID}\\)"):
        restore_backup(str(root), backup.id, execute=True)
    assert tree(root) == rewritten
    assert restore_backup(str(root), backup.id).written  # a dry run still says what would change
    done = restore_backup(str(root), backup.id, execute=True, force=True)
    assert "offsets/2" in done.written


def test_the_toolkits_own_rewrites_are_no_sign_of_a_query(tmp_path: Path) -> None:
    """repair (here rewrite_offsets), then restore at once: the rewritten offsets/2 is fresh, but the
    toolkit wrote it (_recovery/last-write.json), so the restore is not refused. A batch file a
    query writes afterwards is."""
    root = write_checkpoint(tmp_path / "chk")
    age_batch_files(root, 3600, time.time())
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 1): 25}}}, force=True
    )
    assert json.loads((root / LAST_WRITE_FILE).read_bytes())["files"][:2] == ["offsets/2", "offsets/.2.crc"]
    done = restore_backup(str(root), backup.id, execute=True)
    assert done.executed and "offsets/2" in done.written
    (root / "commits/2").write_bytes((root / "commits/1").read_bytes())  # a query commits batch 2 now
    with pytest.raises(CheckpointInUse, match="commits/2 was written 0s ago"):
        restore_backup(str(root), done.safety_backup.id if done.safety_backup else "", execute=True)


# -- object storage ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_heartbeat_on_s3_decides_like_on_local_disk(s3_endpoint: str) -> None:
    """On S3 (moto in server mode) the heartbeat is one PUT of one object; nothing else is written,
    and the write path reads it through the same store."""
    import uuid

    import s3fs
    from chk_builder import checkpoint_files

    options = {"endpoint_url": s3_endpoint}
    fs = s3fs.S3FileSystem(**options)
    bucket = f"hb-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    url = f"s3://{bucket}/chk"
    try:
        for rel, data in checkpoint_files(crc=False).items():
            fs.pipe_file(f"{url}/{rel}", data)
        before = sorted(fs.find(url))
        now_ms = int(time.time() * 1000)
        write_heartbeat(
            url, query_id=QUERY_ID, run_id=RUN_ID, state="running", interval_s=5, storage_options=options
        )
        fs.invalidate_cache()
        assert sorted(fs.find(url)) == sorted([*before, f"{bucket}/chk/{HEARTBEAT_FILE}"])
        hb = read_heartbeat(url, options)
        assert hb is not None and (hb.query_id, hb.run_id, hb.state) == (QUERY_ID, RUN_ID, "running")
        # --active-within 0: the file-age guess never refuses; the heartbeat does.
        chk = open_checkpoint(url, options)
        with pytest.raises(CheckpointInUse, match=f"{url}/{HEARTBEAT_FILE}: query {QUERY_ID}"):
            refuse_if_in_use(chk, 0, now_ms=now_ms + 10_000)
        write_heartbeat(
            url, query_id=QUERY_ID, run_id=RUN_ID, state="terminated", interval_s=5, storage_options=options
        )
        refuse_if_in_use(open_checkpoint(url, options), 300)  # stopped, although the files are fresh
        # A store that cannot be reached: the heartbeat is lost, the job is not.
        write_heartbeat(
            url,
            query_id=QUERY_ID,
            run_id=RUN_ID,
            state="running",
            interval_s=5,
            storage_options={
                "endpoint_url": "http://127.0.0.1:1",
                "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
            },
        )
    finally:
        fs.rm(bucket, recursive=True)
