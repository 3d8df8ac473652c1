"""Kafka edges of stream-recovery: offsets, topic identity, reading to the end, consumer groups.

* :mod:`~recovery.kafka.config`: :class:`KafkaConfig`, client settings and properties files;
* :mod:`~recovery.kafka.values`, :mod:`~recovery.kafka.group_values`, :mod:`~recovery.kafka.answers`,
  :mod:`~recovery.kafka.selection`: values and decisions (pure); offset specs are
  :mod:`recovery.core.specs`;
* :mod:`~recovery.kafka.admin`: the AdminClient (IO), one shared client per config;
* :mod:`~recovery.kafka.offsets`, :mod:`~recovery.kafka.cluster`, :mod:`~recovery.kafka.groups`,
  :mod:`~recovery.kafka.read`: what the library asks Kafka, by :class:`KafkaConfig`;
* :mod:`~recovery.kafka.runway_facts`: what a retention runway needs (retention settings, the
  timestamps at the positions); :mod:`~recovery.kafka.logdirs`: partition sizes and free space
  (DescribeLogDirs); :mod:`~recovery.kafka.topic_config`: a topic's own values, read and changed
  (a retention hold);
* :mod:`~recovery.kafka.read_helper`: the program of the helper processes a large read-to-end is
  shared with; ``_shared_read`` (private) holds what the reader and its helpers share;
* ``_errors`` and ``_retry`` (private): error mapping and bounded retries.

Only admin, groups, read and topic_config import confluent_kafka, and they do it inside functions; the names
below are imported on first use (``__getattr__``), so importing this package, or one of its
modules such as ``recovery.kafka.config``, does not import the others and the CLI starts fast.

Example::

    from recovery.kafka import KafkaConfig, offset_ranges
    ranges = offset_ranges(KafkaConfig("localhost:9092"), [TopicPartition("orders", 0)])
    ranges[TopicPartition("orders", 0)].range  # OffsetRange(start=0, end=1042)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Public name -> the module that defines it (imported when the name is first used).
_EXPORTS: dict[str, str] = {
    "ConsumedRecord": "recovery.kafka.values",
    "GroupActive": "recovery.errors",
    "GroupChange": "recovery.kafka.group_values",
    "GroupOffsets": "recovery.kafka.group_values",
    "GroupPartition": "recovery.kafka.group_values",
    "GroupReport": "recovery.kafka.group_values",
    "Isolation": "recovery.core.model",
    "KafkaAdmin": "recovery.kafka.admin",
    "KafkaConfig": "recovery.kafka.config",
    "LogReader": "recovery.kafka.read",
    "MissingPartition": "recovery.kafka.values",
    "MissingReason": "recovery.kafka.values",
    "NoMatch": "recovery.core.model",
    "OffsetOutsideLog": "recovery.errors",
    "OffsetRow": "recovery.kafka.values",
    "OffsetTable": "recovery.kafka.values",
    "PartitionOffsets": "recovery.kafka.values",
    "PartitionRange": "recovery.core.specs",
    "PartitionRead": "recovery.kafka.values",
    "ReadSummary": "recovery.kafka.values",
    "RecordChunk": "recovery.kafka.values",
    "TimeKind": "recovery.core.specs",
    "TimeLookup": "recovery.kafka.values",
    "TimeSpec": "recovery.core.specs",
    "TopicInfo": "recovery.kafka.values",
    "TopicPattern": "recovery.core.specs",
    "TopicSelection": "recovery.core.specs",
    "admin_for": "recovery.kafka.admin",
    "describe_topics": "recovery.kafka.offsets",
    "expired_offsets": "recovery.kafka.groups",
    "group_offsets": "recovery.kafka.groups",
    "kafka_admin": "recovery.kafka.admin",
    "offset_ranges": "recovery.kafka.offsets",
    "offset_table": "recovery.kafka.offsets",
    "offsets_for_time": "recovery.kafka.offsets",
    "parse_time": "recovery.core.specs",
    "parse_topic_partitions": "recovery.core.specs",
    "read_offsets_file": "recovery.kafka.groups",
    "read_properties": "recovery.kafka.config",
    "read_to_end": "recovery.kafka.read",
    "set_group_offsets": "recovery.kafka.groups",
    "show_group": "recovery.kafka.groups",
    "topic_ids": "recovery.kafka.offsets",
    "topic_regex": "recovery.core.specs",
}

__all__ = [
    "ConsumedRecord",
    "GroupActive",
    "GroupChange",
    "GroupOffsets",
    "GroupPartition",
    "GroupReport",
    "Isolation",
    "KafkaAdmin",
    "KafkaConfig",
    "LogReader",
    "MissingPartition",
    "MissingReason",
    "NoMatch",
    "OffsetOutsideLog",
    "OffsetRow",
    "OffsetTable",
    "PartitionOffsets",
    "PartitionRange",
    "PartitionRead",
    "ReadSummary",
    "RecordChunk",
    "TimeKind",
    "TimeLookup",
    "TimeSpec",
    "TopicInfo",
    "TopicPattern",
    "TopicSelection",
    "admin_for",
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
    "show_group",
    "topic_ids",
    "topic_regex",
]  # = sorted(_EXPORTS)

if TYPE_CHECKING:  # the names as mypy and IDEs see them
    from recovery.core.model import Isolation, NoMatch
    from recovery.core.specs import (
        PartitionRange,
        TimeKind,
        TimeSpec,
        TopicPattern,
        TopicSelection,
        parse_time,
        parse_topic_partitions,
        topic_regex,
    )
    from recovery.errors import GroupActive, OffsetOutsideLog
    from recovery.kafka.admin import KafkaAdmin, admin_for, kafka_admin
    from recovery.kafka.config import KafkaConfig, read_properties
    from recovery.kafka.group_values import GroupChange, GroupOffsets, GroupPartition, GroupReport
    from recovery.kafka.groups import (
        expired_offsets,
        group_offsets,
        read_offsets_file,
        set_group_offsets,
        show_group,
    )
    from recovery.kafka.offsets import (
        describe_topics,
        offset_ranges,
        offset_table,
        offsets_for_time,
        topic_ids,
    )
    from recovery.kafka.read import LogReader, read_to_end
    from recovery.kafka.values import (
        ConsumedRecord,
        MissingPartition,
        MissingReason,
        OffsetRow,
        OffsetTable,
        PartitionOffsets,
        PartitionRead,
        ReadSummary,
        RecordChunk,
        TimeLookup,
        TopicInfo,
    )


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
