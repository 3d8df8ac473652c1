"""Read partitions up to the end they had when reading began (Kafka Connect's ``readToLogEnd``).

Steps, as ``KafkaBasedLog.readToLogEnd`` does them:

1. snapshot each partition's end: the high watermark, or under read_committed the last stable
   offset (what a read_committed reader can reach);
2. seek to the start positions (``None``: the log start offset);
3. poll until every partition's position is ≥ its snapshot end, then stop.

Edge cases handled:

* empty partitions (start ≥ end) are done without a fetch;
* transaction control records take offsets but are never delivered: the consumer's position moves
  past them, so "done" compares the position, not the last record's offset (+1);
* aborted records are not delivered under read_committed (the position still moves past them);
* records deleted under the reader (DeleteRecords, retention): the fetch is OUT_OF_RANGE; as a
  replica fetcher does (``AbstractFetcherThread.handleOutOfRangeError``), reading continues at the
  new log start offset and the skipped offsets are reported as a gap;
* a deadline: partitions not done by then raise :class:`~recovery.errors.KafkaUnavailable`.

Nothing is committed: the consumer uses ``assign`` (no group membership) and never commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from recovery.errors import ConfigError, KafkaError, KafkaUnavailable, TopicNotFound
from recovery.kafka.admin import (
    Deadline,
    Isolation,
    KafkaAdmin,
    MissingPartition,
    error_code,
    is_transient,
    scrub,
    translate,
)
from recovery.kafka.config import KafkaConfig
from recovery.model import OffsetRange, TopicPartition


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as read; ``timestamp_ms`` is None when the record has none."""

    tp: TopicPartition
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class PartitionRead:
    """What reading one partition to its end found.

    ``start`` is where reading began, ``end`` the snapshot end (exclusive), ``records`` how many
    records were delivered (fewer than ``end - start`` with control records, aborted transactions,
    compaction or gaps). ``gaps`` are offset ranges deleted while (or before) they could be read.
    Timestamps are the smallest and largest seen (CreateTime is not monotonic).
    """

    tp: TopicPartition
    start: int
    end: int
    records: int = 0
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None
    gaps: tuple[OffsetRange, ...] = ()

    @property
    def skipped_offsets(self) -> int:
        return sum(gap.size for gap in self.gaps)


@dataclass
class _State:
    """Mutable progress of one partition (counted per record, so kept out of the frozen value)."""

    tp: TopicPartition
    start: int
    end: int
    position: int
    done: bool = False
    records: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    gaps: list[OffsetRange] = field(default_factory=list)

    def count(self, ts: int | None) -> None:
        self.records += 1
        if ts is not None:
            self.min_ts = ts if self.min_ts is None else min(self.min_ts, ts)
            self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)

    def freeze(self) -> PartitionRead:
        return PartitionRead(
            self.tp, self.start, self.end, self.records, self.min_ts, self.max_ts, tuple(self.gaps)
        )


Progress = Callable[[int, int], None]


class LogReader:
    """Read an assignment to its snapshot end; iterate :meth:`batches`, then look at :attr:`summary`.

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
    ) -> None:
        self.config = config
        self.starts = dict(sorted(starts.items()))
        self.isolation = isolation
        self.deadline_s = config.timeout_s if deadline_s is None else deadline_s
        self.batch_size = batch_size
        self.progress = progress
        self._states: dict[TopicPartition, _State] = {}
        self._admin = KafkaAdmin(config)
        self._finished = False

    @property
    def summary(self) -> dict[TopicPartition, PartitionRead]:
        """Per partition: records read, time span and gaps (complete once :meth:`batches` ended)."""
        return {tp: state.freeze() for tp, state in self._states.items()}

    @property
    def total_offsets(self) -> int:
        return sum(s.end - s.start for s in self._states.values())

    def _covered(self) -> int:
        return sum(min(s.position, s.end) - s.start for s in self._states.values())

    def _snapshot(self) -> None:
        ranges = self._admin.offset_ranges(self.starts, self.isolation)
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
            self._states[tp] = _State(tp, start, end, start, done=start >= offsets.end, gaps=gaps)

    def batches(self) -> Iterator[tuple[ConsumedRecord, ...]]:
        """Yield the records in batches (each batch from one poll) until every partition is done."""
        from confluent_kafka import Consumer, KafkaException

        if self._finished:
            raise RuntimeError("a LogReader reads once; make a new one")
        self._finished = True
        deadline = Deadline(self.deadline_s)
        self._snapshot()
        self._report()
        todo = [tp for tp, s in self._states.items() if not s.done]
        if not todo:
            return
        settings = self.config.client_config(
            **{
                # A throwaway group id: assign() never joins it and nothing is committed.
                "group.id": f"stream-recovery-read-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": self.isolation.value,
                # Report OUT_OF_RANGE to us instead of silently jumping (we record the gap).
                "auto.offset.reset": "error",
                "enable.partition.eof": True,
            }
        )
        try:
            consumer = Consumer(settings)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(
                f"Kafka consumer settings are invalid: {scrub(str(exc), self.config)}"
            ) from None
        try:
            consumer.assign([self._ktp(tp, self._states[tp].position) for tp in todo])
            yield from self._poll(consumer, deadline)
        except KafkaException as exc:
            raise translate(exc, "reading to the end", self.config) from exc
        finally:
            consumer.close()

    def _ktp(self, tp: TopicPartition, offset: int) -> Any:
        from confluent_kafka import TopicPartition as KafkaTP

        return KafkaTP(tp.topic, tp.partition, offset)

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self._covered(), self.total_offsets)

    def _poll(self, consumer: Any, deadline: Deadline) -> Iterator[tuple[ConsumedRecord, ...]]:
        while True:
            pending = [tp for tp, s in self._states.items() if not s.done]
            if not pending:
                return
            if deadline.expired():
                raise self._timed_out(pending)
            messages = consumer.consume(self.batch_size, timeout=min(0.5, max(0.01, deadline.remaining())))
            batch: list[ConsumedRecord] = []
            for message in messages:
                tp = TopicPartition(message.topic(), message.partition())
                state = self._states.get(tp)
                error = message.error()
                if error is not None:
                    self._on_error(consumer, tp, state, message, deadline)
                    continue
                if state is None or state.done or message.offset() >= state.end:
                    continue  # past the snapshot end: not part of this read
                batch.append(self._record(tp, message))
                state.position = message.offset() + 1
                state.count(batch[-1].timestamp_ms)
            self._check_positions(consumer)
            self._report()
            if batch:
                yield tuple(batch)

    def _check_positions(self, consumer: Any) -> None:
        pending = [tp for tp, s in self._states.items() if not s.done]
        if not pending:
            return
        for ktp in consumer.position([self._ktp(tp, -1) for tp in pending]):
            state = self._states[TopicPartition(ktp.topic, ktp.partition)]
            # The position moves past control records and aborted transactions that are never delivered.
            if ktp.offset >= 0:
                state.position = max(state.position, ktp.offset)
            if state.position >= state.end:
                self._finish(consumer, state)

    def _finish(self, consumer: Any, state: _State) -> None:
        state.done = True
        consumer.pause([self._ktp(state.tp, -1)])

    def _on_error(
        self, consumer: Any, tp: TopicPartition, state: _State | None, message: Any, deadline: Deadline
    ) -> None:
        from confluent_kafka import KafkaException

        error = message.error()
        name = error.name()
        if state is None:
            return
        if name == "_PARTITION_EOF":
            state.position = max(state.position, message.offset())
            if state.position >= state.end:
                self._finish(consumer, state)
            return
        if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            self._skip_deleted(consumer, state, message.offset(), deadline)
            return
        exc = KafkaException(error)
        if is_transient(exc) or error.retriable():
            return  # librdkafka retries the fetch itself; the deadline bounds it
        raise KafkaError(f"reading {tp}: {error_code(exc)}: {error.str()}")

    def _skip_deleted(self, consumer: Any, state: _State, failed_at: int, deadline: Deadline) -> None:
        """OUT_OF_RANGE below the log start: continue at the new log start and record the gap."""
        tp = state.tp
        at = failed_at if failed_at >= 0 else state.position
        current = self._admin.offset_ranges([tp], self.isolation)[tp]
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

    def _record(self, tp: TopicPartition, message: Any) -> ConsumedRecord:
        from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

        kind, ts = message.timestamp()
        headers = tuple((name, value) for name, value in (message.headers() or ()))
        return ConsumedRecord(
            tp,
            message.offset(),
            None if kind == TIMESTAMP_NOT_AVAILABLE or ts < 0 else ts,
            message.key(),
            message.value(),
            headers,
        )

    def _timed_out(self, pending: list[TopicPartition]) -> KafkaUnavailable:
        where = ", ".join(
            f"{tp} at {self._states[tp].position} of {self._states[tp].end}" for tp in pending[:5]
        )
        more = f" and {len(pending) - 5} more" if len(pending) > 5 else ""
        return KafkaUnavailable(
            f"read-to-end did not reach the end within {self.deadline_s:g}s: {where}{more}. "
            "Nothing beyond what was printed was read; try again with a longer --timeout."
        )


def read_to_end(
    config: KafkaConfig,
    starts: Mapping[TopicPartition, int | None],
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    *,
    deadline_s: float | None = None,
) -> tuple[list[ConsumedRecord], dict[TopicPartition, PartitionRead]]:
    """Read ``starts`` (``None``: from the log start) to the snapshot end; all records and the summary.

    For large reads iterate :class:`LogReader` ``.batches()`` instead of holding every record.
    """
    reader = LogReader(config, starts, isolation, deadline_s=deadline_s)
    records = [record for batch in reader.batches() for record in batch]
    return records, reader.summary
