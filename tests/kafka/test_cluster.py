"""The use cases' one seam to the cluster (``recovery.kafka.cluster``) on the real broker."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from confluent_kafka import Producer

from recovery.core.model import ClusterView, Isolation, NoMatch, OffsetRange, TopicPartition
from recovery.core.specs import parse_topic_partitions
from recovery.errors import NoOffsetForTime
from recovery.kafka import topic_ids
from recovery.kafka.admin import admin_for
from recovery.kafka.cluster import (
    cluster_view,
    cluster_with_times,
    first_offsets_at,
    first_offsets_at_times,
    time_targets,
    topics_matching,
)
from recovery.kafka.config import KafkaConfig
from recovery.local import topics
from recovery.local.topics import Record


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
    # one round gives both: the ends a read_committed reader sees, and the high watermarks
    both, _ = cluster_with_times(kafka, [topic], Isolation.READ_COMMITTED, {})
    assert both.partitions == committed.partitions and both.isolation is Isolation.READ_COMMITTED
    assert both.high_watermarks == {TopicPartition(topic, 0): 1}


def test_cluster_with_times_answers_time_lookups_in_the_same_round(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], topic_name: str
) -> None:
    """The view as cluster_view gives it, plus per timestamp the first offset at or after it (None:
    no record that new); partitions that do not exist are left out."""
    topic = new_topic(partitions=2)
    t0 = int(time.time() * 1000) - 3_600_000
    topics.produce(bootstrap, topic, [Record("k", f"v{i}", 0, t0 + i) for i in range(4)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    asked = {
        t0 + 2: [tp0, tp1, TopicPartition(topic, 7)],
        t0 + 9: [tp0],
        t0: [TopicPartition(topic_name + "-x", 0)],
    }

    view, found = cluster_with_times(kafka, [topic], Isolation.READ_UNCOMMITTED, asked)

    assert view == cluster_view(kafka, [topic])
    assert found == {t0 + 2: {tp0: 2, tp1: None}, t0 + 9: {tp0: None}}
    # asked on their own (each partition with its own time; tp0 twice: in two lookups), the same
    alone = first_offsets_at_times(kafka, asked)
    assert alone == {t0 + 2: {tp0: 2, tp1: None}, t0 + 9: {tp0: None}, t0: {}}


def test_timestamp_types_name_whose_clock_stamps_the_records(
    kafka: KafkaConfig, new_topic: Callable[..., str]
) -> None:
    producer_clock = new_topic(partitions=1)
    broker_clock = new_topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"}, suffix="-lat")
    types = admin_for(kafka).timestamp_types([producer_clock, broker_clock])
    assert types == {producer_clock: "CreateTime", broker_clock: "LogAppendTime"}


def test_topics_matching_a_selection(kafka: KafkaConfig, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    assert topics_matching(kafka, parse_topic_partitions(topic)) == {topic}


@pytest.mark.parametrize("times_after_ranges", [False, True], ids=["with-ranges", "after-ranges"])
def test_cluster_for_finds_records_newer_than_the_batch_below_the_position(
    kafka: KafkaConfig,
    bootstrap: str,
    new_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    times_after_ranges: bool,
) -> None:
    """Recreation evidence for topics whose ids were never recorded, read in the same round as the
    ranges (or, beyond TIMES_WITH_RANGES_MAX partitions, after them, where a record below the
    position exists): the first record newer than the batch (plus the clock-skew allowance);
    where none is, the log end; partitions whose log starts at the position are not judged."""
    from recovery import resume
    from recovery.core.model import CheckpointFile, CheckpointView, SourcePosition
    from recovery.resume import CLOCK_SKEW_ALLOWANCE_MS, cluster_for

    if times_after_ranges:
        monkeypatch.setattr(resume, "TIMES_WITH_RANGES_MAX", 0)

    topic = new_topic(partitions=3)
    batch_ms = int(time.time() * 1000) - 3_600_000
    late = batch_ms + CLOCK_SKEW_ALLOWANCE_MS + 60_000  # written (stamped) well after the batch
    records = [Record("k", f"v{i}", 0, late) for i in range(3)]  # partition 0: all newer
    records += [Record("k", f"v{i}", 1, batch_ms - 1000) for i in range(3)]  # partition 1: older
    topics.produce(bootstrap, topic, records)
    # LogAppendTime: the broker stamps the records now, an hour after the batch
    broker_clock = new_topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"}, suffix="-lat")
    topics.produce(bootstrap, broker_clock, [Record("k", "v", 0, batch_ms - 1000)] * 2)
    lat = TopicPartition(broker_clock, 0)
    tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))
    source = SourcePosition(
        "0", CheckpointFile.parse("offsets/4"), {tp0: 2, tp1: 2, tp2: 0, lat: 2}, start_read_by_ms=batch_ms
    )
    view = CheckpointView("/chk", "q", 5, False, (source,))

    cluster = cluster_for(kafka, view)

    assert cluster.partitions[tp0] == cluster.partitions[tp1] == OffsetRange(0, 3)
    assert cluster.partitions[tp2] == OffsetRange(0, 0) and cluster.partitions[lat] == OffsetRange(0, 2)
    # tp2 is not judged: its log starts at the position
    assert cluster.newer_than_read == {("0", tp0): 0, ("0", tp1): 3, ("0", lat): 0}
    assert cluster.timestamp_types == {topic: "CreateTime", broker_clock: "LogAppendTime"}
    ids = {topic: "x", broker_clock: "y"}
    recorded = cluster_for(kafka, replace(view, recorded_topic_ids=ids))
    assert recorded.newer_than_read == {}  # ids recorded: they tell, not timestamps


def test_kept_time_answers_are_used_only_while_the_cluster_shows_them_true(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """fleet serve keeps the recreation evidence's time lookups across rounds (FirstOffsetCache):
    each round's views equal those read without it; a lookup is left out once its answer is known
    to hold, and asked again once records are appended (no record that new) or deleted past it."""
    from recovery import resume
    from recovery.core.model import CheckpointFile, CheckpointView, SourcePosition
    from recovery.kafka.cluster import ClusterMemory
    from recovery.resume import CLOCK_SKEW_ALLOWANCE_MS, cluster_for, clusters_for

    asked: list[set[TopicPartition]] = []  # by round: the time lookups sent (with the ranges, or after)
    recording = [False]
    with_ranges, after = resume.cluster_with_times, resume.first_offsets_at_times

    def spied(*args: object) -> object:
        if recording[0]:
            asked[-1].update(tp for tps in args[3].values() for tp in tps)  # type: ignore[attr-defined]
        return with_ranges(*args)  # type: ignore[arg-type]

    def spied_after(*args: object) -> object:
        if recording[0]:
            asked[-1].update(tp for tps in args[1].values() for tp in tps)  # type: ignore[attr-defined]
        return after(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(resume, "cluster_with_times", spied)
    monkeypatch.setattr(resume, "first_offsets_at_times", spied_after)
    topic = new_topic(partitions=2)
    batch_ms = int(time.time() * 1000) - 3_600_000
    late = batch_ms + CLOCK_SKEW_ALLOWANCE_MS + 60_000
    old, newer = TopicPartition(topic, 0), TopicPartition(topic, 1)
    topics.produce(bootstrap, topic, [Record("k", "v", 0, batch_ms - 1000)] * 3)  # none that new
    topics.produce(bootstrap, topic, [Record("k", "v", 1, late)] * 4)  # the first is that new
    # the checkpoint is past the end of partition 0: a record appended there may become evidence
    source = SourcePosition(
        "0", CheckpointFile.parse("offsets/4"), {old: 5, newer: 3}, start_read_by_ms=batch_ms
    )
    view = CheckpointView("/chk", "q", 5, False, (source,))
    known = ClusterMemory()

    def round_() -> ClusterView:
        alone = cluster_for(kafka, view)
        asked.append(set())
        recording[0] = True
        (kept,) = clusters_for(kafka, [view], Isolation.READ_UNCOMMITTED, known)
        recording[0] = False
        assert kept == alone  # as read without the kept answers
        return kept

    first = round_()
    assert first.newer_than_read == {("0", old): 3, ("0", newer): 0}
    round_()  # "none that new" is asked once more: the end read beside a lookup may be newer than it saw
    assert asked == [{old, newer}, {old}]
    round_()
    assert asked[-1] == set()  # both answers known to hold
    topics.produce(bootstrap, topic, [Record("k", "v", 0, late)])  # records below the position now
    grown = round_()
    assert asked[-1] == {old}
    assert grown.newer_than_read[("0", old)] == 3  # evidence: record 3 is newer than the batch
    topics.delete_records(bootstrap, topic, {1: 2})  # past the answer 0
    deleted = round_()
    assert newer in asked[-1] and deleted.newer_than_read[("0", newer)] == 2


def test_kept_descriptions_are_used_only_while_the_offsets_show_the_same_topic(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """fleet serve keeps topic descriptions for up to 5 minutes (TopicCache): a topic recreated
    meanwhile is told at once by its offsets going back (its new id read, as without the cache); a
    partition added is seen once the description is that old."""
    from recovery.kafka.cluster import TopicCache

    topic = new_topic(partitions=2)
    topics.produce(bootstrap, topic, [Record("k", "v", p, None) for p in (0, 1) for _ in range(3)])
    now = [0.0]
    known = TopicCache(max_age_s=300, clock=lambda: now[0])

    def read() -> ClusterView:
        kept, _ = cluster_with_times(kafka, [topic], Isolation.READ_UNCOMMITTED, {}, known)
        return kept

    first = read()
    assert first == cluster_view(kafka, [topic])
    assert read() == first  # described once: the second read uses the description
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    topics.produce(bootstrap, topic, [Record("k", "v", 0, None)])
    recreated = read()
    assert recreated.topic_ids[topic] != first.topic_ids[topic]
    assert recreated == cluster_view(kafka, [topic])
    topics.add_partitions(bootstrap, topic, 3)
    assert TopicPartition(topic, 2) not in read().partitions  # the description is 0 s old
    now[0] = 300.0
    assert read() == cluster_view(kafka, [topic])  # described again: the third partition
    topics.add_partitions(bootstrap, topic, 4)
    assert TopicPartition(topic, 3) not in read().partitions
    # at once where a checkpoint names the new partition (a running query read it already)
    new = [TopicPartition(topic, 3)]
    named, _ = cluster_with_times(kafka, [topic], Isolation.READ_UNCOMMITTED, {}, known, new)
    assert named == cluster_view(kafka, [topic])
