"""Domain values shared across the toolkit: frozen, typed, compared with ``==``.

This module imports only the standard library (a structural test checks it), so the planning core
can use it without pulling in any IO.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, NamedTuple, TypeAlias

JsonValue: TypeAlias = Any
"""A JSON value as ``json.loads`` gives it and ``json.dumps`` writes it: an object, an array, a
string, a number, a boolean or null. ``Any``, not a recursive union: ``json.loads`` returns ``Any``,
and the code that reads such a value checks each part with ``isinstance`` where it uses it."""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object as ``json.loads`` gives it, or one built to be written as JSON (``--output json``
rows and bodies, the toolkit's own ``_recovery/`` files)."""


class TopicPartition(NamedTuple):
    """A partition of a topic. A named tuple, not a dataclass: it is the key of every per-partition
    dict and set, and a tuple's hash and equality run in C (a dataclass's ran Python code, tens of
    thousands of times per 2,000-partition validate)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic} [{self.partition}]"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """What a partition still holds: offsets ``start`` (log start) up to ``end`` (exclusive)."""

    start: int  # log start offset (ListOffsets "earliest")
    end: int  # high watermark, or the last stable offset under read_committed

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"not an offset range: [{self.start}, {self.end})")

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.start <= offset <= self.end

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class PartitionRange:
    """Partitions ``lo`` (inclusive) up to ``hi`` (exclusive; ``None``: no upper bound)."""

    lo: int = 0
    hi: int | None = None

    def __contains__(self, partition: object) -> bool:
        return (
            isinstance(partition, int) and self.lo <= partition and (self.hi is None or partition < self.hi)
        )


@dataclass(frozen=True)
class TopicPattern:
    """A topic regex (matched against the whole name) and the partitions wanted (empty: all)."""

    regex: str
    partitions: tuple[PartitionRange, ...] = ()

    def matches_topic(self, topic: str) -> bool:
        return re.fullmatch(self.regex, topic) is not None

    def matches(self, topic: str, partition: int) -> bool:
        return self.matches_topic(topic) and (
            not self.partitions or any(partition in r for r in self.partitions)
        )


@dataclass(frozen=True)
class TopicSelection:
    """Which partitions to look at: a union of :class:`TopicPattern` items."""

    patterns: tuple[TopicPattern, ...]
    exclude_internal: bool = False

    def matches(self, topic: str, partition: int, *, internal: bool = False) -> bool:
        if internal and self.exclude_internal:
            return False
        return any(p.matches(topic, partition) for p in self.patterns)

    def matches_topic(self, topic: str, *, internal: bool = False) -> bool:
        if internal and self.exclude_internal:
            return False
        return any(p.matches_topic(topic) for p in self.patterns)


# -- vocabulary: the words options and results are made of, parsed once at the edge ----------------


class Isolation(StrEnum):
    """The reader whose view is wanted (the consumer's ``isolation.level``): ``latest`` is the high
    watermark under read_uncommitted, the last stable offset under read_committed."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


class NoMatch(StrEnum):
    """What a timestamp lookup returns for a partition without a record at or after the timestamp."""

    LATEST = "latest"  # the end a reader of the chosen isolation sees (kafka-consumer-groups does this)
    EARLIEST = "earliest"  # the log start offset
    FAIL = "fail"  # raise NoOffsetForTime (Spark's startingOffsetsByTimestampStrategy=error)


class OnBeyondEnd(StrEnum):
    """Where the clamp strategy moves a position past the log end (a recreated or truncated topic)."""

    LATEST = "latest"  # follower-style: to the log end, as a replica truncates to its leader
    EARLIEST = "earliest"  # to the log start: re-read a recreated topic from its beginning


class GateMode(StrEnum):
    """What the pre-start gate does when the query would not restart cleanly."""

    FAIL = "fail"  # raise with the report: the job does not start
    CLAMP = "clamp"  # repair follower-style within the loss budget, then start
    WARN = "warn"  # log the report and start as it is


@dataclass(frozen=True)
class CheckpointFile:
    """A file of a checkpoint that holds Kafka or Delta source offsets: ``offsets/<batch>`` or the
    initial offsets ``sources/<source>/0``. Ordered as Spark reads them: sources first (numbered,
    then named), then batches."""

    kind: Literal["sources", "offsets"]
    # The batch id; for sources/<id>/0 the source's index, or its name (Spark 4.2's
    # DataStreamReader.name: ASCII letters, digits and underscores).
    number: int | str

    @classmethod
    def offsets(cls, batch_id: int) -> CheckpointFile:
        return cls("offsets", batch_id)

    @classmethod
    def sources(cls, source_id: int | str) -> CheckpointFile:
        text = str(source_id)
        # an index as Spark spells it ("0", "12"); any other id is a name ("007" too)
        index = text.isascii() and text.isdigit() and str(int(text)) == text
        return cls("sources", int(text) if index else text)

    @classmethod
    def parse(cls, text: str) -> CheckpointFile:
        """``offsets/3``, ``sources/0/0`` or ``sources/orders_src/0`` (the spelling of a plan's JSON)
        back into a value."""
        kind, _, rest = text.partition("/")
        if kind == "sources" and rest.endswith("/0") and SOURCE_NAME.fullmatch(rest[:-2]):
            return cls.sources(rest[:-2])
        if kind == "offsets" and rest.isdigit():
            return cls.offsets(int(rest))
        raise ValueError(f"not a checkpoint offsets file: {text!r}")

    @property
    def is_initial(self) -> bool:
        return self.kind == "sources"

    @property
    def batch_id(self) -> int:
        """The batch of ``offsets/<batch>`` (a ``sources/<id>/0`` file has none)."""
        if self.kind != "offsets" or not isinstance(self.number, int):
            raise ValueError(f"{self} is not a batch file")
        return self.number

    def __str__(self) -> str:
        return f"sources/{self.number}/0" if self.kind == "sources" else f"offsets/{self.number}"

    def _key(self) -> tuple[bool, bool, int, str]:
        named = isinstance(self.number, str)
        return (self.kind != "sources", named, 0 if named else int(self.number), str(self.number))

    def __lt__(self, other: CheckpointFile) -> bool:
        return self._key() < other._key()


# A source's id in a checkpoint: its index, or the name DataStreamReader.name gave it (Spark 4.2:
# ASCII letters, digits and underscores; apache/spark #53309).
SOURCE_NAME = re.compile(r"[A-Za-z0-9_]+")


# -- validation and repair (the planning core's inputs and outputs) -------------------------------


class Verdict(StrEnum):
    """What a checkpoint position means against what Kafka holds now."""

    OK = "OK"
    BELOW_LOG_START = "BELOW_LOG_START"  # records between the position and the log start are gone
    BEYOND_LOG_END = "BEYOND_LOG_END"  # position past the high watermark / LSO: recreated or truncated
    PARTITION_GONE = "PARTITION_GONE"  # the topic exists, this partition does not
    NEW_PARTITION = "NEW_PARTITION"  # the topic has a partition the checkpoint does not know
    TOPIC_GONE = "TOPIC_GONE"  # the topic does not exist
    TOPIC_RECREATED = "TOPIC_RECREATED"  # deleted and created again: id changed, fewer partitions,
    # a stored end below its start, or a record below the position newer than the batch that read it
    OPEN_TRANSACTION = "OPEN_TRANSACTION"  # read_committed: position past the LSO, within the HWM
    TRANSIENT = "TRANSIENT"  # offsets could not be read now; retry before deciding anything
    AT_RISK = "AT_RISK"  # restarts cleanly, but retention may delete unread records within --runway-warn


# Spark's error condition on restart, with failOnDataLoss=true (the default). Observed on the rig for
# COULD_NOT_READ_OFFSET_RANGE and PARTITION_OFFSET_CHANGED; the others from the connector's
# kafka-error-conditions.json and KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets.
COULD_NOT_READ = "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
OFFSET_CHANGED = "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED"
PARTITIONS_DELETED = "KAFKA_DATA_LOSS.PARTITIONS_DELETED"
ADDED_NOT_FROM_ZERO = "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO"


@dataclass(frozen=True)
class SourcePosition:
    """Where one Kafka source of a checkpoint resumes.

    ``start`` is what Spark reads from next: ``offsets/N`` after a committed batch N, ``offsets/N-1``
    (or ``sources/<i>/0`` for batch 0) when batch N is re-run. ``end`` is set only for a re-run: the
    stored end of batch N, which Spark reads up to without asking Kafka.
    """

    source_id: str
    start_file: CheckpointFile
    start: Mapping[TopicPartition, int]
    end_file: CheckpointFile | None = None
    end: Mapping[TopicPartition, int] | None = None
    # batchTimestampMs of the batch whose end ``start`` is (offsets/N's metadata line): every record
    # below ``start`` was in Kafka by then. None for sources/<i>/0 (no batch read anything yet).
    start_read_by_ms: int | None = None
    end_read_by_ms: int | None = None  # the same for ``end`` (offsets/N of a re-run batch)


@dataclass(frozen=True)
class SinkFacts:
    """What the query's sink holds, as far as a re-run batch is concerned. For a Delta sink,
    ``committed_batch`` is the table's ``txn`` version for the query id (None: it never wrote)."""

    table: str
    committed_batch: int | None


@dataclass(frozen=True)
class CheckpointView:
    """The parts of a checkpoint that validation and repair need, already read."""

    location: str
    query_id: str
    batch_id: int  # the batch Spark runs next
    rerun: bool  # True when that batch is an uncommitted batch re-run over its stored range
    sources: tuple[SourcePosition, ...]
    recorded_topic_ids: Mapping[str, str] = field(default_factory=dict)  # from <checkpoint>/_recovery/
    sink: SinkFacts | None = None  # None: the sink is not known (the outcome of a re-run may depend on it)


# A record's CreateTime comes from the producer's clock, the batch's time from the Spark driver's:
# only a record this much newer than the batch that read past it is taken as proof of a rewritten
# topic. A healthy topic must never look recreated (a repair would replay it from the log start);
# a topic recreated within this window after the batch is not told this way.
CLOCK_SKEW_ALLOWANCE_MS = 10 * 60 * 1000


@dataclass(frozen=True)
class ClusterView:
    """What Kafka holds now for the topics a checkpoint reads. A topic absent here does not exist."""

    partitions: Mapping[TopicPartition, OffsetRange]  # every partition of every existing topic asked
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    unavailable: frozenset[TopicPartition] = frozenset()  # offsets not readable now (transient)
    isolation: Isolation = Isolation.READ_UNCOMMITTED  # the reader ``partitions``' ends are for
    # read_committed only: each partition's high watermark (``partitions`` end at the last stable offset)
    high_watermarks: Mapping[TopicPartition, int] = field(default_factory=dict)
    # Recreation evidence: the first offset whose record is newer than the batch that read up to the
    # source's position (``SourcePosition.start_read_by_ms``) by more than CLOCK_SKEW_ALLOWANCE_MS;
    # the log end when no record is that new; absent: not looked up
    newer_than_read: Mapping[tuple[str, TopicPartition], int] = field(default_factory=dict)
    # message.timestamp.type (CreateTime | LogAppendTime) of the topics whose timestamps tell of
    # recreation: whose clock the evidence is (looked up only for those topics)
    timestamp_types: Mapping[str, str] = field(default_factory=dict)

    def topics(self) -> frozenset[str]:
        return frozenset(tp.topic for tp in self.partitions) | frozenset(tp.topic for tp in self.unavailable)


@dataclass(frozen=True, slots=True)
class Runway:
    """How long until retention may delete records a query has not read (:mod:`recovery.core.runway`).

    ``earliest_delete_ms``: the earliest time the broker may delete the record at the position
    (its timestamp + ``retention.ms``; None: not by time: compacted, infinite retention, nothing
    unread, or not known, as ``reason`` says). ``oldest_unread_ms``: the timestamp of the record at
    the position (the query's lag in time is now minus it; None: nothing unread or not read).
    """

    earliest_delete_ms: int | None
    oldest_unread_ms: int | None
    reason: str  # "retention.ms=604800000", "compacted", "infinite retention", "nothing unread", ...

    def left_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the earliest delete (negative: deletable now); None: no time limit known."""
        return None if self.earliest_delete_ms is None else self.earliest_delete_ms - now_ms

    def age_ms(self, now_ms: int) -> int | None:
        """How old the oldest unread record is (the lag in time); None: nothing unread or not known."""
        return None if self.oldest_unread_ms is None else now_ms - self.oldest_unread_ms


@dataclass(frozen=True)
class Finding:
    """One partition of one Kafka source, judged against the live cluster.

    ``spark_error`` is the error condition Spark will raise on restart with failOnDataLoss=true
    (None: it runs); ``silently_skipped`` is how many records it would skip instead with
    failOnDataLoss=false; ``records_lost`` is how many are already gone whatever is done.
    """

    source_id: str
    tp: TopicPartition
    verdict: Verdict
    position: int | None  # where Spark resumes (None: partition unknown to the checkpoint)
    batch_end: int | None  # stored end of a re-run batch, else None
    available: OffsetRange | None
    records_lost: int = 0
    spark_error: str | None = None
    silently_skipped: int = 0
    detail: str = ""
    # read_committed: losses counted in offsets include aborted records and transaction markers
    upper_bound: bool = False
    notes: tuple[str, ...] = ()  # what the outcome depends on, what cannot be told
    runway: Runway | None = None  # retention runway (validate only; None: not looked up)

    @property
    def needs_action(self) -> bool:
        """Spark would fail or the partition needs a decision; AT_RISK too (start the query soon)."""
        return self.spark_error is not None or self.verdict in (
            Verdict.TOPIC_RECREATED,
            Verdict.OPEN_TRANSACTION,
            Verdict.AT_RISK,
        )

    @property
    def needs_repair(self) -> bool:
        """Needs action that starting the query does not cure (AT_RISK is cured by starting it)."""
        return self.needs_action and self.verdict is not Verdict.AT_RISK


def copied_with(f: Finding, **changes: object) -> Finding:
    """``dataclasses.replace(f, **changes)`` at a third of the cost of even ``Finding(...)`` (a
    frozen dataclass's ``__init__`` sets each of its 13 fields through ``object.__setattr__``:
    ~3.5 µs here, and a repair plan of 100,000 partitions makes 500,000 copies). ``Finding`` has
    no ``__post_init__``, no slots and no ``init=False`` field, so its ``__dict__`` is its fields
    and the copy is what ``__init__`` would build (a test compares it with ``replace``; another
    checks every keyword passed to it)."""
    new = object.__new__(type(f))
    new.__dict__.update(f.__dict__, **changes)
    return new


class StrategyKind(StrEnum):
    CLAMP = "clamp"
    EARLIEST = "earliest"
    LATEST = "latest"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    SHIFT_BY = "shift-by"
    TO_OFFSET = "to-offset"
    FROM_FILE = "from-file"


@dataclass(frozen=True)
class Strategy:
    """How to choose new positions. Time-based kinds and from-file arrive resolved as ``targets``."""

    kind: StrategyKind = StrategyKind.CLAMP
    on_beyond_end: OnBeyondEnd = OnBeyondEnd.LATEST  # clamp only
    shift: int = 0  # shift-by
    offset: int | None = None  # to-offset
    targets: Mapping[TopicPartition, int] = field(default_factory=dict)  # to-datetime/by-duration/from-file
    scope: TopicSelection | None = None  # the partitions it may move; None: all

    def covers(self, tp: TopicPartition) -> bool:
        return self.scope is None or self.scope.matches(tp.topic, tp.partition)

    def describe(self) -> str:
        extra = {
            StrategyKind.CLAMP: f" (beyond the log end: {self.on_beyond_end.value})",
            StrategyKind.SHIFT_BY: f" {self.shift:+d}",
            StrategyKind.TO_OFFSET: f" {self.offset}",
        }.get(self.kind, "")
        return f"{self.kind.value}{extra}"


# A checkpoint whose newest batch file is younger than this is taken as in use by a running query
# when it has no heartbeat to say otherwise (recovery.checkpoint.heartbeat.refuse_if_in_use).
DEFAULT_ACTIVE_WITHIN_S = 300.0


@dataclass(frozen=True)
class Policy:
    """Limits on what a repair may lose (records lost + skipped); None = no limit."""

    max_loss_records: int | None = None
    max_loss_per_partition: int | None = None


@dataclass(frozen=True)
class Move:
    """The repair of one partition of one source, with its accounting.

    ``lost``: records already gone from Kafka between the old position and the log start.
    ``skipped``: records still in Kafka that the job will never read because the position moves
    forward over them. ``replayed``: records at or after the new position and before the old one,
    which the job reads again (or, in a recreated topic, for the first time).
    """

    source_id: str
    tp: TopicPartition
    verdict: Verdict
    old: int | None  # None: the partition is added
    new: int | None  # None: the partition is removed from the checkpoint
    lost: int = 0
    skipped: int = 0
    replayed: int = 0
    reason: str = ""
    lost_unknown: bool = False  # a recreated topic: the old topic's unread records cannot be counted
    upper_bound: bool = False  # read_committed: lost/skipped counted in offsets (markers, aborted)


@dataclass(frozen=True)
class OffsetChange:
    """One value in one file (``offsets/N`` or ``sources/<i>/0``)."""

    file: CheckpointFile
    source_id: str
    tp: TopicPartition
    old: int | None
    new: int | None


@dataclass(frozen=True)
class Plan:
    """A repair, as data: what was found, what moves, which values in which files change."""

    checkpoint: str
    query_id: str
    batch_id: int
    rerun: bool
    strategy: str
    findings: tuple[Finding, ...]
    moves: tuple[Move, ...]
    changes: tuple[OffsetChange, ...]
    refused: str | None = None  # why the policy refuses this plan; None = allowed
    # What the plan was made with, so that applying it can re-plan against fresh offsets and compare.
    made_with: tuple[Strategy, Policy] | None = field(default=None, compare=False)
    isolation: Isolation = Isolation.READ_UNCOMMITTED
    sink: SinkFacts | None = None  # the sink facts the plan was made with (re-plan with the same)

    @property
    def sink_skips_batch(self) -> int | None:
        """The re-run batch Spark skips because the sink holds it (its offsets/N is then batch
        N+1's start, and changing it is intended), or None."""
        held = self.sink.committed_batch if self.sink else None
        return self.batch_id if self.rerun and held is not None and held >= self.batch_id else None

    @property
    def lost(self) -> int:
        return sum(m.lost for m in self.moves)

    @property
    def skipped(self) -> int:
        return sum(m.skipped for m in self.moves)

    @property
    def replayed(self) -> int:
        return sum(m.replayed for m in self.moves)

    @property
    def lost_unknown(self) -> bool:
        return any(m.lost_unknown for m in self.moves)

    @property
    def upper_bound(self) -> bool:
        return any(m.upper_bound and (m.lost or m.skipped) for m in self.moves)

    @property
    def files(self) -> tuple[CheckpointFile, ...]:
        return tuple(sorted({c.file for c in self.changes}))


@dataclass(frozen=True)
class StartingOffset:
    """One partition of a Spark ``startingOffsets`` JSON, and where its value came from."""

    tp: TopicPartition
    offset: int
    origin: str  # "checkpoint", "group", "timestamp", "log start (not in the group)", ...
    note: str = ""
    lost: int = 0  # records between the old position and this offset that are gone
    skipped: int = 0  # records still in Kafka between the old position and this offset, never read
