"""What the in-job listener reads from a progress event, without Spark or Kafka (recovery.listener)."""

from __future__ import annotations

import json
import logging

import pytest

from recovery.core.model import TopicPartition
from recovery.kafka.config import KafkaConfig
from recovery.listener import PartitionLagNow, QueryMonitor, parse_kafka_offsets, parse_progress

# The shape of StreamingQueryProgress.json (Spark 4.2) for a query that unions two Kafka sources and
# reads a rate source too; "orders" [0] is read by two sources.
PROGRESS = {
    "id": "8f0c7c1e-1d6b-4f5e-9a43-6f2f0f1f6a01",
    "runId": "0b7e7a52-5d0d-4f2a-a7a4-3f3c2b0e9c11",
    "name": None,
    "timestamp": "2026-11-23T14:20:00.000Z",
    "batchId": 7,
    "numInputRows": 30,
    "inputRowsPerSecond": 12.5,
    "processedRowsPerSecond": 40.0,
    "sources": [
        {
            "description": "KafkaV2[Subscribe[orders]]",
            "startOffset": {"orders": {"0": 10, "1": 4}},
            "endOffset": {"orders": {"0": 20, "1": 9}},
            "latestOffset": {"orders": {"0": 25, "1": 9}},
            "numInputRows": 15,
            "inputRowsPerSecond": 6.0,
            "processedRowsPerSecond": 20.0,
            "metrics": {"avgOffsetsBehindLatest": "2.5"},
        },
        {
            "description": "KafkaV2[SubscribePattern[ord.*]]",
            "endOffset": '{"orders": {"0": 18}, "orders-eu": {"0": 3}}',
            "numInputRows": 10,
        },
        {"description": "RateStreamV2[rowsPerSecond=1]", "endOffset": 123, "numInputRows": 5},
    ],
    "sink": {"description": "DeltaSink[/lake/orders]", "numOutputRows": 30},
}


def test_kafka_sources_are_read_by_description_and_the_furthest_behind_speaks_for_a_shared_partition() -> (
    None
):
    batch = parse_progress(PROGRESS)

    assert [s.description for s in batch.sources] == [
        "KafkaV2[Subscribe[orders]]",
        "KafkaV2[SubscribePattern[ord.*]]",
    ]
    assert (batch.batch_id, batch.input_rows, batch.processed_rows_per_s) == (7, 30, 40.0)
    assert batch.sources[0].input_rows_per_s == 6.0 and batch.sources[1].input_rows_per_s is None
    assert batch.positions() == {
        TopicPartition("orders", 0): 18,
        TopicPartition("orders", 1): 9,
        TopicPartition("orders-eu", 0): 3,
    }
    assert batch.skipped == ()


def test_a_malformed_end_offset_skips_that_source_and_says_why() -> None:
    progress = json.loads(json.dumps(PROGRESS))
    progress["sources"][0]["endOffset"] = {"orders": {"0": "twenty"}}
    progress["sources"][1]["endOffset"] = "not json"

    batch = parse_progress(progress)

    assert batch.sources == ()
    assert batch.skipped == (
        "KafkaV2[Subscribe[orders]] endOffset: orders [0] has offset 'twenty', not an integer",
        "KafkaV2[SubscribePattern[ord.*]] endOffset: not JSON",
    )
    with pytest.raises(ValueError, match="x: not a"):
        parse_kafka_offsets("[1]", where="x")


def test_lag_counts_deleted_records_and_the_commit_moves_into_the_log() -> None:
    behind = PartitionLagNow(TopicPartition("t", 0), position=5, log_start=12, log_end=30)
    ahead = PartitionLagNow(TopicPartition("t", 1), position=30, log_start=0, log_end=30)

    assert (behind.lag, behind.deleted_unread, behind.commit_offset) == (25, 7, 12)
    assert (ahead.lag, ahead.deleted_unread, ahead.commit_offset) == (0, 0, 30)


def test_events_of_other_queries_are_ignored_and_a_failing_step_is_logged_not_raised(caplog) -> None:
    monitor = QueryMonitor("/nonexistent/chk", KafkaConfig("127.0.0.1:1"), query_id="mine")

    monitor.on_progress({**PROGRESS, "id": "someone-else"})
    assert monitor.batches == 0

    with caplog.at_level(logging.WARNING, logger="recovery.listener"):
        monitor.on_progress({**PROGRESS, "id": "mine", "sources": "not a list"})

    assert "listener progress (query mine) failed" in caplog.text
    assert 'stream_recovery_listener_errors_total{query="mine",step="progress"} 1.0' in monitor.metrics_text()


def test_each_monitor_has_its_own_registry() -> None:
    first, second = (QueryMonitor("/chk", KafkaConfig("127.0.0.1:1"), query_id=q) for q in ("a", "b"))

    first.on_progress({**PROGRESS, "id": "a", "sources": "not a list"})

    assert 'query="a"' in first.metrics_text() and 'query="a"' not in second.metrics_text()
