"""Issue 25: Real-Time Mode (``trigger(realTime=...)``, Spark 4.1+), run by real Spark on the rig.

A Kafka -> Kafka query (Real-Time Mode supports no Delta sink) reads a topic, stops, and retention
deletes records below its position. ``validate --real-time`` predicts what Spark then does, which is
not what a micro-batch restart does: the task's consumer fails with ``OffsetOutOfRangeException``,
and with failOnDataLoss=false too (recovery.core.real_time). After the clamp repair the query reads
on from the log start: the output topic gets exactly the records still in Kafka, once.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from streaming_job import NOW

from recovery.cli import cli
from recovery.core.real_time import OUT_OF_RANGE
from recovery.local import topics
from recovery.local.spark import error_conditions

pytestmark = [pytest.mark.fidelity, pytest.mark.spark_since("4.1")]  # Real-Time Mode came in 4.1


def start(
    spark: SparkSession, bootstrap: str, source: str, sink: str, checkpoint: Path, **options: str
) -> StreamingQuery:
    """The query: every record of ``source`` to ``sink`` as ``partition:offset``, in Real-Time Mode."""
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS key",
            "CONCAT(CAST(partition AS STRING), ':', CAST(offset AS STRING)) AS value",
        )
    )
    writer = (
        frame.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("update")
    )
    # trigger(realTime=...) as pyspark 4.2 sets it: pyspark 4.1 has Real-Time Mode in the JVM only
    trigger = spark.sparkContext._jvm.org.apache.spark.sql.streaming.Trigger  # type: ignore[union-attr]
    writer._jwrite = writer._jwrite.trigger(trigger.RealTime("5 seconds"))
    return writer.start()


def written(bootstrap: str, topic: str) -> list[str]:
    """Every value in partition 0 of ``topic``, in order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "rtm-check", "enable.auto.commit": False}
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + 30
        while len(values) < end and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        assert len(values) == end, f"read {len(values)} of the {end} records of {topic}"
        return values
    finally:
        consumer.close()


def committed_end(checkpoint: Path, topic: str) -> dict[int, int] | None:
    """The end offsets of the last batch whose offsets and commit files are both written."""
    done = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")}
    done &= {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}
    if not done:
        return None
    last = (checkpoint / "offsets" / str(max(done))).read_text().splitlines()[-1]
    return {int(p): int(o) for p, o in json.loads(last)[topic].items()}


def run_until(query: StreamingQuery, done: Any, seconds: float = 90) -> None:
    """Let ``query`` run until ``done()``, then stop it (it must not fail meanwhile)."""
    try:
        deadline = time.monotonic() + seconds
        while not done():
            assert time.monotonic() < deadline, "the Real-Time Mode query did not get there in time"
            assert not query.awaitTermination(0.5), "the query ended on its own"
    finally:
        query.stop()


def restart_failure(query: StreamingQuery) -> list[tuple[str, str | None, str]]:
    """The cause chain the restarted query fails with (it must fail within a minute)."""
    try:
        ended = query.awaitTermination(60)
        raise AssertionError(f"the query {'ended' if ended else 'still runs'} without failing")
    except StreamingQueryException as exc:
        return error_conditions(exc)
    finally:
        query.stop()


def cli_json(*args: str, expect: int) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert result.exit_code == expect, result.output
    return dict(json.loads(result.stdout))


def test_a_retention_loss_in_real_time_mode_is_predicted_and_repaired(
    spark: SparkSession, bootstrap: str, new_topic: Any, produce: Any, tmp_path: Path
) -> None:
    source, sink = new_topic(2), new_topic(1, suffix="-out")
    checkpoint = tmp_path / "checkpoint"
    produce(source, 40, partitions=2, timestamp_ms=NOW)  # offsets 0..19 in each partition

    # Run until a committed batch has read all 40 (Real-Time Mode writes offsets/N at a batch's end).
    query = start(spark, bootstrap, source, sink, checkpoint)
    run_until(query, lambda: committed_end(checkpoint, source) == {0: 20, 1: 20})
    assert sorted(written(bootstrap, sink)) == sorted(f"{p}:{o}" for p in (0, 1) for o in range(20))

    produce(source, 20, partitions=2, start=40, timestamp_ms=NOW)  # 20..29 in each
    topics.delete_records(bootstrap, source, {0: 25})  # 20..24 of partition 0 never read: lost

    common = ("validate", str(checkpoint), "-b", bootstrap, "--no-runway")
    micro = {(r["partition"]): r for r in cli_json(*common, expect=1)["partitions"]}
    report = cli_json(*common, "--real-time", expect=1)
    assert report["real_time"] is True
    rows = {r["partition"]: r for r in report["partitions"]}
    assert (rows[0]["verdict"], rows[0]["records_lost"], rows[0]["spark_error"]) == (
        "BELOW_LOG_START",
        5,
        OUT_OF_RANGE,
    )
    # micro-batch words: KAFKA_DATA_LOSS, or 5 skipped with failOnDataLoss=false; here it fails either way
    assert (micro[0]["spark_error"], micro[0]["silently_skipped"]) == (
        "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE",
        5,
    )
    assert rows[0]["silently_skipped"] == 0
    assert (rows[1]["verdict"], rows[1]["spark_error"]) == ("OK", None)

    # Spark, as predicted: the consumer fails on offset 20 of partition 0, failOnDataLoss true or false.
    for name, options in (("strict", {}), ("lenient", {"failOnDataLoss": "false"})):
        copy = tmp_path / name
        shutil.copytree(checkpoint, copy)
        chain = restart_failure(start(spark, bootstrap, source, sink, copy, **options))
        assert any(OUT_OF_RANGE in cls or OUT_OF_RANGE in message for cls, _, message in chain), (name, chain)
        assert any(f"{source}-0" in message for _, _, message in chain), (name, chain)
    # Each task of Real-Time Mode runs on its own: before partition 0's failed the query, partition
    # 1's may have written some of its records (a Kafka sink is at-least-once); nothing else.
    failed_runs = written(bootstrap, sink)[40:]
    assert set(failed_runs) <= {f"1:{o}" for o in range(20, 30)}, failed_runs
    before = 40 + len(failed_runs)

    # Repair (clamp up to the log start), then Spark reads on: 25..29 of partition 0, 20..29 of partition 1.
    plan = cli_json("repair", str(checkpoint), "-b", bootstrap, "--execute", "--active-within", "0", expect=0)
    assert {(m["partition"], m["old"], m["new"], m["lost"]) for m in plan["moves"]} == {(0, 20, 25, 5)}
    query = start(spark, bootstrap, source, sink, checkpoint)
    run_until(query, lambda: committed_end(checkpoint, source) == {0: 30, 1: 30})
    new = written(bootstrap, sink)[before:]
    assert sorted(new) == sorted([*(f"0:{o}" for o in range(25, 30)), *(f"1:{o}" for o in range(20, 30))])
