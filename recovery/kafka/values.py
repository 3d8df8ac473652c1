"""What the Kafka edge answers, as frozen values (pure: no IO).

* :class:`TopicInfo`         a topic as the metadata describes it (partitions, KIP-516 topic id,
  in Kafka's text form: :func:`kafka_topic_id`);
* :class:`PartitionOffsets`  a partition's log start offset, high watermark and last stable offset;
* :class:`MissingPartition`  a partition that was asked for and does not exist (never omitted);
* :class:`TimeLookup`        the offset a ``--time`` maps to in one partition;
* :class:`OffsetRow`         one row of ``stream-recovery offsets``: positions plus the lookup;
* :class:`OffsetTable`       every row of ``stream-recovery offsets``, with its exit code;
* :class:`ConsumedRecord`, :class:`RecordChunk`, :class:`PartitionRead`, :class:`ReadSummary`  what
  ``read-to-end`` read (a chunk holds one partition's records of one poll, column by column).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from recovery.core.model import NoMatch, OffsetRange, TopicPartition
from recovery.core.specs import TimeSpec
from recovery.errors import ExitCode


class MissingReason(StrEnum):
    TOPIC_GONE = "TOPIC_GONE"  # the cluster has no topic of that name
    PARTITION_GONE = "PARTITION_GONE"  # the topic exists but has fewer partitions


def kafka_topic_id(text: str) -> str:
    """A topic id in Kafka's own text form: URL-safe base64 of its 16 bytes without padding
    (apache/kafka clients/src/main/java/org/apache/kafka/common/Uuid.java ``toString``:
    ``Base64.getUrlEncoder().withoutPadding()``), as kafka-topics.sh prints it. confluent_kafka's
    ``str(Uuid)`` is standard base64 (``+``, ``/``); ids recorded in that form earlier are read
    through this too, so both forms compare equal.

    Example: ``kafka_topic_id("a+b/cQ==")`` is ``"a-b_cQ"``.
    """
    return text.strip().replace("+", "-").replace("/", "_").rstrip("=")


class ListedTopic(NamedTuple):
    """A topic as the cluster's topic listing (Metadata) gives it: no topic id, which only
    DescribeTopics answers."""

    name: str
    partitions: int
    internal: bool


@dataclass(frozen=True)
class TopicInfo:
    """A topic as the metadata describes it; ``topic_id`` is its KIP-516 id (new on recreation).
    ``operations``: what the principal may do with it (``AclOperation`` names: ``READ``, ...), when
    asked for; None when not asked, or from a broker without an authorizer (which reports none)."""

    name: str
    topic_id: str
    partitions: int
    internal: bool = False
    operations: frozenset[str] | None = None


@dataclass(frozen=True)
class MissingPartition:
    """A partition that was asked for and does not exist."""

    tp: TopicPartition
    reason: MissingReason


class PartitionOffsets(NamedTuple):
    """What a partition holds now.

    ``last_stable`` is ``None`` unless read_committed was asked for. ``topic_id`` tells a recreated
    topic from the old one (KIP-516). (A named tuple: made for every partition of every lookup,
    100,000 a round in ``fleet serve``, four times faster than a frozen dataclass.)
    """

    tp: TopicPartition
    log_start: int
    high_watermark: int
    last_stable: int | None
    topic_id: str

    @property
    def end(self) -> int:
        """The end a reader sees: the last stable offset when known, else the high watermark."""
        return self.high_watermark if self.last_stable is None else self.last_stable

    @property
    def range(self) -> OffsetRange:
        return OffsetRange(self.log_start, self.end)


@dataclass(frozen=True)
class TimeLookup:
    """The answer to ``--time`` for one partition.

    ``offset`` is where a reader would start; ``timestamp_ms`` the timestamp of the record found
    (``None`` for earliest/latest, and when nothing matched). ``no_match`` is set when no record
    matched and the policy chose ``offset`` instead.
    """

    tp: TopicPartition
    time: TimeSpec
    offset: int
    timestamp_ms: int | None = None
    no_match: NoMatch | None = None


@dataclass(frozen=True)
class OffsetRow:
    """One row of ``stream-recovery offsets``: a partition's positions and the requested offset."""

    offsets: PartitionOffsets
    lookup: TimeLookup


@dataclass(frozen=True)
class OffsetTable:
    """What ``stream-recovery offsets`` shows: per partition, sorted, its positions and the offset
    ``time`` maps to, or why it is missing. Exit 1 when a partition asked for does not exist."""

    time: TimeSpec
    rows: Mapping[TopicPartition, OffsetRow | MissingPartition]

    @property
    def missing(self) -> tuple[MissingPartition, ...]:
        return tuple(row for row in self.rows.values() if isinstance(row, MissingPartition))

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.ACTION_NEEDED if self.missing else ExitCode.OK


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as read; ``timestamp_ms`` is None when the record has none."""

    tp: TopicPartition
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# A record's headers as librdkafka hands them over: None or [(name, value), ...].
Headers = Sequence[tuple[str, bytes | None]] | None


@dataclass(frozen=True)
class RecordChunk:
    """Consecutive records of one partition from one poll, column by column.

    Built without a Python object per record (so reading millions stays cheap); ``timestamps``
    holds -1 for a record without a timestamp. :meth:`records` gives them one by one.
    """

    tp: TopicPartition
    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: Sequence[Headers]

    def __len__(self) -> int:
        return len(self.offsets)

    def records(self) -> Iterator[ConsumedRecord]:
        tp = self.tp
        for offset, ts, key, value, headers in zip(
            self.offsets, self.timestamps, self.keys, self.values, self.headers, strict=True
        ):
            yield ConsumedRecord(tp, offset, ts if ts >= 0 else None, key, value, tuple(headers or ()))


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


@dataclass(frozen=True)
class ReadSummary:
    """What reading to the end found, per partition, sorted. Reaching the end is the answer (exit
    0); records deleted on the way are reported as gaps, not as a failure."""

    reads: tuple[PartitionRead, ...]

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK
