"""Issue 26: a partition leader dies (SIGKILL) on a real 3-node cluster (replication factor 3) just
before a command asks for offsets. librdkafka then answers ListOffsets with no offset (-1001) until
its metadata is refreshed, which printed a traceback (``not an offset range: [-1001, -1001)``). Each
command now asks again, with fresh metadata, until the new leader answers: ``offsets``, ``validate``
(with the runway), ``repair --execute`` and ``read-to-end``, started together as the node dies, each
exit 0 with the values from before the kill."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.local import topics
from recovery.local.cluster import LocalKafkaCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
from chk_builder import checkpoint_files, write_checkpoint  # tests/checkpoint: as Spark writes it

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(3) as started:
        yield started


def test_a_command_started_as_the_leader_dies_answers_once_the_leader_moved(
    cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    topics.create_topic(bootstrap, "orders", 3, {"min.insync.replicas": "2"}, replication_factor=3)
    # written before the checkpoint's batch read them (chk_builder's batchTimestampMs): no recreation
    before_batch = 1795327200000
    records = [
        topics.Record(key=b"k%d" % i, value=b"v", partition=i % 3, timestamp_ms=before_batch)
        for i in range(90)
    ]
    topics.produce(bootstrap, "orders", records)  # acks=all: 30 per partition on at least 2 nodes
    checkpoint = write_checkpoint(tmp_path / "chk", checkpoint_files(partitions=3))  # at 30: caught up

    cluster.kill(cluster.leader_of("orders", 0))
    # every command at once, in the seconds before the controller fences the dead node
    commands = {
        "offsets": ["offsets", "-b", bootstrap, "--topic", "orders", "--output", "json"],
        "validate": ["validate", str(checkpoint), "-b", bootstrap, "--output", "json"],
        "repair": ["repair", str(checkpoint), "-b", bootstrap, "--execute", "--force", "--output", "json"],
        "read-to-end": ["read-to-end", "-b", bootstrap, "--topic", "orders", "--output", "json"],
    }
    running = {
        name: subprocess.Popen(
            [sys.executable, "-m", "recovery", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, argv in commands.items()
    }
    done = {name: process.communicate(timeout=120) for name, process in running.items()}
    for name, process in running.items():
        assert process.returncode == 0, (name, done[name][1])
        assert "Traceback" not in done[name][1], name

    rows = json.loads(done["offsets"][0])
    assert [(r["partition"], r["log_start_offset"], r["high_watermark"]) for r in rows] == [
        (0, 0, 30),
        (1, 0, 30),
        (2, 0, 30),
    ]
    report = json.loads(done["validate"][0])
    assert {(r["partition"], r["verdict"]) for r in report["partitions"]} == {(0, "OK"), (1, "OK"), (2, "OK")}
    assert json.loads(done["repair"][0])["changes"] == []
    read = json.loads(done["read-to-end"][0])
    assert sum(r["records"] for r in read) == 90
