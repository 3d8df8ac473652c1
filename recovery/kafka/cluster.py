"""What Kafka holds now, as the planning core's :class:`~recovery.core.model.ClusterView`.

The one place where the use cases (checkpoint validate/repair, starting offsets, the offset ledger,
the pre-start gates) read the cluster: the topics' metadata (partitions, topic ids) and every
partition's log start and end, plus the first offsets at or after a time.

    view = cluster_view(kafka, {"orders"}, Isolation.READ_UNCOMMITTED)
    view.partitions[TopicPartition("orders", 0)]   # OffsetRange(start=0, end=1042)
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import NamedTuple

from recovery.core.model import ClusterView, Isolation, NoMatch, OffsetRange, TopicPartition, TopicSelection
from recovery.core.specs import TimeKind, TimeSpec
from recovery.errors import NoOffsetForTime
from recovery.kafka._retry import Deadline
from recovery.kafka.admin import admin_for, tp_key
from recovery.kafka.config import KafkaConfig
from recovery.kafka.offsets import offsets_for_time
from recovery.kafka.values import MissingPartition, PartitionOffsets, TimeLookup, TopicInfo

ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID in Kafka's base64 form
# How long a topic's description is used again (TopicCache): as long as Kafka's clients use theirs
# (the Java client's metadata.max.age.ms, 5 min).
DESCRIBE_MAX_AGE_S = 300.0


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
    one per 200 partitions of a leader each (recovery.kafka.admin), all sent together."""
    view, _, _ = _read_cluster(kafka, topics, isolation, {})
    return view


def cluster_with_times(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation,
    times: Mapping[int, Iterable[TopicPartition]],
    known: TopicCache | None = None,
    named: Iterable[TopicPartition] = (),
) -> tuple[ClusterView, Mapping[int, Mapping[TopicPartition, int | None]]]:
    """:func:`cluster_view` (under read_committed with its ``high_watermarks`` and ``isolation``
    set) and, sent in the same round of requests, the first offset whose record's timestamp is
    >= T for each ``T: partitions`` of ``times`` (KIP-79; None where no record is that new).
    Partitions of topics that do not exist are left out. ``known``: topic descriptions kept from
    earlier reads, used while they hold (:class:`TopicCache`; not one with fewer partitions than
    ``named``, the partitions the caller knows of), and the new ones kept.

    Example::

        view, found = cluster_with_times(kafka, {"orders"}, READ_UNCOMMITTED, {t: [orders_0]})
        found[t][orders_0]  # 1042, or None
    """
    view, hwms, found = _read_cluster(kafka, topics, isolation, times, known, named)
    if isolation is Isolation.READ_COMMITTED:
        view = replace(view, isolation=isolation, high_watermarks=hwms)
    return view, found


Ranges = dict[TopicPartition, PartitionOffsets | MissingPartition]
Found = Mapping[int, Mapping[TopicPartition, int | None]]


def _read_cluster(
    kafka: KafkaConfig,
    topics: Iterable[str],
    isolation: Isolation,
    times: Mapping[int, Iterable[TopicPartition]],
    known: TopicCache | None = None,
    named: Iterable[TopicPartition] = (),
) -> tuple[ClusterView, dict[TopicPartition, int], Found]:
    names = set(topics)
    kept = known.fresh(names, named) if known is not None else {}
    infos, ranges, found = _described_and_read(kafka, names - set(kept), kept, isolation, times)
    held: dict[TopicPartition, OffsetRange] | None = None  # the ranges, as the cache gives them
    if known is not None:
        # a kept description whose topic's offsets went back may be another topic's now: read anew
        changed = known.changed(kept, ranges)
        if changed:
            infos = {name: info for name, info in infos.items() if name not in changed}
            ranges = {tp: row for tp, row in ranges.items() if tp.topic not in changed}
            more, more_ranges, more_found = _described_and_read(kafka, changed, {}, isolation, times)
            infos.update(more)
            ranges = dict(sorted({**ranges, **more_ranges}.items()))  # in partition order, as read at once
            found = {
                at_ms: {
                    **{tp: o for tp, o in found.get(at_ms, {}).items() if tp.topic not in changed},
                    **more_found.get(at_ms, {}),
                }
                for at_ms in {*found, *more_found}
            }
            kept = {name: info for name, info in kept.items() if name not in changed}
        held = known.keep({name: infos.get(name) for name in names if name not in kept}, ranges)
    rows = [row for row in ranges.values() if isinstance(row, PartitionOffsets)]
    # A broker without topic ids (KIP-516) answers the zero UUID: unknown, never recorded or compared.
    ids = {name: info.topic_id for name, info in sorted(infos.items()) if info.topic_id != ZERO_TOPIC_ID}
    view = ClusterView(held if held is not None else {row.tp: row.range for row in rows}, ids)
    return view, {row.tp: row.high_watermark for row in rows}, found


def _described_and_read(
    kafka: KafkaConfig,
    names: Iterable[str],
    kept: Mapping[str, TopicInfo],
    isolation: Isolation,
    times: Mapping[int, Iterable[TopicPartition]],
) -> tuple[dict[str, TopicInfo], Ranges, Found]:
    """The existing topics among ``names`` (described now) and ``kept`` (described before), every
    partition's offsets, and the time lookups of ``times`` in those topics."""
    admin = admin_for(kafka)
    described = admin.describe(sorted(set(names))) if names else {}
    infos = {**kept, **{name: info for name, info in described.items() if info is not None}}
    tps = [TopicPartition(name, p) for name, info in sorted(infos.items()) for p in range(info.partitions)]
    if not tps:
        return infos, {}, {}
    ranges, found = admin.ranges_and_times(tps, isolation, times, topics=infos)
    return infos, ranges, found


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


class _Answer(NamedTuple):
    topic_id: str
    offset: int | None  # the first offset at or after the time; None: no record that new
    covered: int | None  # None answers: the log end the lookup surely saw (None: not known yet)
    end: int  # the log end read in the same round as the lookup
    read_at: float  # when that end had been read, by time.monotonic


class FirstOffsetCache:
    """KIP-79 answers read before, kept across rounds of one cluster (``fleet serve`` asks where
    each stopped query's recreation evidence is every interval, and the answer seldom changes).
    An answer is used again only while the cluster read beside it shows it still true, for the
    same topic id:

    * an offset found stays the first whose record is at least T ms while the log starts at or
      below it and ends past it: records appended later come after it, and those deleted below it
      were older than T;
    * "no record that new" stays true while nothing is appended: it is used once a lookup finds
      the log end where a read that ended before the lookup was sent found it. (The end read
      beside a lookup may be newer than the log the lookup saw: the requests go out together; an
      end read before cannot be.) A log that grows, or a new lookup's first answer, is asked again.

    A partition no longer in the cluster drops its answers (and is not asked).

    At most ``size`` answers are kept, the least recently used dropped first. Thread-safe."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[int, TopicPartition], _Answer] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def usable(self, times: Mapping[int, Iterable[TopicPartition]]) -> dict[int, set[TopicPartition]]:
        """The lookups of ``times`` with an answer that may still be true (checked with
        :meth:`still_true` once the cluster is read): those need not be asked with the others."""
        usable: dict[int, set[TopicPartition]] = {}
        with self._lock:
            get = self._kept.get  # every partition of every stopped query, each round: lean
            for at_ms, tps in times.items():
                some = {
                    tp
                    for tp in tps
                    if (kept := get((at_ms, tp))) is not None
                    and (kept.offset is not None or kept.covered is not None)
                }
                if some:
                    usable[at_ms] = some
        return usable

    def still_true(
        self, lookups: Mapping[int, Iterable[TopicPartition]], cluster: ClusterView
    ) -> tuple[dict[int, dict[TopicPartition, int | None]], dict[int, set[TopicPartition]]]:
        """Of ``lookups``, the answers kept that ``cluster`` (read now) shows still true, and the
        lookups to ask again (of partitions ``cluster`` has)."""
        true: dict[int, dict[TopicPartition, int | None]] = {}
        again: dict[int, set[TopicPartition]] = {}
        logs = cluster.partitions
        with self._lock:
            get, recent = self._kept.get, self._kept.move_to_end  # every partition, each round: lean
            for at_ms, tps in lookups.items():
                held: dict[TopicPartition, int | None] = {}
                for tp in tps:
                    key = (at_ms, tp)
                    if tp not in logs:
                        self._kept.pop(key, None)
                    elif (kept := get(key)) is not None and _true_of(kept, tp, cluster):
                        held[tp] = kept.offset
                        recent(key)
                    else:
                        again.setdefault(at_ms, set()).add(tp)
                if held:
                    true[at_ms] = held
        return true, again

    def keep(
        self,
        found: Mapping[int, Mapping[TopicPartition, int | None]],
        cluster: ClusterView,
        sent_at: float,
    ) -> None:
        """Keep the answers ``found`` just now, beside ``cluster`` (read in the same round, whose
        requests went out at ``sent_at``, by ``time.monotonic``); a topic without an id (a broker
        older than Kafka 2.8) is not kept."""
        read_at = time.monotonic()  # the ends of ``cluster`` were read by now
        with self._lock:
            for at_ms, answers in found.items():
                for tp, offset in answers.items():
                    topic_id, log = cluster.topic_ids.get(tp.topic), cluster.partitions.get(tp)
                    if not topic_id or log is None:
                        continue
                    end = cluster.high_watermarks.get(tp, log.end)
                    before = self._kept.get((at_ms, tp))
                    # an end read before this lookup went out, and the same now: the lookup saw that
                    # log (several batches share the cache: one read meanwhile does not count)
                    confirmed = (
                        before is not None
                        and before.topic_id == topic_id
                        and before.end == end
                        and before.read_at <= sent_at
                    )
                    covered = end if offset is None and confirmed else None
                    self._kept[(at_ms, tp)] = _Answer(topic_id, offset, covered, end, read_at)
                    self._kept.move_to_end((at_ms, tp))
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


def _true_of(kept: _Answer, tp: TopicPartition, cluster: ClusterView) -> bool:
    """Whether ``kept`` (an answer for ``tp``) is still true of ``cluster`` (FirstOffsetCache)."""
    log = cluster.partitions.get(tp)
    if log is None or kept.topic_id != cluster.topic_ids.get(tp.topic):
        return False
    end = cluster.high_watermarks.get(tp, log.end)
    if kept.offset is None:
        return kept.covered == end
    return log.start <= kept.offset < end


class TopicCache:
    """Topic descriptions (partition count, topic id) kept across rounds of one cluster: describing
    1,000 topics of 100 partitions each costs the client ~3 s of CPU (it makes ~400,000 Python
    objects of the answer), more than anything else in a round of ``fleet serve``.

    A description is used again for at most ``max_age_s`` (:data:`DESCRIBE_MAX_AGE_S`), and never
    once its topic's offsets show a sign that the topic changed (:meth:`changed`): a partition the
    cluster does not know, or a log start or high watermark below the one read the round before (a
    recreated topic starts anew); nor when a checkpoint names a partition it does not have
    (:meth:`fresh`). So a partition added is seen within ``max_age_s``, as Kafka's clients see it,
    at once where a checkpoint already reads it; and so is a topic deleted and recreated between
    two rounds whose log started at 0 and already reaches its old end. Batches running at once
    share it: one may describe a topic another described a moment before. Thread-safe."""

    def __init__(
        self,
        max_age_s: float = DESCRIBE_MAX_AGE_S,
        size: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age_s, self.size, self.clock = max_age_s, size, clock
        self._lock = threading.Lock()
        # topic -> (its description, when made, each partition's offsets last read)
        self._kept: OrderedDict[str, tuple[TopicInfo, float, dict[int, _Read]]] = OrderedDict()

    def fresh(self, names: Iterable[str], named: Iterable[TopicPartition] = ()) -> dict[str, TopicInfo]:
        """The descriptions kept of ``names`` that are younger than ``max_age_s`` and have each
        partition of ``named`` (a partition a checkpoint knows of, beyond those described: added
        since, and already read by a running query, whose Spark describes the topic each batch)."""
        oldest = self.clock() - self.max_age_s
        counts: dict[str, int] = {}
        for tp in named:
            counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
        with self._lock:
            kept = {name: self._kept.get(name) for name in names}
        return {
            name: k[0]
            for name, k in kept.items()
            if k is not None and k[1] > oldest and k[0].partitions >= counts.get(name, 0)
        }

    def changed(self, used: Mapping[str, TopicInfo], ranges: Mapping[TopicPartition, object]) -> set[str]:
        """The topics of ``used`` (kept descriptions) whose offsets read now (``ranges``) say they
        may have changed since described."""
        changed: set[str] = set()
        topic, before = None, None  # a topic's partitions come together: looked up once
        with self._lock:
            for tp, row in ranges.items():
                if tp.topic != topic:
                    topic, before = tp.topic, None
                    if topic in used and topic not in changed:
                        kept = self._kept.get(topic)
                        before = kept[2] if kept is not None else {}
                if before is None or topic in changed:
                    continue
                if not isinstance(row, PartitionOffsets) or _went_back(row, before.get(tp.partition)):
                    changed.add(topic)
        return changed

    def keep(
        self, described: Mapping[str, TopicInfo | None], ranges: Mapping[TopicPartition, object]
    ) -> dict[TopicPartition, OffsetRange]:
        """Keep the descriptions made now (``described``; None: no such topic, none kept), and every
        topic's offsets read now. Returns the range of each partition read (in the order of
        ``ranges``): where it is the one kept from the round before, that very object, so that a
        judging given again finds its cluster equal by identity (a partition not kept, or last
        read under the other isolation level, gets a new one)."""
        now = self.clock()
        with self._lock:  # the offsets kept: each topic's dict is replaced, never changed
            kept = {topic: k[2] for topic in {tp.topic for tp in ranges} if (k := self._kept.get(topic))}
        out: dict[TopicPartition, OffsetRange] = {}
        read: dict[str, dict[int, _Read]] = {}
        topic, before, offsets = None, None, None
        for tp, row in ranges.items():
            if not isinstance(row, PartitionOffsets):
                continue
            if tp.topic != topic:  # a topic's partitions come together: looked up once
                topic = tp.topic
                before, offsets = kept.get(topic, {}), read.setdefault(topic, {})
            assert before is not None and offsets is not None
            was = before.get(tp.partition)
            if was is not None and was.range.start == row.log_start and was.range.end == row.end:
                held = was.range
            else:
                held = OffsetRange(row.log_start, row.end)
            offsets[tp.partition] = _Read(row.high_watermark, held)
            out[tp] = held
        with self._lock:
            for name, info in described.items():
                if info is None:
                    self._kept.pop(name, None)
                else:
                    self._kept[name] = (info, now, {})
            for name, offsets in read.items():
                if (k := self._kept.get(name)) is not None:
                    self._kept[name] = (k[0], k[1], offsets)
                    self._kept.move_to_end(name)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return out


class _Read(NamedTuple):
    """A partition's offsets as last read (TopicCache)."""

    high_watermark: int
    range: OffsetRange  # the view's: log start up to the end a reader sees


def _went_back(row: PartitionOffsets, before: _Read | None) -> bool:
    return before is not None and (
        row.log_start < before.range.start or row.high_watermark < before.high_watermark
    )


class ClusterMemory:
    """What ``fleet serve`` keeps of one cluster's answers between rounds, to ask less: the topics'
    descriptions (:class:`TopicCache`) and the time lookups' answers (:class:`FirstOffsetCache`)."""

    def __init__(self) -> None:
        self.topics = TopicCache()
        self.first_offsets = FirstOffsetCache()
