"""What Kafka holds now, as the planning core's :class:`~recovery.core.model.ClusterView`.

The one place where the use cases (checkpoint validate/repair, starting offsets, the offset ledger,
the pre-start gates) read the cluster: the topics' metadata (partitions, topic ids) and every
partition's log start and end, plus the first offsets at or after a time.

    view = cluster_view(kafka, {"orders"}, Isolation.READ_UNCOMMITTED)
    view.partitions[TopicPartition("orders", 0)]   # OffsetRange(start=0, end=1042)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from recovery.core.model import ClusterView, Isolation, NoMatch, TopicPartition, TopicSelection
from recovery.core.specs import TimeKind, TimeSpec
from recovery.errors import NoOffsetForTime
from recovery.kafka._retry import Deadline
from recovery.kafka.admin import admin_for, tp_key
from recovery.kafka.config import KafkaConfig
from recovery.kafka.offsets import offsets_for_time
from recovery.kafka.values import PartitionOffsets, TimeLookup

ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID in Kafka's base64 form


def cluster_view(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> ClusterView:
    """Every partition of every existing topic in ``topics``, with log start and end (the high
    watermark, or the last stable offset under read_committed), and the topics' ids. A topic absent
    from the view does not exist. Each topic is described once (its partitions and id come from
    the same answer): one Metadata request, then ListOffsets requests for the log starts and the
    ends (under read_committed also for the high watermarks, which a consistent answer needs),
    one per broker per 500 partitions each, all sent together."""
    view, _, _ = _read_cluster(kafka, topics, isolation, {})
    return view


def cluster_with_times(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation,
    times: Mapping[int, Iterable[TopicPartition]],
) -> tuple[ClusterView, Mapping[int, Mapping[TopicPartition, int | None]]]:
    """:func:`cluster_view` (under read_committed with its ``high_watermarks`` and ``isolation``
    set) and, sent in the same round of requests, the first offset whose record's timestamp is
    >= T for each ``T: partitions`` of ``times`` (KIP-79; None where no record is that new).
    Partitions of topics that do not exist are left out.

    Example::

        view, found = cluster_with_times(kafka, {"orders"}, READ_UNCOMMITTED, {t: [orders_0]})
        found[t][orders_0]  # 1042, or None
    """
    view, hwms, found = _read_cluster(kafka, topics, isolation, times)
    if isolation is Isolation.READ_COMMITTED:
        view = replace(view, isolation=isolation, high_watermarks=hwms)
    return view, found


def _read_cluster(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation,
    times: Mapping[int, Iterable[TopicPartition]],
) -> tuple[ClusterView, dict[TopicPartition, int], Mapping[int, Mapping[TopicPartition, int | None]]]:
    admin = admin_for(kafka)
    infos = {name: info for name, info in admin.describe(sorted(set(topics))).items() if info is not None}
    tps = [TopicPartition(name, p) for name, info in sorted(infos.items()) for p in range(info.partitions)]
    ranges, found = admin.ranges_and_times(tps, isolation, times, topics=infos) if tps else ({}, {})
    rows = [row for row in ranges.values() if isinstance(row, PartitionOffsets)]
    # A broker without topic ids (KIP-516) answers the zero UUID: unknown, never recorded or compared.
    ids = {name: info.topic_id for name, info in sorted(infos.items()) if info.topic_id != ZERO_TOPIC_ID}
    view = ClusterView({row.tp: row.range for row in rows}, ids)
    return view, {row.tp: row.high_watermark for row in rows}, found


def time_targets(
    kafka: KafkaConfig,
    partitions: Iterable[TopicPartition],
    timestamp_ms: int,
    no_match: NoMatch,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> Mapping[TopicPartition, int]:
    """The first offset at or after ``timestamp_ms`` in each of ``partitions`` (``no_match`` decides
    where no record is that new: the log start, the end, or NoOffsetForTime); partitions that do
    not exist are left out.

    One ListOffsets request per broker for the time, and one for the ``no_match`` fallback (log
    start, or the end for ``isolation``), sent together; no metadata request."""
    spec = TimeSpec(TimeKind.TIMESTAMP, timestamp_ms)
    queries = {"time": (spec, isolation)}
    if no_match is NoMatch.EARLIEST:
        queries["fallback"] = (TimeSpec(TimeKind.EARLIEST), Isolation.READ_UNCOMMITTED)
    elif no_match is NoMatch.LATEST:
        queries["fallback"] = (TimeSpec(TimeKind.LATEST), isolation)
    tps = sorted(set(partitions), key=tp_key)
    answers, gone = admin_for(kafka).list_offsets(tps, queries, Deadline(kafka.timeout_s))
    if gone:
        # "Unknown partition" can also be a topic whose metadata is still spreading: the full path
        # (metadata, then asking again until the deadline) tells missing from not yet known.
        return _time_targets_checked(kafka, tps, timestamp_ms, no_match, isolation)
    found = answers["time"]
    unmatched = tuple(sorted((tp for tp, (offset, _) in found.items() if offset < 0), key=tp_key))
    if unmatched and no_match is NoMatch.FAIL:
        raise NoOffsetForTime(unmatched, spec.label())
    fallback = answers.get("fallback", {})
    targets = {
        tp: offset if offset >= 0 else fallback[tp][0]
        for tp, (offset, _) in found.items()
        if offset >= 0 or tp in fallback
    }
    return dict(sorted(targets.items(), key=lambda item: tp_key(item[0])))


def _time_targets_checked(
    kafka: KafkaConfig,
    partitions: list[TopicPartition],
    timestamp_ms: int,
    no_match: NoMatch,
    isolation: Isolation,
) -> Mapping[TopicPartition, int]:
    found = offsets_for_time(kafka, partitions, timestamp_ms, no_match=no_match, isolation=isolation)
    return {tp: row.offset for tp, row in found.items() if isinstance(row, TimeLookup)}


def first_offsets_at(
    kafka: KafkaConfig,
    partitions: Iterable[TopicPartition],
    timestamp_ms: int,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> Mapping[TopicPartition, int | None]:
    """KIP-79: the first offset whose record's timestamp is >= ``timestamp_ms`` in each of
    ``partitions``; None where no record is that new (or it is not readable yet). Partitions that
    do not exist are left out. One ListOffsets request per broker, no metadata request.

    Example::

        first_offsets_at(kafka, [TopicPartition("orders", 0)], batch_timestamp_ms + 1)
    """
    return first_offsets_at_times(kafka, {timestamp_ms: partitions}, isolation).get(timestamp_ms, {})


def first_offsets_at_times(
    kafka: KafkaConfig,
    times: Mapping[int, Iterable[TopicPartition]],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> Mapping[int, Mapping[TopicPartition, int | None]]:
    """:func:`first_offsets_at` for each ``T: partitions`` of ``times``, the lookups sent together
    (a partition without a leader is asked again until the config's timeout, then
    KafkaUnavailable)."""
    return admin_for(kafka).first_offsets(times, isolation, Deadline(kafka.timeout_s))


def topics_matching(kafka: KafkaConfig, selection: TopicSelection) -> frozenset[str]:
    """The names of the cluster's topics that ``selection`` matches (internal ones only if named)."""
    names = admin_for(kafka).topic_names()
    return frozenset(
        name for name, internal in names.items() if selection.matches_topic(name, internal=internal)
    )
