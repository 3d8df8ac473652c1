"""The in-job listener (recovery.listener) on a real query, a real broker and Kafka's own group tool."""

from __future__ import annotations

import logging
import re
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from kafka_tools import describe_group
from pyspark.sql import SparkSession
from streaming_job import NOW
from waiting import wait_until

from recovery.checkpoint.heartbeat import read_heartbeat
from recovery.core.model import TopicPartition
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import group_offsets
from recovery.listener import QueryMonitor
from recovery.local.pipeline import start_kafka_to_delta


def test_a_running_query_shows_its_lag_in_kafka_consumer_groups_metrics_and_heartbeat(
    spark: SparkSession, bootstrap: str, new_topic, produce, tmp_path: Path
) -> None:
    topic = new_topic(2)
    produce(topic, 40, partitions=2, timestamp_ms=NOW)  # 20 per partition
    group = f"{topic}-monitor"
    checkpoint, table = str(tmp_path / "chk"), str(tmp_path / "table")
    before_ms = int(time.time() * 1000)
    monitor = QueryMonitor.attach(
        spark, checkpoint, KafkaConfig(bootstrap), group=group, interval_s=1.0, metrics_port=0
    )
    # The first batch runs at once and reads 10 records (5 per partition); the next trigger is an
    # hour away, so the query runs on with 15 records per partition still to read.
    query = start_kafka_to_delta(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        table=table,
        checkpoint=checkpoint,
        options={"maxOffsetsPerTrigger": "10"},
        processing_time="1 hour",
    )
    try:
        wait_until(lambda: monitor.batches >= 1, "the first batch's progress event", 180)
        assert query.isActive

        described = describe_group(bootstrap, group)
        processed = spark.read.format("delta").load(table).groupBy("partition").count().collect()
        per_partition = {row["partition"]: row["count"] for row in processed}
        assert per_partition == {0: 5, 1: 5}
        assert {
            (p, row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"], row["CONSUMER-ID"])
            for (_, p), row in described.items()
        } == {(0, "5", "20", "15", "-"), (1, "5", "20", "15", "-")}

        source = f"KafkaV2[Subscribe[{topic}]]"
        labels = f'partition="0",query="{query.id}",source="{source}",topic="{topic}"'
        text = monitor.metrics_text()
        assert f"stream_recovery_kafka_lag_records{{{labels}}} 15.0" in text
        assert f"stream_recovery_kafka_position{{{labels}}} 5.0" in text
        assert f'stream_recovery_input_rows_total{{query="{query.id}"}} 10.0' in text
        # The records were written at NOW; the topic keeps them 7 days (the broker's default).
        runway = re.search(rf"stream_recovery_kafka_runway_seconds\{{{re.escape(labels)}\}} (\S+)", text)
        age = re.search(
            rf"stream_recovery_kafka_oldest_unread_age_seconds\{{{re.escape(labels)}\}} (\S+)", text
        )
        assert runway and age, text
        assert 0 < float(runway[1]) <= 7 * 86400 and float(age[1]) >= 0
        assert float(runway[1]) + float(age[1]) == pytest.approx(7 * 86400, abs=1)
        assert monitor.metrics_port
        with urllib.request.urlopen(f"http://127.0.0.1:{monitor.metrics_port}/metrics", timeout=10) as page:
            assert f"stream_recovery_kafka_lag_records{{{labels}}} 15.0" in page.read().decode()

        beat = read_heartbeat(checkpoint)
        assert beat is not None
        assert (beat.state, beat.query_id, beat.run_id) == ("running", str(query.id), str(query.runId))
        assert beat.written_ms >= before_ms
    finally:
        query.stop()
        monitor.close()

    assert monitor.wait_terminated(0)
    beat = read_heartbeat(checkpoint)
    assert beat is not None and (beat.state, beat.run_id) == ("terminated", str(query.runId))


def test_sources_are_told_apart_by_description_and_a_group_with_members_is_left_alone(
    spark: SparkSession, bootstrap: str, new_topic, produce, tmp_path: Path, caplog
) -> None:
    orders, payments = new_topic(2, suffix="-orders"), new_topic(1, suffix="-payments")
    produce(orders, 12, partitions=2, timestamp_ms=NOW)
    produce(payments, 7, partitions=1, timestamp_ms=NOW)
    kafka = KafkaConfig(bootstrap)

    # Two sources (one per topic, unioned): each partition is committed, each source has its label.
    checkpoint = str(tmp_path / "chk")
    monitor = QueryMonitor.attach(spark, checkpoint, kafka, group=f"{orders}-monitor")
    query = start_kafka_to_delta(
        spark, bootstrap=bootstrap, topic=[orders, payments], table=str(tmp_path / "t"), checkpoint=checkpoint
    )
    query.awaitTermination()
    monitor.close()

    assert monitor.batches >= 1
    assert group_offsets(kafka, f"{orders}-monitor").offsets == {
        TopicPartition(orders, 0): 6,
        TopicPartition(orders, 1): 6,
        TopicPartition(payments, 0): 7,
    }
    text = monitor.metrics_text()
    for topic in (orders, payments):
        assert f'source="KafkaV2[Subscribe[{topic}]]",topic="{topic}"' in text
    caught_up = f'partition="0",query="{query.id}",source="KafkaV2[Subscribe[{payments}]]",topic="{payments}"'
    assert f"stream_recovery_kafka_runway_seconds{{{caught_up}}} +Inf" in text

    # A live consumer group is never written: the listener logs the refusal and the query goes on.
    live = f"{orders}-live"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": live,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([payments])
    try:
        wait_until(
            lambda: consumer.poll(0.5) is not None or bool(consumer.assignment()), "the consumer to join", 180
        )
        checkpoint = str(tmp_path / "chk-live")
        refused = QueryMonitor.attach(spark, checkpoint, kafka, group=live)
        with caplog.at_level(logging.WARNING, logger="recovery.listener"):
            query = start_kafka_to_delta(
                spark, bootstrap=bootstrap, topic=payments, table=str(tmp_path / "t2"), checkpoint=checkpoint
            )
            query.awaitTermination()
            refused.close()
        before = group_offsets(kafka, live)
    finally:
        consumer.close()

    assert query.exception() is None and refused.batches >= 1
    assert f"not committing to group {live}" in caplog.text
    assert before.members == 1 and before.offsets == {}
    assert 'stream_recovery_listener_errors_total{query="' in refused.metrics_text()
