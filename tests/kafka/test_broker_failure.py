"""Issue 26: a partition leader dies (SIGKILL) on a real 3-node cluster (replication factor 3) just
before a command asks for offsets. librdkafka then answers ListOffsets with no offset (-1001) until
its metadata is refreshed, which printed a traceback (``not an offset range: [-1001, -1001)``). Each
command now asks again, with fresh metadata, until the new leader answers or ``--timeout`` passes:
``offsets``, ``validate`` (with the runway), ``repair --execute``, ``read-to-end`` and ``fleet
validate``, started together as the node dies, and the in-job listener handling a batch then, each
answer right or exit 3 with one line and nothing written. Then the node comes back (restarted on its
own data) while they all run again: each answers right."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_until

from recovery.core.model import TopicPartition
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets
from recovery.listener import QueryMonitor
from recovery.local import topics
from recovery.local.cluster import LocalKafkaCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
from chk_builder import checkpoint_files, tree, write_checkpoint  # tests/checkpoint: as Spark writes it

pytestmark = pytest.mark.integration


ENDS = {TopicPartition("orders", p): 30 for p in range(3)}  # where every partition's log ends


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(3) as started:
        yield started


def progress(batch: int, end: int) -> dict[str, object]:
    """A batch of the monitored query (StreamingQueryProgress.json), read up to ``end`` in each partition."""
    return {
        "id": "9d2f6c1a-5b7e-4c3d-8e1f-2a4b6c8d0e1f",
        "runId": "1c3e5a7b-9d0f-4b2d-8c6e-0a1b2c3d4e5f",
        "batchId": batch,
        "numInputRows": 90 if batch == 0 else 0,
        "sources": [
            {
                "description": "KafkaV2[Subscribe[orders]]",
                "endOffset": {"orders": {str(tp.partition): end for tp in ENDS}},
                "numInputRows": 90 if batch == 0 else 0,
            }
        ],
        "sink": {"description": "DeltaSink[/lake/orders]", "numOutputRows": 0},
    }


def lags(monitor: QueryMonitor) -> dict[int, float]:
    """The listener's lag per partition, as it exports it."""
    return {
        int(sample.labels["partition"]): sample.value
        for family in text_string_to_metric_families(monitor.metrics_text())
        if family.name == "stream_recovery_kafka_lag_records"
        for sample in family.samples
    }


def start_all(commands: dict[str, list[str]]) -> dict[str, subprocess.Popen[str]]:
    """Every command at once, each in a process of its own."""
    return {
        name: subprocess.Popen(
            [sys.executable, "-m", "recovery", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, argv in commands.items()
    }


def results(running: dict[str, subprocess.Popen[str]]) -> dict[str, tuple[int, str, str]]:
    """Each command's (exit code, stdout, stderr); none is left running, whatever happens."""
    try:
        done = {name: process.communicate(timeout=150) for name, process in running.items()}
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
    return {name: (process.returncode, *done[name]) for name, process in running.items()}


def test_a_command_started_as_the_leader_dies_answers_once_the_leader_moved(
    cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    # Written before the checkpoint's batch read them (chk_builder's batchTimestampMs): no recreation.
    # That is a fixed day (2026-11-22): kept whatever their age (retention.ms=7 days deleted them).
    before_batch = 1795327200000
    kept = {"min.insync.replicas": "2", "retention.ms": "-1"}
    topics.create_topic(bootstrap, "orders", 3, kept, replication_factor=3)
    records = [
        topics.Record(key=b"k%d" % i, value=b"v", partition=i % 3, timestamp_ms=before_batch)
        for i in range(90)
    ]
    topics.produce(bootstrap, "orders", records)  # acks=all: 30 per partition on at least 2 nodes
    checkpoint = write_checkpoint(tmp_path / "chk", checkpoint_files(partitions=3))  # at 30: caught up

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "fleet.toml").write_text(
        f'[cluster.c]\nbootstrap_servers = "{bootstrap}"\n\n'
        f'[job.orders]\ncluster = "c"\ncheckpoint = "{checkpoint}"\n'
    )
    # The listener keeps a heartbeat in its checkpoint: a checkpoint of its own, not the commands'.
    monitored = write_checkpoint(tmp_path / "monitored", checkpoint_files(partitions=3))
    monitor = QueryMonitor(
        str(monitored), KafkaConfig(bootstrap), group="orders-monitor", query_id=str(progress(0, 30)["id"])
    )
    try:
        run_through_a_death_and_a_restart(cluster, bootstrap, checkpoint, conf, monitor)
    finally:
        monitor.close(timeout_s=0)


def run_through_a_death_and_a_restart(
    cluster: LocalKafkaCluster, bootstrap: str, checkpoint: Path, conf: Path, monitor: QueryMonitor
) -> None:

    before_commands = tree(checkpoint)
    killed = cluster.leader_of("orders", 0)
    cluster.kill(killed)
    # every command at once, in the seconds before the controller fences the dead node
    commands = {
        "offsets": ["offsets", "-b", bootstrap, "--topic", "orders", "--output", "json"],
        "validate": ["validate", str(checkpoint), "-b", bootstrap, "--output", "json"],
        "repair": ["repair", str(checkpoint), "-b", bootstrap, "--execute", "--force", "--output", "json"],
        "read-to-end": ["read-to-end", "-b", bootstrap, "--topic", "orders", "--output", "json"],
        "fleet validate": ["fleet", "validate", str(conf), "--output", "json"],
    }
    listener = threading.Thread(target=monitor.on_progress, args=(progress(0, 30),))
    listener.start()
    done = results(start_all(commands))
    listener.join(120)
    assert not listener.is_alive()
    # Each command either answers (the values from before the kill) or, when no leader answered
    # within --timeout, exits 3 with one line and nothing written: never a traceback, a wrong
    # verdict or a partial answer (issue 26's bar). Which one depends on how fast the cluster moves
    # the leader under the machine's load.
    answered = set()
    for name, (code, out, err) in done.items():
        assert "Traceback" not in err, (name, err)
        assert code in (0, 3), (name, code, err)
        if code == 0:
            answered.add(name)
        elif name == "fleet validate":  # its row says why
            [row] = json.loads(out)
            assert row["verdict"] == "UNREACHABLE" and "\n" not in row["detail"], row
        else:
            assert out == "" and err.startswith("Error: ") and err.count("\n") == 1, (name, err)
            assert "no answer from the Kafka cluster" in err, err
    assert tree(checkpoint) == before_commands or "repair" in answered  # exit 3 wrote nothing
    assert_right(answered, {name: out for name, (_, out, _) in done.items()})
    # The listener's batch: its lag right where it has one, its commit whole or not made.
    assert set(lags(monitor).values()) <= {0.0}, lags(monitor)

    # Once every partition has a live leader again, every command answers.
    def moved() -> bool:
        try:
            return all(cluster.leader_of("orders", p) not in (killed, -1) for p in range(3))
        except KafkaException:
            return False  # the metadata itself did not come in time

    wait_until(moved, "a live leader for every partition", 90, every_s=1)
    committed = group_offsets(KafkaConfig(bootstrap), "orders-monitor").offsets
    assert committed in ({}, ENDS), committed  # never a part of the batch's partitions

    # The dead node comes back on its own data while everything runs again: all answer. (Started
    # from this thread: the node is killed when the thread that started it ends, PR_SET_PDEATHSIG.)
    # A longer --timeout (fleet validate's is in its conf): the restarting JVM competes for the cores.
    fleet = conf / "fleet.toml"
    fleet.write_text(fleet.read_text().replace("[job.orders]", 'timeout = "90s"\n\n[job.orders]'))
    longer = {n: a if n == "fleet validate" else [*a, "--timeout", "90"] for n, a in commands.items()}
    running = start_all(longer)
    # The query's next batch ends at 25: five records behind in each partition (not what the
    # first batch left, so the lag and the commit below are this batch's).
    listener = threading.Thread(target=monitor.on_progress, args=(progress(1, 25),))
    listener.start()
    cluster.restart(killed)
    again = results(running)
    listener.join(120)
    assert not listener.is_alive()
    for name, (code, _, err) in again.items():
        assert code == 0 and "Traceback" not in err, (name, code, err)
    assert_right(set(commands), {name: out for name, (_, out, _) in again.items()})
    assert lags(monitor) == {0: 5.0, 1: 5.0, 2: 5.0}
    assert group_offsets(KafkaConfig(bootstrap), "orders-monitor").offsets == dict.fromkeys(ENDS, 25)


def assert_right(answered: set[str], out: dict[str, str]) -> None:
    """What each command that answered says: the cluster as it was before the kill."""
    if "offsets" in answered:
        rows = json.loads(out["offsets"])
        assert [(r["partition"], r["log_start_offset"], r["high_watermark"]) for r in rows] == [
            (0, 0, 30),
            (1, 0, 30),
            (2, 0, 30),
        ]
    if "validate" in answered:
        report = json.loads(out["validate"])
        assert {(r["partition"], r["verdict"]) for r in report["partitions"]} == {
            (0, "OK"),
            (1, "OK"),
            (2, "OK"),
        }
    if "repair" in answered:
        assert json.loads(out["repair"])["changes"] == []
    if "read-to-end" in answered:
        assert sum(r["records"] for r in json.loads(out["read-to-end"])) == 90
    if "fleet validate" in answered:
        [row] = json.loads(out["fleet validate"])
        assert (row["verdict"], row["partitions"], row["records_lost"]) == ("OK", 3, 0), row
