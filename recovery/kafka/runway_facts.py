"""The facts a retention runway needs (:mod:`recovery.core.runway` decides with them):

* each topic's ``retention.ms``, ``retention.bytes``, ``cleanup.policy`` and ``segment.ms``: one
  DescribeConfigs request for all topics (the effective values: a topic without its own setting
  answers the broker's default);
* the timestamp of the record at each position: ListOffsets cannot give the timestamp of an
  offset, so one consumer (``assign``, no group, nothing committed) is assigned every partition at
  its position and takes the first record of each, pausing a partition once it has it; the broker
  answers a small fetch with at least one whole record batch (KIP-74), so each partition costs one
  batch.

* for topics limited by size (``retention.bytes``), each partition's size on disk: one
  DescribeLogDirs request per broker (:mod:`recovery.kafka.logdirs`).

Failures never sink a validation: a fact that cannot be read becomes a string saying why, and the
runway says it is unknown.

    facts = runway_facts(kafka, {(TopicPartition("orders", 0), 1042)})

:class:`RunwayReader` reads them in a thread while the offsets are still being asked for.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from recovery.core.model import Isolation, TopicPartition
from recovery.core.runway import RecordStamp, TopicRetention
from recovery.errors import RecoveryError
from recovery.kafka._errors import error_code, refused_because, scrub
from recovery.kafka._retry import Deadline
from recovery.kafka.admin import admin_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.logdirs import partition_sizes

if TYPE_CHECKING:
    from confluent_kafka import Message

log = logging.getLogger(__name__)

__all__ = [
    "ReadUntil",
    "RunwayFacts",
    "RunwayReader",
    "StampCache",
    "record_stamps",
    "runway_facts",
    "topic_retention",
]

_CONFIGS = (
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "segment.ms",
    "remote.storage.enable",  # tiered storage (KIP-405; absent before Kafka 3.6)
    "local.retention.ms",
)
_BATCH = 500  # messages taken per consume() call
_NOT_READ = "not read (the read ended before it: stopped, or not needed)"
_AT_END = "nothing readable at or after it now (transaction markers or aborted records only)"
_OUT_OF_RANGE = "deleted while being read"
_UNKNOWN = "not in the cluster's metadata when read"
# librdkafka's answers for a topic or partition its metadata does not have (yet)
_UNKNOWN_ERRORS = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION"})
# What a read ahead may answer for a position that has a record by the time the offsets are known:
# read again. Other answers (a fetch error, a timeout, settings refused) would only repeat. The read
# ahead is assigned positions before the cluster is described: a partition it did not know then
# (created since, or metadata not yet everywhere) may be wanted after all.
_READ_AGAIN = frozenset({_NOT_READ, _AT_END, _OUT_OF_RANGE, _UNKNOWN})
_STOPPED = "not read (stopped)"
_CLOSE_WAIT_S = 5.0  # close() waits this long for a stopped read (a fetch round, a consumer close)
# More guessed positions than this are not read ahead: the read ahead saves about the time of the
# ListOffsets round (~0.1 s for 2,000 partitions), but a guess of 100,000 positions that are mostly
# not wanted (a checkpoint past every log end) kept the brokers and this process busy fetching
# them: validate took 32 s instead of 15 s on 7 brokers sharing 2 cores.
READ_AHEAD_MAX = 5_000


class RunwayFacts(NamedTuple):
    """What :func:`recovery.core.runway.apply_runway` judges with: each topic's retention, the record
    stamp at each position, and the sizes of size-limited topics' partitions (each: or why not)."""

    retention: dict[str, TopicRetention | str]
    stamps: dict[tuple[TopicPartition, int], RecordStamp | str]
    sizes: dict[TopicPartition, int | str]


def runway_facts(
    kafka: KafkaConfig,
    positions: Iterable[tuple[TopicPartition, int]],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    *,
    until: ReadUntil | None = None,
    known: Mapping[tuple[TopicPartition, int], RecordStamp] | None = None,
) -> RunwayFacts:
    """The retention settings of the positions' topics, the record stamps at the positions and,
    where ``retention.bytes`` applies, the partitions' sizes. ``until``: when the record reads may
    end early (the positions not read then say so); once it is stopped nothing more is waited for.
    ``known``: stamps already read (a :class:`StampCache`'s), not read again."""
    wanted = set(positions)
    if not wanted:
        return RunwayFacts({}, {}, {})
    known = known or {}
    # DescribeConfigs goes out first and is answered while the consumer connects and reads.
    answer_retention = _ask_retention(kafka, {tp.topic for tp, _ in wanted})
    # Every position is read, compacted topics' too: the age of the oldest unread record is the
    # query's lag in time, worth showing whatever the retention.
    stamps: dict[tuple[TopicPartition, int], RecordStamp | str] = {
        k: stamp for k in wanted if (stamp := known.get(k)) is not None
    }
    unknown = [k for k in wanted if k not in stamps]
    if unknown:
        stamps.update(record_stamps(kafka, unknown, isolation, until=until))
    if until is not None and until.stopped:  # the caller gave up: no more waiting
        return RunwayFacts(dict.fromkeys({tp.topic for tp, _ in wanted}, _STOPPED), stamps, {})
    retention = answer_retention()
    by_size = {
        topic
        for topic, r in retention.items()
        if isinstance(r, TopicRetention)
        and r.deletes
        and r.retention_bytes >= 0
        and not r.remote_storage  # the sizes would be the local segments' only: not estimated
    }
    sized = {tp for tp, _ in wanted if tp.topic in by_size} if by_size else set()
    sizes: dict[TopicPartition, int | str] = {}
    if sized:
        sizes = partition_sizes(kafka, sized)
    return RunwayFacts(retention, stamps, sizes)


def topic_retention(kafka: KafkaConfig, topics: Iterable[str]) -> dict[str, TopicRetention | str]:
    """Each topic's effective deletion settings, or why they could not be read."""
    return _ask_retention(kafka, topics)()


def _ask_retention(
    kafka: KafkaConfig, topics: Iterable[str]
) -> Callable[[], dict[str, TopicRetention | str]]:
    """Send the DescribeConfigs request for ``topics``; the function returned waits for its answer:
    :func:`topic_retention`'s."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource

    names = sorted(set(topics))
    if not names:
        return dict
    deadline = Deadline(kafka.timeout_s)
    admin = admin_for(kafka)
    # Before the record reads start: while the controller is a dead broker they would only wait
    # for this DescribeConfigs, which would wait out its timeout (KafkaAdmin.await_controller).
    admin.await_controller(names[0], deadline)
    client = admin.client
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    try:
        futures = client.describe_configs(resources, request_timeout=max(1.0, deadline.remaining()))
    except (KafkaException, ValueError, TypeError) as exc:
        failed: dict[str, TopicRetention | str] = dict.fromkeys(
            names, f"DescribeConfigs: {scrub(str(exc), kafka)}"
        )
        return lambda: failed

    def answer() -> dict[str, TopicRetention | str]:
        out: dict[str, TopicRetention | str] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=deadline.remaining() + 5)
                out[resource.name] = _retention({k: e.value for k, e in entries.items() if k in _CONFIGS})
            except KafkaException as exc:
                why = refused_because(error_code(exc), "DescribeConfigs", topic=resource.name)
                out[resource.name] = f"DescribeConfigs {why}"
            except (ValueError, TypeError) as exc:
                out[resource.name] = f"DescribeConfigs answered an unreadable value ({exc})"
            except Exception as exc:  # a future librdkafka never completes (TimeoutError)
                out[resource.name] = (
                    f"DescribeConfigs: no answer within {kafka.timeout_s:g}s ({type(exc).__name__})"
                )
        return out

    return answer


def _retention(values: Mapping[str, str | None]) -> TopicRetention:
    policy = frozenset(p.strip() for p in (values.get("cleanup.policy") or "delete").split(",") if p.strip())
    segment = values.get("segment.ms")
    return TopicRetention(
        retention_ms=int(values.get("retention.ms") or -1),
        retention_bytes=int(values.get("retention.bytes") or -1),
        cleanup_policy=policy,
        segment_ms=int(segment) if segment else None,
        remote_storage=(values.get("remote.storage.enable") or "false").lower() == "true",
        local_retention_ms=int(values.get("local.retention.ms") or -2),
    )


def record_stamps(
    kafka: KafkaConfig,
    positions: Iterable[tuple[TopicPartition, int]],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    *,
    until: ReadUntil | None = None,
) -> dict[tuple[TopicPartition, int], RecordStamp | str]:
    """The first record at or after each position (offset and timestamp), or why none was read.

    Two sources reading one partition at different positions are read in rounds (a consumer holds
    one position per partition)."""
    rounds: list[dict[TopicPartition, int]] = []
    for tp, offset in sorted(set(positions), key=lambda item: (item[0].topic, item[0].partition, item[1])):
        for batch in rounds:
            if tp not in batch:
                batch[tp] = offset
                break
        else:
            rounds.append({tp: offset})
    deadline = Deadline(kafka.timeout_s)
    out: dict[tuple[TopicPartition, int], RecordStamp | str] = {}
    until = until or ReadUntil()
    for batch in rounds:
        if until.done(batch):
            out.update({(tp, o): _NOT_READ for tp, o in batch.items()})
            continue
        out.update(_one_round(kafka, batch, isolation, deadline, until))
    return out


def _one_round(
    kafka: KafkaConfig,
    positions: Mapping[TopicPartition, int],
    isolation: Isolation,
    deadline: Deadline,
    until: ReadUntil,
) -> dict[tuple[TopicPartition, int], RecordStamp | str]:
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    settings: dict[str, str | int | float | bool] = {
        # A throwaway group id: assign() never joins it and nothing is committed.
        "group.id": f"stream-recovery-runway-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": isolation.value,
        "auto.offset.reset": "error",  # a deleted position is an answer, not a reason to jump
        "enable.partition.eof": True,
        # One batch per partition is all we need: the broker still sends a whole first batch (KIP-74).
        "fetch.message.max.bytes": 1024,
        "queued.max.messages.kbytes": 1024,
        "fetch.wait.max.ms": 100,
        # The read ahead is assigned positions before the cluster is described, in topics that may
        # be gone: never ask a broker that creates topics on demand to make one (librdkafka's
        # consumer default, said here so that no -X setting changes it).
        "allow.auto.create.topics": False,
    }
    found: dict[tuple[TopicPartition, int], RecordStamp | str] = {}
    try:
        consumer = Consumer(kafka.client_config(**settings))
    except (KafkaException, ValueError, TypeError) as exc:
        reason = f"consumer settings refused: {scrub(str(exc), kafka)}"
        return {(tp, o): reason for tp, o in positions.items()}
    pending = dict(positions)
    try:
        consumer.assign([KafkaTP(tp.topic, tp.partition, o) for tp, o in positions.items()])
        while pending and not deadline.expired() and not until.done(pending):
            # Short waits: consume() returns early only once _BATCH messages are in, and the last
            # partitions' few records sit out the whole timeout (a 50 ms wait cost every validate
            # ~50 ms; at 10 ms an idle loop still sleeps in librdkafka, not in Python).
            messages = consumer.consume(_BATCH, timeout=min(0.01, max(0.001, deadline.remaining())))
            done = [_take(message, pending, found) for message in messages]
            finished = [KafkaTP(tp.topic, tp.partition) for tp in done if tp is not None]
            if finished:
                consumer.pause(finished)
    except (KafkaException, RecoveryError) as exc:
        code = error_code(exc)
        found.update(
            {
                (tp, o): f"fetch failed ({refused_because(code, 'Read', topic=tp.topic)})"
                for tp, o in pending.items()
            }
        )
        pending = {}
    finally:
        consumer.close()
    why = _NOT_READ if until.done(pending) else f"no record fetched within {kafka.timeout_s:g}s"
    found.update({(tp, o): why for tp, o in pending.items()})
    log.debug("runway: %d record stamps read", sum(isinstance(v, RecordStamp) for v in found.values()))
    return found


def _take(
    message: Message,
    pending: dict[TopicPartition, int],
    found: dict[tuple[TopicPartition, int], RecordStamp | str],
) -> TopicPartition | None:
    """Record ``message``'s answer for its partition (once); the partition, when it is now done."""
    topic, partition = message.topic(), message.partition()
    if topic is None or partition is None:
        return None  # a client-level event (e.g. a broker connection retried): not about a partition
    tp = TopicPartition(topic, partition)
    position = pending.get(tp)
    if position is None:
        return None
    err = message.error()
    if err is not None:
        name = err.name()
        if name == "_PARTITION_EOF":
            reason = _AT_END
        elif name in ("OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET"):  # the latter: auto.offset.reset=error
            reason = _OUT_OF_RANGE
        elif name in _UNKNOWN_ERRORS:
            reason = _UNKNOWN
        else:
            reason = f"fetch answered {refused_because(name, 'Read', topic=topic)}"
        found[(tp, position)] = reason
    else:
        _kind, ts = message.timestamp()
        offset = message.offset()
        assert offset is not None  # librdkafka sets it on every record a consumer returns
        found[(tp, position)] = RecordStamp(offset, ts)
    del pending[tp]
    return tp


class ReadUntil:
    """When a record read may end before every position is read: once :meth:`stop` is called (the
    caller gave up), or once every position passed to :meth:`want` is read (the others were only
    guessed). Shared by the reading thread and its caller (plain attribute writes: atomic)."""

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wanted: frozenset[tuple[TopicPartition, int]] | None = None

    def stop(self) -> None:
        self._stopped.set()

    def want(self, positions: frozenset[tuple[TopicPartition, int]]) -> None:
        self._wanted = positions

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def done(self, pending: Mapping[TopicPartition, int]) -> bool:
        """Whether the positions still ``pending`` can be left unread."""
        if self._stopped.is_set():
            return True
        wanted = self._wanted
        return wanted is not None and not any((tp, o) in wanted for tp, o in pending.items())


class StampCache:
    """Record stamps read before, kept across validations of one cluster (``fleet serve`` checks
    every job each interval; a stopped query's positions do not move, so its records are read once).

    The first record at or after a position does not change while the topic lives (retention
    deleting it moves the log start past the position: that partition has no runway to read; a
    position at the log end has no stamp, and is not kept). A stamp is used only while its topic's
    id is the one seen when it was read (a topic recreated since is read again; a topic without an
    id, on a broker older than Kafka 2.8, is never kept), and only for the isolation level it was
    read with (read_committed skips aborted records). Per partition, the stamps of its last
    :data:`PER_PARTITION` positions are kept (a running query's position moves each batch: its
    old ones are dropped), for at most ``partitions`` partitions, the least recently used dropped
    first. Compaction may remove the record a stamp names; a compacted topic has no deletion runway,
    only the age of its oldest unread record then shows that older record's. Thread-safe."""

    PER_PARTITION = 4  # positions kept per partition: a few queries reading it, each stopped somewhere

    def __init__(self, partitions: int = 200_000) -> None:
        self.partitions = partitions
        self._lock = threading.Lock()
        # (isolation level's value, partition) -> {offset: (topic id, stamp)}, most recently kept last
        # (the value: an Enum member hashes in Python, and this is looked up 100,000 times a round)
        self._kept: OrderedDict[tuple[str, TopicPartition], dict[int, tuple[str, RecordStamp]]]
        self._kept = OrderedDict()

    def __len__(self) -> int:
        """How many stamps are kept."""
        with self._lock:
            return sum(len(offsets) for offsets in self._kept.values())

    def lookup(
        self,
        positions: Iterable[tuple[TopicPartition, int]],
        topic_ids: Mapping[str, str] | None = None,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
    ) -> dict[tuple[TopicPartition, int], RecordStamp]:
        """The stamps kept for ``positions``; with ``topic_ids``, only those of topics with that id."""
        found: dict[tuple[TopicPartition, int], RecordStamp] = {}
        level = isolation.value
        with self._lock:
            get, recent = self._kept.get, self._kept.move_to_end  # 100,000 positions a round: lean
            for tp, offset in positions:
                key = (level, tp)
                offsets = get(key)
                if offsets is None or (kept := offsets.get(offset)) is None:
                    continue
                if topic_ids is not None and kept[0] != topic_ids.get(tp.topic):
                    continue
                recent(key)
                if len(offsets) > 1:
                    offsets[offset] = offsets.pop(offset)  # the partition's most recent position
                found[(tp, offset)] = kept[1]
        return found

    def keep(
        self,
        stamps: Mapping[tuple[TopicPartition, int], RecordStamp | str],
        topic_ids: Mapping[str, str],
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
    ) -> None:
        """Keep the stamps read (an answer saying why none was read is not kept, nor a stamp of a
        topic without an id)."""
        level = isolation.value
        with self._lock:
            for (tp, offset), stamp in stamps.items():
                topic_id = topic_ids.get(tp.topic)
                if not isinstance(stamp, RecordStamp) or not topic_id:
                    continue
                offsets = self._kept.setdefault((level, tp), {})
                offsets.pop(offset, None)
                offsets[offset] = (topic_id, stamp)
                while len(offsets) > self.PER_PARTITION:
                    del offsets[next(iter(offsets))]
                self._kept.move_to_end((level, tp))
            while len(self._kept) > self.partitions:
                self._kept.popitem(last=False)


class RunwayReader:
    """The runway facts, read in a thread while the caller goes on (a validation asks for the
    offsets meanwhile: the record reads take a consumer's connection and a fetch round, about as
    long as the ListOffsets lookups).

    ``start`` guesses the positions (where the checkpoint resumes, before the cluster is described:
    a guessed partition that does not exist is never wanted, and the read ends without it). ``facts``
    tells the read which positions are wanted (it ends once those are read), waits for it, and
    reads the wanted positions it did not guess, and again those it found at the log end or past
    it (records may have arrived by the time the offsets were asked). A record found ahead stays
    the answer (the first record at or after a position does not change), and so does a fetch
    error or a timeout (reading again would repeat it). ``close`` stops a read still going (the
    caller failed) and waits a few seconds at most for its thread. A guess of more than
    :data:`READ_AHEAD_MAX` positions is not read ahead: ``facts`` reads the wanted ones.

        reader = RunwayReader(kafka)
        reader.start(positions)      # returns at once
        ...                          # ListOffsets, judging
        facts = reader.facts(wanted)
    """

    def __init__(
        self,
        kafka: KafkaConfig,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        cache: StampCache | None = None,
    ) -> None:
        self.kafka, self.isolation, self.cache = kafka, isolation, cache
        self._ahead_known: dict[tuple[TopicPartition, int], RecordStamp] = {}
        self._until = ReadUntil()
        self._thread: threading.Thread | None = None
        self._started = False
        self._read: RunwayFacts | BaseException | None = None

    def start(self, positions: Iterable[tuple[TopicPartition, int]]) -> None:
        if self._started:
            raise RuntimeError("a RunwayReader reads once")
        self._started = True
        guessed = frozenset(positions)
        if len(guessed) > READ_AHEAD_MAX:
            return  # facts() reads the wanted positions after all
        if self.cache is not None:  # not read ahead; facts() checks the topic ids before using them
            self._ahead_known = self.cache.lookup(guessed, isolation=self.isolation)
        self._thread = threading.Thread(target=self._run, args=(guessed,), name="runway-reader", daemon=True)
        self._thread.start()

    def _run(self, positions: frozenset[tuple[TopicPartition, int]]) -> None:
        try:
            self._read = runway_facts(
                self.kafka, positions, self.isolation, until=self._until, known=self._ahead_known
            )
        except BaseException as exc:  # handed to the caller's thread by facts()
            self._read = exc

    def facts(
        self, positions: Iterable[tuple[TopicPartition, int]], topic_ids: Mapping[str, str] | None = None
    ) -> RunwayFacts:
        """The facts of ``positions``: those read ahead, plus a read of the ones not guessed and of
        those found at or past the log end (see the class). With a cache, its stamps of topics whose
        id is still ``topic_ids``' are used, and the stamps read are kept in it."""
        wanted = frozenset(positions)
        self._until.want(wanted)
        self.wait()
        read = self._read
        if isinstance(read, BaseException):
            raise read
        ids = topic_ids or {}
        valid = self.cache.lookup(wanted, ids, self.isolation) if self.cache is not None else {}
        if read is None:
            facts = runway_facts(self.kafka, wanted, self.isolation, known=valid)
        else:
            stamps = {k: v for k, v in read.stamps.items() if k not in self._ahead_known}
            stamps.update(valid)
            # A stamp given to the read ahead from the cache but of a topic recreated since is read.
            again = {k for k in wanted if k not in stamps or stamps[k] in _READ_AGAIN}
            if again:
                more = runway_facts(self.kafka, again, self.isolation)
                facts = RunwayFacts(
                    {**read.retention, **more.retention},
                    {**stamps, **more.stamps},
                    {**read.sizes, **more.sizes},
                )
            else:
                facts = RunwayFacts(read.retention, stamps, read.sizes)
        # those found in the cache are kept already (lookup made them recent)
        if self.cache is not None and len(valid) < len(facts.stamps):
            self.cache.keep({k: v for k, v in facts.stamps.items() if k not in valid}, ids, self.isolation)
        return facts

    def wait(self) -> None:
        """Wait for the read ahead to end: every guessed position answered (or, after ``facts``,
        every wanted one), stopped, or the timeout."""
        if self._thread is not None:
            self._thread.join()

    @property
    def reading(self) -> bool:
        """Whether the read ahead is still going."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        self._until.stop()
        if self._thread is not None:
            self._thread.join(_CLOSE_WAIT_S)
