"""What Kafka holds now, as the planning core's :class:`~recovery.model.ClusterView`.

The one place where the use cases (checkpoint validate/repair, starting offsets, the offset ledger,
the pre-start gates) read the cluster: the topics' metadata (partitions, topic ids) and every
partition's log start and end, plus the first offsets at or after a time.

    view = cluster_view(kafka, {"orders"}, Isolation.READ_UNCOMMITTED)
    view.partitions[TopicPartition("orders", 0)]   # OffsetRange(start=0, end=1042)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from recovery.kafka.config import KafkaConfig
from recovery.model import ClusterView, Isolation, NoMatch, OffsetRange, TopicPartition


def cluster_view(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> ClusterView:
    """Every partition of every existing topic in ``topics``, with log start and end (the high
    watermark, or the last stable offset under read_committed), and the topics' ids. A topic absent
    from the view does not exist."""
    from recovery.kafka.admin import MissingPartition, describe_topics, offset_ranges

    infos = describe_topics(kafka, sorted(set(topics)))
    tps = [TopicPartition(name, p) for name, info in infos.items() if info for p in range(info.partitions)]
    ranges = offset_ranges(kafka, tps, isolation) if tps else {}
    partitions: dict[TopicPartition, OffsetRange] = {
        tp: row.range for tp, row in ranges.items() if not isinstance(row, MissingPartition)
    }
    return ClusterView(partitions, {name: info.topic_id for name, info in infos.items() if info})


def time_targets(
    kafka: KafkaConfig,
    partitions: Iterable[TopicPartition],
    timestamp_ms: int,
    no_match: NoMatch,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> Mapping[TopicPartition, int]:
    """The first offset at or after ``timestamp_ms`` in each of ``partitions`` (``no_match`` decides
    where no record is that new); partitions that do not exist are left out."""
    from recovery.kafka.admin import MissingPartition, offsets_for_time

    found = offsets_for_time(kafka, sorted(partitions), timestamp_ms, no_match=no_match, isolation=isolation)
    return {tp: row.offset for tp, row in found.items() if not isinstance(row, MissingPartition)}
