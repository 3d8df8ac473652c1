"""jobs/kafka_to_delta.py on a real standalone Spark cluster (master + worker), submitted with
spark-submit, gate and listener active; Kafka's own group tool sees the job's lag while it runs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka_tools import describe_group
from streaming_job import NOW

from recovery.checkpoint.heartbeat import read_heartbeat
from recovery.core.model import TopicPartition
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets
from recovery.local.spark_cluster import LocalSparkCluster

JOBS = Path(__file__).resolve().parents[2] / "jobs"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSparkCluster]:
    with LocalSparkCluster() as running:
        yield running


def wait_until(condition: Callable[[], bool], what: str, job: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 300
    while not condition():
        assert job.poll() is None, f"the job exited ({job.returncode}) while waiting for {what}:\n{tail(log)}"
        assert time.monotonic() < deadline, f"gave up waiting for {what}:\n{tail(log)}"
        time.sleep(1)


def driver_python(pid: int) -> int:
    """The job's Python process: spark-submit's JVM runs the script as a child (PythonRunner), and the
    SparkContext lives in that JVM, so a signal to the JVM stops Spark before Python can stop the query."""
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in map(int, children.read_text().split()):
            if "kafka_to_delta.py" in Path(f"/proc/{child}/cmdline").read_text(errors="replace"):
                return child
    raise AssertionError(f"no kafka_to_delta.py process under spark-submit (pid {pid})")


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def test_the_job_runs_on_a_standalone_cluster_and_its_monitor_group_shows_its_lag(
    cluster: LocalSparkCluster, bootstrap: str, new_topic, produce, tmp_path: Path
) -> None:
    topic = new_topic(2)
    produce(topic, 30, partitions=2, timestamp_ms=NOW)
    group = f"{topic}-monitor"
    checkpoint, table, log = str(tmp_path / "chk"), str(tmp_path / "table"), tmp_path / "job.log"
    kafka = KafkaConfig(bootstrap)

    def committed() -> dict[TopicPartition, int]:
        return dict(group_offsets(kafka, group).offsets)

    command = cluster.submit_command(
        JOBS / "kafka_to_delta.py",
        "-b", bootstrap, "--topic", topic, "--table", table, "--checkpoint", checkpoint,
        "--gate", "clamp", "--max-loss-records", "0",
        "--monitor-group", group, "--heartbeat-interval", "1", "--trigger-interval", "2 seconds",
    )  # fmt: skip
    with log.open("w") as out:
        job = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, text=True, env=cluster.submit_env()
        )
    try:
        wait_until(
            lambda: committed() == {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 15},
            "the first records to be committed to the monitor group",
            job,
            log,
        )
        apps = cluster.status()["activeapps"]
        assert isinstance(apps, list) and [app["name"] for app in apps] == ["kafka-to-delta"]

        produce(topic, 10, partitions=2, start=30, timestamp_ms=NOW)  # 5 more per partition
        wait_until(
            lambda: committed() == {TopicPartition(topic, 0): 20, TopicPartition(topic, 1): 20},
            "the new records to be committed",
            job,
            log,
        )
        described = describe_group(bootstrap, group)
        beat = read_heartbeat(checkpoint)
    finally:
        with contextlib.suppress(AssertionError, OSError):  # already gone: nothing to stop
            os.kill(driver_python(job.pid), signal.SIGTERM)
        try:
            job.wait(timeout=180)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()

    assert {
        (p, row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"], row["CONSUMER-ID"])
        for (_, p), row in described.items()
    } == {(0, "20", "20", "0", "-"), (1, "20", "20", "0", "-")}
    assert beat is not None and beat.state == "running"
    output = log.read_text()
    assert job.returncode == 0, tail(log)
    assert "% gate passed: new query" in output
    assert "% SIGTERM: stopping the query after its current batch" in output
    assert f"committed to group {group}" in output
    assert DeltaTable(table).to_pyarrow_table().num_rows == 40
    stopped = read_heartbeat(checkpoint)
    assert stopped is not None and (stopped.state, stopped.run_id) == ("terminated", beat.run_id)
