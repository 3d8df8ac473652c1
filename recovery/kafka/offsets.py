"""Partition offsets, time lookups and topic identity of a cluster, by :class:`KafkaConfig`.

The library's Kafka reads; each runs on the config's shared client (:func:`~recovery.kafka.admin.admin_for`),
so one command talks to Kafka over one client, and describes each topic once per call.

Example::

    ranges = offset_ranges(KafkaConfig("localhost:9092"), [TopicPartition("orders", 0)])
    ranges[TopicPartition("orders", 0)].range  # OffsetRange(start=0, end=1042)
"""

from __future__ import annotations

from collections.abc import Iterable

from recovery.core.model import Isolation, NoMatch, TopicPartition, TopicSelection
from recovery.core.specs import TimeKind, TimeSpec
from recovery.kafka.admin import admin_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.values import (
    ListedTopic,
    MissingPartition,
    OffsetRow,
    OffsetTable,
    PartitionOffsets,
    TimeLookup,
    TopicInfo,
)

__all__ = ["OffsetTable", "describe_topics", "offset_ranges", "offset_table", "offsets_for_time", "topic_ids"]


def offset_ranges(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> dict[TopicPartition, PartitionOffsets | MissingPartition]:
    """Log start, high watermark and (under read_committed) last stable offset of each partition.

    ``partitions`` is explicit (missing ones come back as :class:`MissingPartition`) or a
    :class:`TopicSelection` resolved against the cluster's metadata. Sorted by topic, partition.

    Example::

        ranges = offset_ranges(KafkaConfig("localhost:9092"), [TopicPartition("orders", 0)])
        ranges[TopicPartition("orders", 0)].range  # OffsetRange(start=0, end=1042)
    """
    admin = admin_for(config)
    topics: dict[str, TopicInfo | ListedTopic] | None = None
    if isinstance(partitions, TopicSelection):
        partitions, topics = admin.resolve(partitions)
    return admin.offset_ranges(partitions, isolation, topics=topics)


def offsets_for_time(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    time_spec: TimeSpec | int,
    *,
    no_match: NoMatch = NoMatch.FAIL,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> dict[TopicPartition, TimeLookup | MissingPartition]:
    """The offset ``time_spec`` maps to in each partition (an int is a timestamp in ms).

    For a timestamp: the first offset whose timestamp ≥ T (KIP-79). A partition with no such record
    gets the ``no_match`` policy's offset and ``TimeLookup.no_match`` set; with ``NoMatch.FAIL``,
    :class:`~recovery.errors.NoOffsetForTime` is raised instead. Never omits a partition.
    """
    spec = TimeSpec(TimeKind.TIMESTAMP, time_spec) if isinstance(time_spec, int) else time_spec
    table = offset_table(config, partitions, spec, isolation=isolation, no_match=no_match)
    return {tp: (row.lookup if isinstance(row, OffsetRow) else row) for tp, row in table.rows.items()}


def offset_table(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    time_spec: TimeSpec,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    no_match: NoMatch = NoMatch.FAIL,
) -> OffsetTable:
    """What ``stream-recovery offsets`` prints: positions plus the ``time_spec`` offset per partition.

    Example::

        table = offset_table(kafka, parse_topic_partitions("orders"), parse_time("earliest"))
        table.rows[TopicPartition("orders", 0)].lookup.offset  # the log start offset
    """
    admin = admin_for(config)
    topics: dict[str, TopicInfo | ListedTopic] | None = None
    if isinstance(partitions, TopicSelection):
        partitions, topics = admin.resolve(partitions)
    return OffsetTable(
        time_spec, admin.offset_rows(partitions, time_spec, isolation, no_match, topics=topics)
    )


def describe_topics(config: KafkaConfig, topics: Iterable[str]) -> dict[str, TopicInfo | None]:
    """Partition count, topic id and internal flag of each topic (``None``: no such topic)."""
    return dict(sorted(admin_for(config).describe(topics).items()))


def topic_ids(config: KafkaConfig, topics: Iterable[str]) -> dict[str, str | None]:
    """The KIP-516 topic id of each topic (``None``: no such topic). A recreated topic has a new id."""
    infos = describe_topics(config, topics)
    return {name: (info.topic_id if info else None) for name, info in infos.items()}
