"""The pre-start gate, the jobs in jobs/, starting-offsets and lag export, on the real rig."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from streaming_job import NOW, Job, offsets, tree_digest

from recovery.cli import cli
from recovery.core.model import TopicPartition
from recovery.gate import GateFailed, GateMode, prestart_gate
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets
from recovery.local import topics

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def broken_job(job, new_topic, produce, bootstrap) -> tuple[Job, str]:
    """A job whose checkpoint resumes at 100 per partition while partitions 0 and 1 now start at 110/115."""
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    produce(topic, 60, start=300, timestamp_ms=NOW)
    topics.delete_records(bootstrap, topic, {0: 110, 1: 115})
    return j, topic


def run_job(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(JOBS / script), *args], capture_output=True, text=True, timeout=600, check=False
    )


def test_gate_fail_mode_stops_the_job_before_spark_with_a_readable_report(
    job, new_topic, produce, bootstrap
) -> None:
    j, topic = broken_job(job, new_topic, produce, bootstrap)
    before = tree_digest(j.checkpoint)

    done = run_job(
        "kafka_to_delta.py", "-b", bootstrap, "--topic", topic, "--table", str(j.table),
        "--checkpoint", str(j.checkpoint),
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    assert f"{topic} [0] BELOW_LOG_START: checkpoint 100, log [110, 120): 10 records lost" in done.stderr
    assert "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE" in done.stderr
    assert "Run `stream-recovery repair" in done.stderr
    assert "SparkSession" not in done.stderr and done.stdout == ""
    assert tree_digest(j.checkpoint) == before


def test_gate_clamp_mode_refuses_over_budget_and_writes_nothing(job, new_topic, produce, bootstrap) -> None:
    j, topic = broken_job(job, new_topic, produce, bootstrap)
    before = tree_digest(j.checkpoint)

    done = run_job(
        "kafka_to_delta.py", "-b", bootstrap, "--topic", topic, "--table", str(j.table),
        "--checkpoint", str(j.checkpoint), "--gate", "clamp", "--max-loss-records", "20",
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    assert "the plan loses 25 records in all, over the budget of 20" in done.stderr
    assert tree_digest(j.checkpoint) == before


def test_gate_clamp_mode_repairs_within_budget_and_the_job_runs(job, new_topic, produce, bootstrap) -> None:
    j, topic = broken_job(job, new_topic, produce, bootstrap)

    done = run_job(
        "kafka_to_delta.py", "-b", bootstrap, "--topic", topic, "--table", str(j.table),
        "--checkpoint", str(j.checkpoint), "--gate", "clamp", "--max-loss-records", "25",
        "--available-now", "--local-rig",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{topic} [0] 100 -> 110 (lost 10, skipped 0, replayed 0)" in done.stderr
    expected = {0: [*range(100), *range(110, 120)], 1: [*range(100), *range(115, 120)], 2: range(120)}
    assert j.rows() == offsets(topic, expected)


def test_gate_warn_mode_logs_the_report_and_lets_the_job_start(
    job, new_topic, produce, bootstrap, caplog
) -> None:
    j, topic = broken_job(job, new_topic, produce, bootstrap)

    with caplog.at_level(logging.WARNING, logger="recovery.gate"):
        report = prestart_gate(str(j.checkpoint), KafkaConfig(bootstrap), mode=GateMode.WARN)

    assert report is not None and report.needs_action
    assert f"{topic} [1] BELOW_LOG_START" in caplog.text
    with pytest.raises(GateFailed):
        prestart_gate(str(j.checkpoint), KafkaConfig(bootstrap))


def test_gate_records_topic_ids_of_a_healthy_checkpoint_and_passes_a_new_query(
    job, new_topic, produce, bootstrap, tmp_path
) -> None:
    topic = new_topic(2)
    produce(topic, 20, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    kafka = KafkaConfig(bootstrap)

    assert prestart_gate(str(tmp_path / "no-checkpoint-yet"), kafka) is None
    report = prestart_gate(str(j.checkpoint), kafka)

    assert report is not None and not report.needs_action
    recorded = json.loads((j.checkpoint / "_recovery/topic-ids.json").read_text())
    assert recorded["topic_ids"] == dict(report.topic_ids) and recorded["by"] == "prestart gate"


def test_starting_offsets_from_an_old_checkpoint_move_the_query_to_a_fresh_checkpoint(
    job, new_topic, produce, bootstrap, tmp_path
) -> None:
    j, topic = broken_job(job, new_topic, produce, bootstrap)
    topics.add_partitions(bootstrap, topic, 4)

    result = CliRunner().invoke(
        cli,
        ["starting-offsets", "-b", bootstrap, "--from-checkpoint", str(j.checkpoint), "--output", "spark"],
    )

    assert result.exit_code == 0, result.output
    starting = json.loads(result.stdout)
    assert starting == {topic: {"0": 110, "1": 115, "2": 100, "3": 0}}  # every partition, clamped
    assert "startingOffsets is read only when the checkpoint location has no offsets yet" in result.stderr
    fresh = Job(j.spark, bootstrap, topic, tmp_path / "fresh", {"startingOffsets": result.stdout.strip()})
    fresh.run()
    assert fresh.rows() == offsets(topic, {0: range(110, 120), 1: range(115, 120), 2: range(100, 120)})


def test_starting_offsets_from_a_group_and_from_a_time_list_every_partition(
    new_topic, produce, bootstrap
) -> None:
    topic = new_topic(3)
    produce(topic, 30, timestamp_ms=NOW)
    produce(topic, 30, start=30, timestamp_ms=NOW + 60_000)
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    group = f"{topic}-g"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[KafkaTP(topic, 0, 7), KafkaTP(topic, 1, 4)], asynchronous=False)
    consumer.close()

    by_group = CliRunner().invoke(
        cli, ["starting-offsets", "-b", bootstrap, "--group", group, "--topic", topic, "--output", "json"]
    )
    by_time = CliRunner().invoke(
        cli, ["starting-offsets", "-b", bootstrap, "--to-datetime", str(NOW + 30_000), "--topic", topic]
    )

    assert by_group.exit_code == 0, by_group.output
    body = json.loads(by_group.stdout)
    assert body["startingOffsets"] == {topic: {"0": 7, "1": 4, "2": 0}}
    assert [(p["partition"], p["origin"]) for p in body["partitions"]] == [
        (0, f"group {group}"),
        (1, f"group {group}"),
        (2, "log start"),
    ]
    assert by_time.exit_code == 0, by_time.output
    assert f'startingOffsets={{"{topic}":{{"0":10,"1":10,"2":10}}}}' in by_time.stdout


def test_lag_export_prints_lag_and_publishes_it_to_a_monitor_group(
    job, new_topic, produce, bootstrap
) -> None:
    topic = new_topic(2)
    produce(topic, 40, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    produce(topic, 10, partitions=2, start=40, timestamp_ms=NOW)  # 5 new per partition
    group = f"{topic}-monitor"

    done = run_job("lag_export.py", str(j.checkpoint), "-b", bootstrap, "--group", group)

    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["partition"], r["position"], r["log_end"], r["lag"], r["verdict"]) for r in rows] == [
        (0, 20, 25, 5, "OK"),
        (1, 20, 25, 5, "OK"),
    ]
    assert group_offsets(KafkaConfig(bootstrap), group).offsets == {
        TopicPartition(topic, 0): 20,
        TopicPartition(topic, 1): 20,
    }
