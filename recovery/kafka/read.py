"""Read partitions up to the end they had when reading began (Kafka Connect's ``readToLogEnd``).

Steps, as ``KafkaBasedLog.readToLogEnd`` does them:

1. snapshot each partition's end once: the high watermark, or under read_committed the last
   stable offset (what a read_committed reader can reach); :meth:`LogReader.from_selection` takes
   the start and the end from the same ListOffsets answers;
2. seek to the start positions (``None``: the log start offset);
3. consume until every partition's position is ≥ its snapshot end, then stop.

Speed: one consumer is assigned every partition (librdkafka fetches them together, one Fetch
request per broker, and prefetches while we work); a large read for the summary alone is shared
with helper processes (:mod:`recovery.kafka._shared_read`), a group of partitions each, since
turning fetched records into Python objects is the cost and one interpreter does it on one core;
records are taken in batches
(``Consumer.consume(num_messages=…)``) and handled per run of one partition with C-level
``map`` calls, so no Python object is made per record unless asked: :meth:`LogReader.run` keeps
only the summary, :meth:`LogReader.chunks` hands over :class:`~recovery.kafka.values.RecordChunk`
columns, :meth:`LogReader.batches` makes a :class:`ConsumedRecord` per record. The consumer is
opened while the offsets are looked up (its connections overlap the lookup), and no call waits for
more records than are left to the snapshot ends (``consume(n)`` otherwise sits out its timeout
after the last record).

Edge cases handled:

* empty partitions (start ≥ end) are done without a fetch;
* transaction control records take offsets but are never delivered: the consumer's position moves
  past them, so "done" compares the position, not the last record's offset (+1);
* aborted records are not delivered under read_committed (the position still moves past them);
* records at or past the snapshot end (written after it) are not part of the read;
* records deleted under the reader (DeleteRecords, retention): the fetch is OUT_OF_RANGE; as a
  replica fetcher does (``AbstractFetcherThread.handleOutOfRangeError``), reading continues at the
  new log start offset and the skipped offsets are reported as a gap;
* a deadline: partitions not done by then raise :class:`~recovery.errors.KafkaUnavailable`.

Nothing is committed: the consumer uses ``assign`` (no group membership) and never commits.
"""

from __future__ import annotations

import bisect
import gc
import logging
import operator
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from itertools import groupby
from typing import TYPE_CHECKING, cast

from recovery.core.model import Isolation, NoMatch, OffsetRange, TopicPartition, TopicSelection
from recovery.core.specs import TimeKind, TimeSpec
from recovery.errors import ConfigError, KafkaError, KafkaUnavailable, TopicNotFound
from recovery.kafka._errors import (
    AUTHORIZATION,
    error_code,
    error_text,
    is_transient,
    needs,
    not_authorized,
    scrub,
    translate,
)
from recovery.kafka._retry import Deadline
from recovery.kafka._shared_read import Helper, ReadState, groups, worth_sharing
from recovery.kafka.admin import admin_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.values import (
    ConsumedRecord,
    Headers,
    MissingPartition,
    OffsetRow,
    PartitionOffsets,
    PartitionRead,
    ReadSummary,
    RecordChunk,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import TopicPartition as KafkaTP

__all__ = [
    "ConsumedRecord",
    "LogReader",
    "PartitionRead",
    "Progress",
    "ReadSummary",
    "RecordChunk",
    "read_to_end",
]

# Consumer settings we choose unless the config sets them (``-X`` / ``--command-config`` win):
# a deep prefetch queue (librdkafka stops fetching a partition once it holds queued.min.messages
# of it; the default, 100,000, left the reader waiting on fetches), bounded to 256 MiB in all,
# and a short broker wait once a partition is caught up (the end-of-partition event comes with
# the next, empty, fetch answer).
_FETCH_DEFAULTS: dict[str, str | int | float | bool] = {
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.wait.max.ms": 100,
}
# Seconds one consume() call may wait for a full batch; near the snapshot ends (fewer offsets
# left than a batch), for what is left.
_WAIT_S = 0.5
_WAIT_NEAR_END_S = 0.05
# Seconds between two progress reports (the bar redraws at most that often).
_PROGRESS_EVERY_S = 0.2

log = logging.getLogger(__name__)

_TS_VALUE = operator.itemgetter(1)  # Message.timestamp() -> (type, ms): the ms (-1 when none)


Progress = Callable[[int, int], None]


class LogReader:
    """Read an assignment to its snapshot end, once, in one of three ways:

    * :meth:`run`: keep only the summary (the fastest);
    * :meth:`chunks`: per poll, the records as :class:`RecordChunk` columns;
    * :meth:`batches`: per poll, the records as :class:`ConsumedRecord` values.

    Then look at :attr:`summary` (or :meth:`result`).

    Example::

        reader = LogReader(config, {TopicPartition("orders", 0): None}, Isolation.READ_COMMITTED)
        for batch in reader.batches():
            for record in batch: ...
        reader.summary[TopicPartition("orders", 0)].records
    """

    def __init__(
        self,
        config: KafkaConfig,
        starts: Mapping[TopicPartition, int | None],
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        *,
        deadline_s: float | None = None,
        batch_size: int = 1000,
        progress: Progress | None = None,
        processes: int | None = None,
    ) -> None:
        self.config = config
        self.starts = dict(sorted(starts.items()))
        self.isolation = isolation
        self.deadline_s = config.timeout_s if deadline_s is None else deadline_s
        self.batch_size = batch_size
        self.progress = progress
        # Processes sharing a read for the summary alone (:meth:`run`); None: as many as it is worth.
        self.processes = processes
        self._states: dict[TopicPartition, ReadState] = {}
        self._helpers: list[Helper] = []  # one per group of partitions read by another process
        self._deadline_at: float | None = None  # time.monotonic() deadline of a helper's share
        self._finished = False
        # The snapshot, when it was already read (from_selection): not asked for again.
        self._ranges: Mapping[TopicPartition, PartitionOffsets | MissingPartition] | None = None
        self._reported_at = 0.0
        self._one_topic: str | None = None  # the topic, when every partition read is of one topic
        self._consumer: Consumer | None = None  # opened ahead of the read by from_selection

    @classmethod
    def from_selection(
        cls,
        config: KafkaConfig,
        selection: TopicSelection,
        start: TimeSpec,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        *,
        deadline_s: float | None = None,
        batch_size: int = 1000,
        progress: Progress | None = None,
        processes: int | None = None,
    ) -> LogReader:
        """A reader of every partition ``selection`` names, from ``start``: ``earliest`` the log start,
        ``latest`` the end, a time the first record at or after it (the end when there is none).

        The start and the snapshot end come from the same ListOffsets answers (one round). A
        partition named explicitly that does not exist makes the read raise TopicNotFound.
        """
        admin = admin_for(config)
        # The consumer connects (bootstrap, metadata, coordinator) while the offsets are looked up.
        consumer = _new_consumer(config, isolation)
        try:
            tps, topics = admin.resolve(selection)
            rows = admin.offset_rows(tps, start, isolation, NoMatch.LATEST, topics=topics)
        except BaseException:
            consumer.close()
            raise
        # None: from the log start (earliest; and a missing partition, which the read reports).
        from_log_start = start.kind is TimeKind.EARLIEST
        starts = {
            tp: (row.lookup.offset if isinstance(row, OffsetRow) and not from_log_start else None)
            for tp, row in rows.items()
        }
        reader = cls(
            config,
            starts,
            isolation,
            deadline_s=deadline_s,
            batch_size=batch_size,
            progress=progress,
            processes=processes,
        )
        reader._ranges = {
            tp: (row.offsets if isinstance(row, OffsetRow) else row) for tp, row in rows.items()
        }
        reader._consumer = consumer
        return reader

    @classmethod
    def share(
        cls,
        config: KafkaConfig,
        states: list[ReadState],
        isolation: Isolation,
        *,
        deadline_s: float,
        deadline_at: float,
        progress: Progress | None = None,
    ) -> LogReader:
        """A reader of a helper process's share: ``states`` as the parent's snapshot left them
        (no snapshot of its own), read in this process alone, until the parent's deadline
        (``deadline_at``, ``time.monotonic()``; ``deadline_s`` as the user gave it, for messages)."""
        reader = cls(
            config,
            {state.tp: state.position for state in states},
            isolation,
            deadline_s=deadline_s,
            progress=progress,
            processes=1,
        )
        reader._states = {state.tp: state for state in states}
        reader._deadline_at = deadline_at
        return reader

    @property
    def states(self) -> list[ReadState]:
        """Each partition's progress (a helper process sends them back to its parent)."""
        return list(self._states.values())

    @property
    def summary(self) -> dict[TopicPartition, PartitionRead]:
        """Per partition: records read, time span and gaps (complete once the read ended)."""
        return {tp: state.freeze() for tp, state in self._states.items()}

    def result(self) -> ReadSummary:
        """The summary as a result value (complete once the read ended)."""
        return ReadSummary(tuple(self.summary.values()))

    @property
    def total_offsets(self) -> int:
        return sum(s.end - s.start for s in self._states.values())

    def _covered(self) -> int:
        elsewhere = {tp for helper in self._helpers for tp in helper.partitions}
        own = sum(min(s.position, s.end) - s.start for tp, s in self._states.items() if tp not in elsewhere)
        return own + sum(helper.covered for helper in self._helpers)

    # -- the three ways to read ---------------------------------------------------------------------

    def run(self) -> ReadSummary:
        """Read to the end keeping nothing but the summary; return it."""
        with _fewer_collections():
            for _ in self._read(keep=False):
                pass
        return self.result()

    def chunks(self) -> Iterator[tuple[RecordChunk, ...]]:
        """Yield, per poll, its records as chunks (a run of one partition each, in poll order)."""
        return self._read(keep=True)

    def batches(self) -> Iterator[tuple[ConsumedRecord, ...]]:
        """Yield the records in batches (each batch from one poll) until every partition is done."""
        for chunks in self._read(keep=True):
            yield tuple(record for chunk in chunks for record in chunk.records())

    # -- reading ------------------------------------------------------------------------------------

    def _snapshot(self) -> None:
        if self._states:  # a helper's share (LogReader.share): the parent took the snapshot
            return
        ranges = self._ranges
        if ranges is None:
            ranges = admin_for(self.config).offset_ranges(self.starts, self.isolation)
        missing = [r for r in ranges.values() if isinstance(r, MissingPartition)]
        if missing:
            named = ", ".join(f"{m.tp} ({m.reason.value})" for m in missing[:5])
            raise TopicNotFound(f"cannot read {named}: not on the cluster at {self.config.bootstrap_servers}")
        for tp, offsets in ranges.items():
            assert not isinstance(offsets, MissingPartition)
            wanted = self.starts[tp]
            start = offsets.log_start if wanted is None else wanted
            gaps: list[OffsetRange] = []
            if start < offsets.log_start:
                # Already deleted before we started: the gap is reported, reading starts at log start.
                gaps.append(OffsetRange(start, offsets.log_start))
                start = offsets.log_start
            end = max(offsets.end, start)
            self._states[tp] = ReadState(tp, start, end, start, done=start >= offsets.end, gaps=gaps)

    def close(self) -> None:
        """Close the consumer opened ahead of the read, if the read never ran (it closes its own)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    def _read(self, *, keep: bool) -> Iterator[tuple[RecordChunk, ...]]:
        from confluent_kafka import KafkaException

        if self._finished:
            raise RuntimeError("a LogReader reads once; make a new one")
        self._finished = True
        deadline = Deadline(self.deadline_s)
        if self._deadline_at is not None:  # a helper's share: the parent's deadline, to the instant
            deadline.at = self._deadline_at
        try:
            self._snapshot()
        except BaseException:
            self.close()
            raise
        self._report(force=True)
        todo = [tp for tp, s in self._states.items() if not s.done]
        if not todo:
            self.close()
            return
        topics = {tp.topic for tp in todo}
        self._one_topic = next(iter(topics)) if len(topics) == 1 else None
        consumer, self._consumer = self._consumer or _new_consumer(self.config, self.isolation), None
        try:
            own = todo if keep else self._share_out(todo, deadline)
            consumer.assign([self._ktp(tp, self._states[tp].position) for tp in own])
            yield from self._poll(consumer, deadline, keep, own)
            for helper in self._helpers:
                self._states.update(helper.finish(deadline, self._report))
            if self._helpers:
                self._report(force=True)  # _poll's last report was of this process's group
        except KafkaException as exc:
            raise translate(exc, "reading to the end", self.config, operation="Read") from exc
        finally:
            for helper in self._helpers:
                helper.stop()
            consumer.close()

    def _share_out(self, todo: list[TopicPartition], deadline: Deadline) -> list[TopicPartition]:
        """Start a helper process for each group of partitions but the first, which this process
        reads itself (the largest: the helpers first pay an interpreter's start); returns it."""
        left = {tp: self._states[tp].end - self._states[tp].position for tp in todo}
        shares = worth_sharing(left) if self.processes is None else groups(left, self.processes)
        try:
            for group in shares[1:]:
                states = [self._states[tp] for tp in group]
                progress = self.progress is not None
                self._helpers.append(
                    Helper.start(self.config, self.isolation, states, deadline, progress=progress)
                )
        except (OSError, ValueError) as exc:  # no process could be started: this one reads everything
            log.warning("reading in one process: a helper process could not be started (%s)", exc)
            for helper in self._helpers:
                helper.stop()
            self._helpers = []
            return todo
        return shares[0]

    def _ktp(self, tp: TopicPartition, offset: int) -> KafkaTP:
        from confluent_kafka import TopicPartition as KafkaTP

        return KafkaTP(tp.topic, tp.partition, offset)

    def _report(self, *, force: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if force or now - self._reported_at >= _PROGRESS_EVERY_S:
            self._reported_at = now
            self.progress(self._covered(), self.total_offsets)

    def _poll(
        self, consumer: Consumer, deadline: Deadline, keep: bool, own: list[TopicPartition]
    ) -> Iterator[tuple[RecordChunk, ...]]:
        pending = [self._states[tp] for tp in own if not self._states[tp].done]
        while pending:
            if deadline.expired():
                raise self._timed_out([s.tp for s in pending])
            # consume(n) returns when n messages arrived or at the timeout, whichever is first:
            # never ask for more than the offsets left to the snapshot ends, else the last call
            # waits out its whole timeout after the final record (0.5 s of every read). Control
            # records and aborted ones take offsets but are never delivered: near the end the
            # wait is short and the positions are checked after it.
            left = sum(s.end - s.position for s in pending)
            wanted = max(1, min(self.batch_size, left))
            wait = _WAIT_S if wanted == self.batch_size else _WAIT_NEAR_END_S
            for helper in self._helpers:
                helper.check()  # a helper's error ends the read now, not after this group
            messages = consumer.consume(wanted, timeout=min(wait, max(0.01, deadline.remaining())))
            chunks, events = self._take(consumer, messages, keep)
            for event in events:
                self._on_error(consumer, event, deadline)
            if len(messages) < wanted:
                # Caught up with what librdkafka prefetched: the position may have moved past
                # records never delivered (control records, aborted transactions).
                self._check_positions(consumer, pending)
            pending = [s for s in pending if not s.done]
            self._report(force=not pending)
            if chunks:
                yield chunks

    def _take(
        self, consumer: Consumer, messages: list[Message], keep: bool
    ) -> tuple[tuple[RecordChunk, ...], list[Message]]:
        """Count a poll's records per run of one partition; return the runs as chunks (if ``keep``)
        and the poll's events (errors, end of partition), in order.

        Per record this costs a few C-level calls (``map`` over ``Message`` methods), no Python
        bytecode: an event always has timestamp -1 (librdkafka's ``rd_kafka_message_timestamp``),
        so events are looked for only in a poll with a timestamp < 0. Records of a partition
        already done, or at or past its snapshot end, are not part of the read.
        """
        from confluent_kafka import Message

        if not messages:
            return (), []
        # A record's offset is never None (the stubs allow it for events, which are set aside below).
        offset_of = cast("Callable[[Message], int]", Message.offset)
        stamps: list[int] = list(map(_TS_VALUE, map(Message.timestamp, messages)))
        events: list[Message] = []
        if min(stamps) < 0:  # an event, or a record without a timestamp
            events = [m for m in messages if m.error() is not None]
            if events:
                kept = [i for i, m in enumerate(messages) if m.error() is None]
                messages, stamps = [messages[i] for i in kept], [stamps[i] for i in kept]
        chunks: list[RecordChunk] = []
        at = 0
        for (topic, partition), size in self._runs(messages):
            run, run_stamps = messages[at : at + size], stamps[at : at + size]
            at += size
            state = self._states.get(TopicPartition(topic, partition))
            if state is None or state.done:
                continue
            offsets: list[int] | None = None
            if offset_of(run[-1]) >= state.end:
                offsets = list(map(offset_of, run))
                cut = bisect.bisect_left(offsets, state.end)
                run, run_stamps, offsets = run[:cut], run_stamps[:cut], offsets[:cut]
                if not run:
                    self._finish(consumer, state)
                    continue
            state.count(run_stamps)
            state.position = max(state.position, offset_of(run[-1]) + 1)
            if keep:
                chunks.append(
                    RecordChunk(
                        state.tp,
                        offsets if offsets is not None else list(map(offset_of, run)),
                        run_stamps,
                        list(map(Message.key, run)),
                        list(map(Message.value, run)),
                        cast("list[Headers]", list(map(Message.headers, run))),
                    )
                )
            if state.position >= state.end:
                self._finish(consumer, state)
        return tuple(chunks), events

    def _runs(self, messages: list[Message]) -> list[tuple[tuple[str, int], int]]:
        """``[((topic, partition), length), ...]``: the poll's runs of one partition, in order."""
        from confluent_kafka import Message

        if not messages:
            return []
        # A record always has its topic and partition (only some events lack them: none is left here).
        partitions = cast("list[int]", list(map(Message.partition, messages)))
        if self._one_topic is not None:
            if partitions.count(partitions[0]) == len(partitions):
                return [((self._one_topic, partitions[0]), len(partitions))]
            return [((self._one_topic, p), len(list(run))) for p, run in groupby(partitions)]
        keys = list(zip(cast("Iterator[str]", map(Message.topic, messages)), partitions, strict=True))
        return [(key, len(list(run))) for key, run in groupby(keys)]

    def _check_positions(self, consumer: Consumer, states: list[ReadState]) -> None:
        pending = [s.tp for s in states if not s.done]
        if not pending:
            return
        for ktp in consumer.position([self._ktp(tp, -1) for tp in pending]):
            state = self._states[TopicPartition(ktp.topic, ktp.partition)]
            # The position moves past control records and aborted transactions that are never delivered.
            if ktp.offset >= 0:
                state.position = max(state.position, ktp.offset)
            if state.position >= state.end:
                self._finish(consumer, state)

    def _finish(self, consumer: Consumer, state: ReadState) -> None:
        state.done = True
        consumer.pause([self._ktp(state.tp, -1)])

    def _on_error(self, consumer: Consumer, message: Message, deadline: Deadline) -> None:
        from confluent_kafka import KafkaException

        error = cast("RdKafkaError", message.error())  # an event: its error is set
        name = error.name()
        # No topic or partition for an error of the client's own: no state matches it (ignored).
        tp = TopicPartition(cast(str, message.topic()), cast(int, message.partition()))
        state = self._states.get(tp)
        if state is None or state.done:
            return
        if name == "_PARTITION_EOF":
            state.position = max(state.position, cast(int, message.offset()))
            if state.position >= state.end:
                self._finish(consumer, state)
            return
        if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            self._skip_deleted(consumer, state, cast(int, message.offset()), deadline)
            return
        exc = KafkaException(error)
        if is_transient(exc) or error.retriable():
            return  # librdkafka retries the fetch itself; the deadline bounds it
        if name in AUTHORIZATION:
            raise not_authorized(f"reading {tp}", name, self.config, needs(name, "Read", topic=tp.topic))
        raise KafkaError(f"reading {tp}: {error_code(exc)}: {error.str()}")

    def _skip_deleted(self, consumer: Consumer, state: ReadState, failed_at: int, deadline: Deadline) -> None:
        """OUT_OF_RANGE below the log start: continue at the new log start and record the gap."""
        tp = state.tp
        at = failed_at if failed_at >= 0 else state.position
        current = admin_for(self.config).offset_ranges([tp], self.isolation)[tp]
        if isinstance(current, MissingPartition):
            raise TopicNotFound(f"{tp} disappeared while it was read ({current.reason.value})")
        new_start = current.log_start
        if new_start <= at:
            # Out of range above the end (truncation after a leader change): not a deletion we can skip.
            raise KafkaError(
                f"reading {tp}: offset {at} is out of range (log start {new_start}, end {current.end}); "
                "the partition was truncated or recreated"
            )
        state.gaps.append(OffsetRange(at, min(new_start, state.end)))
        state.position = new_start
        if new_start >= state.end:
            self._finish(consumer, state)
            return
        # seek() is refused on a partition in the error state ("Erroneous state"); re-assigning it works.
        consumer.incremental_unassign([self._ktp(tp, -1)])
        consumer.incremental_assign([self._ktp(tp, new_start)])

    def _timed_out(self, pending: list[TopicPartition]) -> KafkaUnavailable:
        where = ", ".join(
            f"{tp} at {self._states[tp].position} of {self._states[tp].end}" for tp in pending[:5]
        )
        more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
        return KafkaUnavailable(
            f"read-to-end did not reach the end within {self.deadline_s:g}s: {where}{more}. "
            "Nothing beyond what was printed was read; try again with a longer deadline (`deadline_s`)."
        )


_gc_lock = threading.Lock()
_gc_readers = 0
_gc_before: tuple[int, ...] = ()


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Every record read is a GC-tracked ``Message`` (and a timestamp tuple) that reference counting
    frees a moment later; at the default threshold (700 allocations) the cyclic collector passes
    over them every poll, ~10% of a read's CPU for nothing. While :meth:`LogReader.run` reads (no
    caller holds anything between polls) it runs 100x less often; the first of overlapping reads
    raises the threshold, the last puts it back; a collector switched off stays off."""
    global _gc_readers, _gc_before
    with _gc_lock:
        _gc_readers += 1
        if _gc_readers == 1:
            _gc_before = gc.get_threshold()
            if _gc_before[0]:  # 0: automatic collection is off, and stays off
                gc.set_threshold(max(_gc_before[0], 70_000), *_gc_before[1:])
    try:
        yield
    finally:
        with _gc_lock:
            _gc_readers -= 1
            if _gc_readers == 0:
                gc.set_threshold(*_gc_before)


def _new_consumer(config: KafkaConfig, isolation: Isolation) -> Consumer:
    """A consumer for one read: assign() only (no group membership), nothing committed."""
    from confluent_kafka import Consumer, KafkaException

    settings = {k: v for k, v in _FETCH_DEFAULTS.items() if k not in config.properties}
    settings.update(
        {
            # A throwaway group id: assign() never joins it and nothing is committed.
            "group.id": f"stream-recovery-read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": isolation.value,
            # Report OUT_OF_RANGE to us instead of silently jumping (we record the gap).
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
    )
    try:
        return Consumer(config.client_config(**settings))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ConfigError(f"Kafka consumer settings are invalid: {scrub(error_text(exc), config)}") from None


def read_to_end(
    config: KafkaConfig,
    starts: Mapping[TopicPartition, int | None],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    *,
    deadline_s: float | None = None,
) -> tuple[list[ConsumedRecord], dict[TopicPartition, PartitionRead]]:
    """Read ``starts`` (``None``: from the log start) to the snapshot end; all records and the summary.

    For large reads iterate :class:`LogReader` ``.chunks()`` or ``.batches()`` instead of holding
    every record, or call ``.run()`` for the summary alone.
    """
    reader = LogReader(config, starts, isolation, deadline_s=deadline_s)
    records = [record for batch in reader.batches() for record in batch]
    return records, reader.summary
