"""Kafka edges of stream-recovery: offsets, topic identity, reading to the end, consumer groups.

The only modules of the package that import confluent_kafka, and they do it inside functions, so
importing this package (and starting the CLI) stays fast.

Example::

    from recovery.kafka import KafkaConfig, offset_ranges
    ranges = offset_ranges(KafkaConfig("localhost:9092"), [TopicPartition("orders", 0)])
    ranges[TopicPartition("orders", 0)].range  # OffsetRange(start=0, end=1042)
"""

from recovery.kafka.admin import (
    Isolation,
    KafkaAdmin,
    MissingPartition,
    MissingReason,
    NoMatch,
    OffsetRow,
    PartitionOffsets,
    TimeLookup,
    TopicInfo,
    describe_topics,
    kafka_admin,
    offset_ranges,
    offset_table,
    offsets_for_time,
    topic_ids,
)
from recovery.kafka.config import KafkaConfig, read_properties
from recovery.kafka.groups import (
    GroupActive,
    GroupOffsets,
    OffsetOutsideLog,
    expired_offsets,
    group_offsets,
    read_offsets_file,
    set_group_offsets,
)
from recovery.kafka.read import ConsumedRecord, LogReader, PartitionRead, read_to_end
from recovery.kafka.specs import (
    PartitionRange,
    TimeKind,
    TimeSpec,
    TopicPattern,
    TopicSelection,
    parse_time,
    parse_topic_partitions,
    topic_regex,
)

__all__ = [
    "ConsumedRecord",
    "GroupActive",
    "GroupOffsets",
    "Isolation",
    "KafkaAdmin",
    "KafkaConfig",
    "LogReader",
    "MissingPartition",
    "MissingReason",
    "NoMatch",
    "OffsetOutsideLog",
    "OffsetRow",
    "PartitionOffsets",
    "PartitionRange",
    "PartitionRead",
    "TimeKind",
    "TimeLookup",
    "TimeSpec",
    "TopicInfo",
    "TopicPattern",
    "TopicSelection",
    "describe_topics",
    "expired_offsets",
    "group_offsets",
    "kafka_admin",
    "offset_ranges",
    "offset_table",
    "offsets_for_time",
    "parse_time",
    "parse_topic_partitions",
    "read_offsets_file",
    "read_properties",
    "read_to_end",
    "set_group_offsets",
    "topic_ids",
    "topic_regex",
]
