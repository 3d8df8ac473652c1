"""The heartbeat against a real running query (real Kafka broker, real Spark): while the query runs,
``repair --execute`` is refused because of its heartbeat, although every batch file is older than
``--active-within``; once the query has stopped and said so, the same command goes ahead without
``--force`` although the batch files are seconds old.

The heartbeat is written by a minimal StreamingQueryListener defined here, as the toolkit's own
listener (recovery.listener) does: on start, progress and idle events ``running``, on termination
``terminated``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from recovery.checkpoint.heartbeat import NO_HEARTBEAT, read_heartbeat, write_heartbeat
from recovery.checkpoint.recovery_dir import HEARTBEAT_FILE

pytestmark = pytest.mark.integration


class HeartbeatListener(StreamingQueryListener):  # type: ignore[misc]
    """Keeps ``checkpoint``'s heartbeat for the queries of this session (one at a time here)."""

    def __init__(self, checkpoint: str, interval_s: float) -> None:
        self.checkpoint = checkpoint
        self.interval_s = interval_s

    def _beat(self, query_id: Any, run_id: Any, state: str) -> None:
        write_heartbeat(
            self.checkpoint,
            query_id=str(query_id),
            run_id=str(run_id),
            state=state,
            interval_s=self.interval_s,
        )

    def onQueryStarted(self, event: Any) -> None:  # Spark's names
        self._beat(event.id, event.runId, "running")

    def onQueryProgress(self, event: Any) -> None:
        self._beat(event.progress.id, event.progress.runId, "running")

    def onQueryIdle(self, event: Any) -> None:
        self._beat(event.id, event.runId, "running")

    def onQueryTerminated(self, event: Any) -> None:
        self._beat(event.id, event.runId, "terminated")


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def checkpoint_proper(root: Path) -> dict[str, bytes]:
    """The checkpoint's own files (the listener keeps rewriting ``_recovery/heartbeat.json``)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not str(p.relative_to(root)).startswith("_recovery")
    }


def newest_batch_file_age_s(root: Path) -> float:
    files = [*(root / "offsets").glob("[0-9]*"), *(root / "commits").glob("[0-9]*")]
    return time.time() - max(f.stat().st_mtime for f in files)


def repair(checkpoint: Path, bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "recovery", "repair", str(checkpoint), "-b", bootstrap]
    command += ["--to-offset", "10", "--execute", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def latest_kafka_offsets(root: Path, topic: str) -> dict[str, int]:
    latest = max(int(p.name) for p in (root / "offsets").glob("[0-9]*"))
    line = (root / "offsets" / str(latest)).read_text().splitlines()[-1]
    return dict(json.loads(line)[topic])


def test_the_heartbeat_decides_whether_the_query_runs(
    spark: SparkSession,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    tmp_path: Path,
) -> None:
    topic = new_topic(2)
    produce(topic, 40, partitions=2)
    chk = tmp_path / "chk"
    listener = HeartbeatListener(str(chk), interval_s=2.0)
    spark.streams.addListener(listener)
    query = None
    try:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(chk))
            .trigger(processingTime="1 second")
            .start()
        )
        wait_for("batch 0 committed", lambda: (chk / "commits" / "0").exists())
        wait_for("the running heartbeat", lambda: (chk / HEARTBEAT_FILE).exists())
        # The query is caught up and idle: no batch file is written while it waits for data.
        wait_for("quiet batch files", lambda: newest_batch_file_age_s(chk) > 4.0)
        assert query.isActive
        beat = read_heartbeat(str(chk))
        assert beat is not None and beat.state == "running"
        assert (beat.query_id, beat.run_id) == (str(query.id), str(query.runId))

        # Without the heartbeat, file ages alone would call it stopped: a copy without _recovery/.
        twin = tmp_path / "twin"
        shutil.copytree(chk, twin, ignore=shutil.ignore_patterns("_recovery"))
        guessed = repair(twin, bootstrap, "--active-within", "2")
        assert guessed.returncode == 0, guessed.stderr
        assert NO_HEARTBEAT in guessed.stderr  # the notice says liveness was only guessed

        before = checkpoint_proper(chk)
        refused = repair(chk, bootstrap, "--active-within", "2")
        assert refused.returncode == 1, refused.stderr
        assert f"query {query.id} (run {query.runId}) on host {socket.gethostname()}, pid {os.getpid()}" in (
            refused.stderr
        )
        assert "reported running" in refused.stderr and "Nothing was written" in refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert checkpoint_proper(chk) == before

        query.stop()
        beat_after = None

        def terminated() -> bool:
            nonlocal beat_after
            beat_after = read_heartbeat(str(chk))
            return beat_after is not None and beat_after.state == "terminated"

        wait_for("the terminated heartbeat", terminated)
    finally:
        if query is not None and query.isActive:
            query.stop()
        spark.streams.removeListener(listener)

    # Stopped and said so: allowed without --force, with the default --active-within (300 s) that
    # the seconds-old batch files would fail.
    assert newest_batch_file_age_s(chk) < 300
    allowed = repair(chk, bootstrap)
    assert allowed.returncode == 0, allowed.stderr
    assert "% applied" in allowed.stderr and "liveness is guessed" not in allowed.stderr
    assert latest_kafka_offsets(chk, topic) == {"0": 10, "1": 10}
