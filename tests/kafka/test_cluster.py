"""The use cases' one seam to the cluster (``recovery.kafka.cluster``) on the real broker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from recovery.errors import NoOffsetForTime
from recovery.kafka import topic_ids
from recovery.kafka.cluster import cluster_view, first_offsets_at, time_targets, topics_matching
from recovery.kafka.config import KafkaConfig
from recovery.kafka.specs import parse_topic_partitions
from recovery.local import topics
from recovery.local.topics import Record
from recovery.model import ClusterView, Isolation, NoMatch, OffsetRange, TopicPartition


def test_cluster_view_lists_every_partition_of_existing_topics(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce: Callable[..., int], topic_name: str
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 4, partitions=2)
    gone = topic_name + "-never-created"

    view = cluster_view(kafka, [topic, gone])

    assert view == ClusterView(
        {TopicPartition(topic, 0): OffsetRange(0, 2), TopicPartition(topic, 1): OffsetRange(0, 2)},
        {topic: topic_ids(kafka, [topic])[topic] or ""},
    )
    assert view.topics() == {topic}


def test_time_targets_leave_out_missing_partitions(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    t0 = int(time.time() * 1000) - 3_600_000  # recent: the rig's retention deletes old records
    topics.produce(bootstrap, topic, [Record("k", "v0", 0, t0), Record("k", "v1", 0, t0 + 1000)])
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 5)]

    targets = time_targets(kafka, asked, t0 + 500, NoMatch.LATEST)

    assert targets == {TopicPartition(topic, 0): 1}


def test_time_targets_apply_the_no_match_policy(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Two lookups sent together (the time, and the fallback); no match: the end, the start, or fail."""
    topic = new_topic(partitions=2)
    t0 = int(time.time() * 1000) - 3_600_000
    topics.produce(bootstrap, topic, [Record("k", f"v{i}", 0, t0 + i) for i in range(4)])
    topics.delete_records(bootstrap, topic, {0: 1})
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    assert time_targets(kafka, asked, t0 + 2, NoMatch.LATEST) == {asked[0]: 2, asked[1]: 0}
    assert time_targets(kafka, asked, t0 + 9, NoMatch.LATEST) == {asked[0]: 4, asked[1]: 0}
    assert time_targets(kafka, asked, t0 + 9, NoMatch.EARLIEST) == {asked[0]: 1, asked[1]: 0}
    with pytest.raises(NoOffsetForTime):
        time_targets(kafka, asked, t0 + 9, NoMatch.FAIL)
    found = first_offsets_at(kafka, [*asked, TopicPartition(topic, 7)], t0 + 2)
    assert found == {asked[0]: 2, asked[1]: None}


def test_cluster_view_under_read_committed_ends_at_the_last_stable_offset(
    kafka: KafkaConfig, new_topic: Callable[..., str], transactional: Callable[..., Producer]
) -> None:
    topic = new_topic(partitions=1)
    producer = transactional(f"{topic}-open")
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush(30)  # offset 0, in a transaction still open

    committed = cluster_view(kafka, [topic], Isolation.READ_COMMITTED)
    uncommitted = cluster_view(kafka, [topic])

    assert committed.partitions == {TopicPartition(topic, 0): OffsetRange(0, 0)}  # the last stable offset
    assert uncommitted.partitions == {TopicPartition(topic, 0): OffsetRange(0, 1)}  # the high watermark


def test_topics_matching_a_selection(kafka: KafkaConfig, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    assert topics_matching(kafka, parse_topic_partitions(topic)) == {topic}
