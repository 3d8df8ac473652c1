"""Reading partitions to their snapshot end on the real broker (``recovery.kafka.read``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from recovery.cli import cli
from recovery.core.model import Isolation, OffsetRange, TopicPartition
from recovery.errors import KafkaUnavailable, TopicNotFound
from recovery.kafka import LogReader, PartitionRead, read_to_end
from recovery.kafka.config import KafkaConfig
from recovery.local import topics

# Topics holding records with fixed, past timestamps keep them: the rig checks retention every second.
KEEP = {"retention.ms": "-1"}


def transactions(kafka: KafkaConfig, topic: str, transactional: Callable[..., Producer]) -> None:
    """[0]: 3 committed records (0-2) + marker (3), 2 aborted (4-5) + marker (6), 1 open (7).

    The committed records carry fixed timestamps (2026-11-18), older than the default retention
    since 2026-11-25: ``topic`` must be created with :data:`KEEP`."""
    producer = transactional(f"{topic}-a")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(
            topic, key=b"k", value=b"committed-%d" % i, partition=0, timestamp=1_795_000_000_000 + i
        )
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, key=b"k", value=b"aborted-%d" % i, partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    # Another producer's record could otherwise take offset 6, before the abort marker.
    topics.wait_for_markers(kafka.bootstrap_servers, topic, 0, 7)
    opened = transactional(f"{topic}-open")
    opened.begin_transaction()
    opened.produce(topic, key=b"k", value=b"open", partition=0)
    opened.flush(30)


def test_read_committed_stops_at_the_last_stable_offset(
    kafka: KafkaConfig, new_topic: Callable[..., str], transactional: Callable[..., Producer]
) -> None:
    topic = new_topic(partitions=2, config=KEEP)  # [1] stays empty
    transactions(kafka, topic, transactional)
    starts: dict[TopicPartition, int | None] = {
        TopicPartition(topic, 0): None,
        TopicPartition(topic, 1): None,
    }

    records, summary = read_to_end(kafka, starts, Isolation.READ_COMMITTED, deadline_s=20)
    dirty, dirty_summary = read_to_end(kafka, starts, Isolation.READ_UNCOMMITTED, deadline_s=20)

    assert [r.value for r in records] == [b"committed-0", b"committed-1", b"committed-2"]
    assert [r.offset for r in records] == [0, 1, 2]
    assert summary == {
        TopicPartition(topic, 0): PartitionRead(
            TopicPartition(topic, 0), 0, 7, 3, 1_795_000_000_000, 1_795_000_000_002
        ),
        TopicPartition(topic, 1): PartitionRead(TopicPartition(topic, 1), 0, 0),
    }
    # read_uncommitted sees the aborted and the open records, up to the high watermark.
    assert [r.value for r in dirty] == [
        b"committed-0",
        b"committed-1",
        b"committed-2",
        b"aborted-0",
        b"aborted-1",
        b"open",
    ]
    assert dirty_summary[TopicPartition(topic, 0)].end == 8


def test_reading_from_a_committed_transaction_ends_past_its_marker(
    kafka: KafkaConfig, new_topic: Callable[..., str], transactional: Callable[..., Producer]
) -> None:
    """Starting at the aborted records: nothing is delivered, yet the read ends (position jumps)."""
    topic = new_topic(partitions=1, config=KEEP)
    transactions(kafka, topic, transactional)

    records, summary = read_to_end(
        kafka, {TopicPartition(topic, 0): 3}, Isolation.READ_COMMITTED, deadline_s=20
    )

    assert records == []
    assert summary[TopicPartition(topic, 0)] == PartitionRead(TopicPartition(topic, 0), 3, 7, 0)


def test_records_deleted_under_the_reader_are_skipped_and_reported(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    for i in range(60):  # one record per batch, so a fetch can stop after any record
        producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.flush(10)
    # Small fetches and a small prefetch queue: the reader cannot hold the whole log in memory.
    small = KafkaConfig(
        bootstrap,
        {
            "fetch.max.bytes": "1000",
            "message.max.bytes": "1000",
            "max.partition.fetch.bytes": "1",
            "queued.min.messages": "1",
            "fetch.queue.backoff.ms": "10",
        },
        timeout_s=20,
    )
    tp = TopicPartition(topic, 0)
    reader = LogReader(small, {tp: None}, deadline_s=30, batch_size=1)
    seen: list[int] = []

    for batch in reader.batches():
        seen.extend(r.offset for r in batch)
        if len(seen) == 1:
            topics.delete_records(bootstrap, topic, {0: 40})

    read = reader.summary[tp]
    assert (read.start, read.end) == (0, 60)
    assert len(read.gaps) == 1 and read.gaps[0].end == 40
    gap_start = read.gaps[0].start
    assert seen == [*range(gap_start), *range(40, 60)]
    assert read.records == len(seen) and read.skipped_offsets == 40 - gap_start
    assert gap_start < 40


def test_start_below_the_log_start_is_a_gap(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 10, partitions=1)
    topics.delete_records(bootstrap, topic, {0: 6})

    records, summary = read_to_end(kafka, {TopicPartition(topic, 0): 2})

    assert [r.offset for r in records] == [6, 7, 8, 9]
    assert summary[TopicPartition(topic, 0)].gaps == (OffsetRange(2, 6),)


def test_deadline(kafka: KafkaConfig, new_topic: Callable[..., str], produce: Callable[..., int]) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)

    with pytest.raises(KafkaUnavailable, match=r"did not reach the end within 0.001s: .* \[0\] at 0 of 5"):
        read_to_end(kafka, {TopicPartition(topic, 0): None}, deadline_s=0.001)


def test_missing_partition_is_an_error(kafka: KafkaConfig, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)

    with pytest.raises(TopicNotFound, match=r"\[3\] \(PARTITION_GONE\)"):
        read_to_end(kafka, {TopicPartition(topic, 3): None})


def test_cli_summary_and_json_lines(
    runner: CliRunner,
    kafka: KafkaConfig,
    bootstrap: str,
    new_topic: Callable[..., str],
    transactional: Callable[..., Producer],
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=1, config=KEEP)
    transactions(kafka, topic, transactional)
    lines = tmp_path / "records.jsonl"

    result = runner.invoke(
        cli,
        ["read-to-end", "-b", bootstrap, "--topic", topic, "--isolation", "read_committed",
         "--records", str(lines), "--output", "json"],
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {
            "topic": topic,
            "partition": 0,
            "start_offset": 0,
            "end_offset": 7,
            "records": 3,
            "min_timestamp": 1_795_000_000_000,
            "max_timestamp": 1_795_000_000_002,
            "skipped_offsets": 0,
            "gaps": [],
        }
    ]
    assert json.loads(lines.read_text().splitlines()[0]) == {
        "topic": topic,
        "partition": 0,
        "offset": 0,
        "timestamp": 1_795_000_000_000,
        "key": "k",
        "value": "committed-0",
        "headers": [],
        "encoding": "utf-8",
    }
    assert len(lines.read_text().splitlines()) == 3


def test_cli_table(
    runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    topic = new_topic(partitions=2, config=KEEP)
    topics.produce(bootstrap, topic, topics.keyed_records(4, partitions=1, timestamp_ms=1_795_000_000_000))

    result = runner.invoke(cli, ["read-to-end", "-b", bootstrap, "--topic", topic])

    assert result.exit_code == 0, result.output
    assert [line.split() for line in result.output.splitlines()] == [
        [
            "TOPIC",
            "PARTITION",
            "START",
            "END",
            "RECORDS",
            "FIRST-TIMESTAMP",
            "LAST-TIMESTAMP",
            "DELETED-WHILE-READING",
        ],
        [topic, "0", "0", "4", "4", "2026-11-18T11:06:40.000Z", "2026-11-18T11:06:40.000Z"],
        [topic, "1", "0", "0", "0"],
    ]


def test_cli_records_to_stdout_moves_the_summary_to_stderr(
    runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 3, partitions=1)

    result = runner.invoke(cli, ["read-to-end", "-b", bootstrap, "--topic", topic, "--records", "-", "-q"])

    assert result.exit_code == 0, result.output
    assert [json.loads(line)["value"] for line in result.stdout.splitlines()] == ["v0", "v1", "v2"]
    assert result.stderr.splitlines()[1].split()[:5] == [topic, "0", "0", "3", "3"]


def test_summary_only_read_agrees_with_the_records(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """run() keeps nothing per record, yet counts and time spans match a full read (several topics)."""
    first, second = (
        new_topic(partitions=2, suffix="-a", config=KEEP),
        new_topic(partitions=1, suffix="-b", config=KEEP),
    )
    topics.produce(bootstrap, first, topics.keyed_records(9, partitions=2, timestamp_ms=1_795_000_000_000))
    topics.produce(bootstrap, second, topics.keyed_records(3, partitions=1, timestamp_ms=1_795_000_000_500))
    starts: dict[TopicPartition, int | None] = {
        TopicPartition(first, 0): None,
        TopicPartition(first, 1): 2,
        TopicPartition(second, 0): None,
    }

    summary = LogReader(kafka, starts, deadline_s=20).run()
    reader = LogReader(kafka, starts, deadline_s=20)
    chunks = [chunk for poll in reader.chunks() for chunk in poll]

    assert summary == reader.result()
    assert [(r.tp, r.start, r.end, r.records) for r in summary.reads] == [
        (TopicPartition(first, 0), 0, 5, 5),
        (TopicPartition(first, 1), 2, 4, 2),
        (TopicPartition(second, 0), 0, 3, 3),
    ]
    assert {r.tp: (r.min_timestamp_ms, r.max_timestamp_ms) for r in summary.reads}[
        TopicPartition(second, 0)
    ] == (1_795_000_000_500, 1_795_000_000_500)
    by_partition: dict[TopicPartition, list[int]] = {}
    for chunk in chunks:
        by_partition.setdefault(chunk.tp, []).extend(chunk.offsets)
        assert [r.offset for r in chunk.records()] == list(chunk.offsets)
    assert by_partition == {
        TopicPartition(first, 0): [0, 1, 2, 3, 4],
        TopicPartition(first, 1): [2, 3],
        TopicPartition(second, 0): [0, 1, 2],
    }


def test_records_written_after_the_snapshot_are_not_read(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    """from_selection snapshots the ends once (with the starts); records written later are left out."""
    from recovery.core.specs import parse_time, parse_topic_partitions

    topic = new_topic(partitions=1)
    produce(topic, 4, partitions=1)
    reader = LogReader.from_selection(
        kafka, parse_topic_partitions(topic), parse_time("earliest"), deadline_s=20
    )
    produce(topic, 3, partitions=1, start=4)  # after the snapshot

    (read,) = reader.run().reads

    assert (read.start, read.end, read.records) == (0, 4, 4)
