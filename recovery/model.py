"""Domain values shared across the toolkit: frozen, typed, compared with ``==``.

This module imports only the standard library (a structural test checks it), so the planning core
can use it without pulling in any IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic} [{self.partition}]"


@dataclass(frozen=True)
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


# -- validation and repair (the planning core's inputs and outputs) -------------------------------


class Verdict(StrEnum):
    """What a checkpoint position means against what Kafka holds now."""

    OK = "OK"
    BELOW_LOG_START = "BELOW_LOG_START"  # records between the position and the log start are gone
    BEYOND_LOG_END = "BEYOND_LOG_END"  # position past the high watermark / LSO: recreated or truncated
    PARTITION_GONE = "PARTITION_GONE"  # the topic exists, this partition does not
    NEW_PARTITION = "NEW_PARTITION"  # the topic has a partition the checkpoint does not know
    TOPIC_GONE = "TOPIC_GONE"  # the topic does not exist
    TOPIC_RECREATED = "TOPIC_RECREATED"  # topic id differs from the one recorded by an earlier run
    TRANSIENT = "TRANSIENT"  # offsets could not be read now; retry before deciding anything


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
    start_file: str
    start: Mapping[TopicPartition, int]
    end_file: str | None = None
    end: Mapping[TopicPartition, int] | None = None


@dataclass(frozen=True)
class CheckpointView:
    """The parts of a checkpoint that validation and repair need, already read."""

    location: str
    query_id: str
    batch_id: int  # the batch Spark runs next
    rerun: bool  # True when that batch is an uncommitted batch re-run over its stored range
    sources: tuple[SourcePosition, ...]
    recorded_topic_ids: Mapping[str, str] = field(default_factory=dict)  # from <checkpoint>/_recovery/


@dataclass(frozen=True)
class ClusterView:
    """What Kafka holds now for the topics a checkpoint reads. A topic absent here does not exist."""

    partitions: Mapping[TopicPartition, OffsetRange]  # every partition of every existing topic asked
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    unavailable: frozenset[TopicPartition] = frozenset()  # offsets not readable now (transient)

    def topics(self) -> frozenset[str]:
        return frozenset(tp.topic for tp in self.partitions) | frozenset(tp.topic for tp in self.unavailable)


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

    @property
    def needs_action(self) -> bool:
        return self.spark_error is not None or self.verdict is Verdict.TOPIC_RECREATED


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
    on_beyond_end: str = "latest"  # clamp only: "latest" (follower-style) or "earliest"
    shift: int = 0  # shift-by
    offset: int | None = None  # to-offset
    targets: Mapping[TopicPartition, int] = field(default_factory=dict)  # to-datetime/by-duration/from-file
    scope: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (topic, partitions or () for all); () = all

    def covers(self, tp: TopicPartition) -> bool:
        if not self.scope:
            return True
        return any(tp.topic == topic and (not parts or tp.partition in parts) for topic, parts in self.scope)

    def describe(self) -> str:
        extra = {
            StrategyKind.CLAMP: f" (beyond the log end: {self.on_beyond_end})",
            StrategyKind.SHIFT_BY: f" {self.shift:+d}",
            StrategyKind.TO_OFFSET: f" {self.offset}",
        }.get(self.kind, "")
        return f"{self.kind.value}{extra}"


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


@dataclass(frozen=True)
class OffsetChange:
    """One value in one file: ``file`` is ``offsets/N`` or ``sources/<i>/0``."""

    file: str
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
    isolation: str = "read_uncommitted"

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
    def files(self) -> tuple[str, ...]:
        return tuple(sorted({c.file for c in self.changes}, key=_file_order))


def _file_order(file: str) -> tuple[int, int, str]:
    kind, _, rest = file.partition("/")
    return (0 if kind == "sources" else 1, int(rest) if rest.isdigit() else -1, file)


@dataclass(frozen=True)
class StartingOffset:
    """One partition of a Spark ``startingOffsets`` JSON, and where its value came from."""

    tp: TopicPartition
    offset: int
    origin: str  # "checkpoint", "group", "timestamp", "log start (not in the group)", ...
    note: str = ""
