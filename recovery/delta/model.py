"""Values for Delta-tracked positions: what a table's ``_delta_log`` still holds, what a checkpoint's
Delta source lines say, and the findings and moves the planning core makes of them.

Standard library, :mod:`recovery.core.model`, :mod:`recovery.errors` and the checkpoint format values
only: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from recovery.checkpoint.format import DeltaSourceOffset
from recovery.core.model import CheckpointFile, Runway
from recovery.errors import ExitCode

# Error conditions Delta (delta-spark 4.4.0 on Spark 4.2.0) raises on restart, all observed on the
# rig (tests/delta/test_delta_source_spark.py). Matched by class, never by text: the texts changed
# between Delta 4.3 and 4.4 (DeltaErrors.failOnDataLossException).
MISSING_VERSIONS = "DELTA_MISSING_FILES_UNEXPECTED_VERSION"  # DeltaLog.getChangeLogFiles, failOnDataLoss
SNAPSHOT_GONE = "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE"  # DeltaSource.getSnapshotFromDeltaLog
DIFFERENT_TABLE = "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"  # reservoirId != metaData.id
FILE_NOT_EXIST = "FAILED_READ_FILE.FILE_NOT_EXIST"  # a data file of a version to read was VACUUMed


@dataclass(frozen=True)
class VersionFiles:
    """The data files a commit adds with ``dataChange=true`` (what a Delta stream reads from it)."""

    added: int
    missing: int = 0  # of those, files no longer in storage (VACUUM)
    # Of those, the earliest ``deletionTimestamp`` of one removed by a later commit (None: none is):
    # VACUUM may delete it once that is older than ``delta.deletedFileRetentionDuration``.
    removed_ms: int | None = None


@dataclass(frozen=True)
class Retention:
    """A table's cleanup settings (table properties, Delta's defaults when not set), each in ms or,
    when a property cannot be read, why."""

    log_ms: int | str = 30 * 86_400_000  # delta.logRetentionDuration
    deleted_file_ms: int | str = 7 * 86_400_000  # delta.deletedFileRetentionDuration
    log_cleanup: bool = True  # delta.enableExpiredLogCleanup


@dataclass(frozen=True)
class TableLog:
    """What a Delta table's ``_delta_log`` holds now.

    ``commits``: versions whose ``<v>.json`` exists; ``checkpoints``: versions with a checkpoint;
    ``files``: for the commits asked about, the data files each adds.
    """

    table: str
    table_id: str
    latest: int
    commits: tuple[int, ...]
    checkpoints: tuple[int, ...] = ()
    files: Mapping[int, VersionFiles] = field(default_factory=dict)
    retention: Retention = field(default_factory=Retention)
    # For the commits asked about: when each ``<v>.json`` was written (ms; log cleanup goes by it)
    commit_ms: Mapping[int, int] = field(default_factory=dict)
    last_vacuum_ms: int | None = None  # the latest VACUUM END (or START) in the table's history

    @property
    def earliest_change(self) -> int:
        """The first version of the unbroken run of commits up to ``latest``: a stream can resume
        from it or later (DeltaLog.getChangeLogFiles lists commits from the start version and fails
        if the first one listed is later)."""
        present = set(self.commits)
        version = self.latest
        while version - 1 in present:
            version -= 1
        return version if version in present else self.latest + 1

    @property
    def earliest_snapshot(self) -> int:
        """The first version whose snapshot can be rebuilt: from ``0.json`` or a checkpoint, with
        every commit after it (what an offset inside an initial snapshot needs)."""
        start = self.earliest_change
        if start == 0:
            return 0
        usable = [c for c in self.checkpoints if c >= start - 1 and c <= self.latest]
        return min(usable) if usable else self.latest

    def snapshot_base(self, version: int) -> int:
        """The version a snapshot of ``version`` is rebuilt from: its latest checkpoint at or before
        it, else the first commit (every commit from there to ``version`` is read too)."""
        return max((c for c in self.checkpoints if c <= version), default=0)

    def can_rebuild(self, version: int) -> bool:
        return self.earliest_snapshot <= version <= self.latest


def unknown_loss(version: int) -> str:
    """The loss of a re-created table, in words: the old log is gone, so it cannot be counted."""
    return f"an unknown number of rows lost, from version {version} of the old table"


class DeltaVerdict(StrEnum):
    """What a Delta source position means against the table as it is now."""

    OK = "OK"
    VERSIONS_GONE = "VERSIONS_GONE"  # commits the stream still needs were removed by log cleanup
    SNAPSHOT_GONE = "SNAPSHOT_GONE"  # an initial-snapshot position whose snapshot can't be rebuilt
    FILES_GONE = "FILES_GONE"  # data files of versions still to read were removed by VACUUM
    TABLE_RECREATED = "TABLE_RECREATED"  # reservoirId differs from the table's id
    BEYOND_LATEST = "BEYOND_LATEST"  # position past the table's next version: the log was truncated
    AT_RISK = "AT_RISK"  # restarts cleanly, but log cleanup or VACUUM may remove what it still needs


@dataclass(frozen=True)
class DeltaPosition:
    """One Delta source line in one offsets file."""

    file: CheckpointFile  # offsets/N
    offset: DeltaSourceOffset


@dataclass(frozen=True)
class DeltaSourceRead:
    """What Spark reads of one Delta source on restart.

    Spark re-plans the last batch with ``getBatch(offsets/N-1, offsets/N)`` whether or not it was
    committed (MicroBatchExecution.populateStartOffsets, for V1 sources), and DeltaSource lists the
    commits from the start of that range: so ``start`` must still be readable even after a committed
    batch. ``resume`` is where unprocessed data begin: ``end`` after a commit, ``start`` for a re-run.
    """

    source_id: str
    table: str
    start: DeltaPosition | None  # offsets/N-1; None for batch 0
    end: DeltaPosition  # offsets/N
    rerun: bool

    @property
    def resume(self) -> DeltaPosition:
        return self.start if self.rerun and self.start is not None else self.end

    @property
    def positions(self) -> tuple[DeltaPosition, ...]:
        return (self.end,) if self.start is None else (self.start, self.end)


@dataclass(frozen=True)
class DeltaFinding:
    """One Delta source of a checkpoint judged against its table.

    ``versions_lost``: versions after ``resume`` the stream never read and whose commits are gone
    (a re-created table: ``lost_unknown``, the old table's versions from ``resume_from`` on);
    ``files_missing``: data files of versions still to read that are no longer in storage;
    ``spark_error``: the condition Spark raises on restart (None: it runs).
    """

    source_id: str
    table: str
    verdict: DeltaVerdict
    needed_from: int  # the first commit Spark lists on restart (a snapshot offset at v: v + 1)
    resume_from: int  # the version of the resume position (unprocessed data start there)
    earliest: int  # the first version a stream can resume from now
    latest: int
    versions_lost: int = 0
    files_missing: int = 0
    spark_error: str | None = None
    detail: str = ""
    lost_unknown: bool = False
    runway: Runway | None = None  # until log cleanup or VACUUM may remove what it needs (None: not judged)

    @property
    def needs_action(self) -> bool:
        # BEYOND_LATEST: Spark runs, but versions written later up to the offset are never read.
        # AT_RISK: it runs if started in time.
        return self.spark_error is not None or self.verdict in (
            DeltaVerdict.BEYOND_LATEST,
            DeltaVerdict.AT_RISK,
        )


class DeltaStrategy(StrEnum):
    CLAMP = "clamp"  # to the earliest version a stream can resume from (after VACUUM gaps)
    LATEST = "latest"  # to the table's next version: skip everything not yet read


@dataclass(frozen=True)
class DeltaMove:
    """One Delta source line rewritten, with the source's loss accounting on the first move."""

    source_id: str
    file: CheckpointFile
    old: DeltaSourceOffset
    new: DeltaSourceOffset


@dataclass(frozen=True)
class DeltaSourceLoss:
    """What a repair costs one source: ``versions_lost`` whose commits are gone (the data files they
    added cannot be counted any more), and ``versions_skipped`` still in the log with the
    ``files_skipped`` they add, which the stream will never read. The unread rest of an initial
    snapshot that a repair skips counts as one version (lost if the snapshot is gone).

    ``reads_snapshot``: the repair moves the source to the start of the initial snapshot of that
    version, so the stream reads the table as of it in full: nothing still in the table is skipped,
    but rows delivered before are delivered again (``rereads``), unless the table is a new one.
    """

    source_id: str
    versions_lost: int
    versions_skipped: int
    files_skipped: int
    reads_snapshot: int | None = None
    rereads: bool = False
    # A re-created table: the old table's versions from ``lost_from`` on that the stream had not read
    # are lost, and their number cannot be known (the old log is gone): never reported as 0.
    lost_unknown: bool = False
    lost_from: int | None = None


@dataclass(frozen=True)
class DeltaPlan:
    """A Delta source repair, as data."""

    checkpoint: str
    query_id: str
    batch_id: int
    strategy: str
    findings: tuple[DeltaFinding, ...]
    moves: tuple[DeltaMove, ...]
    losses: tuple[DeltaSourceLoss, ...]
    refused: str | None = None

    @property
    def files(self) -> tuple[CheckpointFile, ...]:
        return tuple(sorted({m.file for m in self.moves}))

    @property
    def versions_lost(self) -> int:
        return sum(loss.versions_lost for loss in self.losses)

    @property
    def versions_skipped(self) -> int:
        return sum(loss.versions_skipped for loss in self.losses)

    @property
    def files_skipped(self) -> int:
        return sum(loss.files_skipped for loss in self.losses)

    @property
    def lost_unknown(self) -> bool:
        """Some loss cannot be counted (a re-created table's unread versions)."""
        return any(loss.lost_unknown for loss in self.losses)


@dataclass(frozen=True)
class SinkWarning:
    """A Delta sink that will skip batches: it records batch ``sink_version`` for the query
    (``txn`` appId = query id) and DeltaSink writes nothing for a batch id at or below it."""

    table: str
    query_id: str
    sink_version: int
    next_batch: int
    message: str


@dataclass(frozen=True)
class DeltaSourceResult:
    """A checkpoint's Delta sources judged against their tables (``plan_delta_source``)."""

    plan: DeltaPlan
    sink_warning: SinkWarning | None = None
    backup_id: str | None = None  # the backup set of the originals, once the plan was applied
    restart_problem: str | None = None  # Spark cannot restart from the checkpoint whatever the offsets
    runway_at_ms: int | None = None  # when the sources' runways were judged (None: not judged)

    @property
    def executed(self) -> bool:
        return self.backup_id is not None

    @property
    def needs_action(self) -> bool:
        return (
            any(f.needs_action for f in self.plan.findings)
            or self.sink_warning is not None
            or self.restart_problem is not None
        )

    @property
    def exit_code(self) -> ExitCode:
        """``delta-source validate``: 1 when Spark would fail or skip versions on restart, the sink would
        skip batches, or Spark cannot restart from the checkpoint at all; else 0."""
        return ExitCode.ACTION_NEEDED if self.needs_action else ExitCode.OK


@dataclass(frozen=True)
class DeltaSourceRepair(DeltaSourceResult):
    """What ``repair_delta_source`` planned, and with ``execute`` applied (``backup_id`` set)."""

    dry_run: bool = True

    @property
    def exit_code(self) -> ExitCode:
        """0 applied or nothing to change; 1 refused, changes pending in a dry run, or nothing to change
        in the offsets of a checkpoint Spark cannot restart from."""
        if self.plan.refused:
            return ExitCode.ACTION_NEEDED
        if not self.plan.moves:
            return ExitCode.ACTION_NEEDED if self.restart_problem else ExitCode.OK
        return ExitCode.OK if self.executed else ExitCode.ACTION_NEEDED
