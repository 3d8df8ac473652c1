"""The planning core for Delta streaming-source offsets and Delta sinks. Values in, values out.

``assess_source`` judges what a checkpoint's Delta source will read on restart against what the
table's ``_delta_log`` still holds, and predicts Spark's error:

* a ``reservoirId`` other than the table's id       -> DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE
* an initial-snapshot offset whose snapshot is gone -> DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE
* a needed version older than the unbroken run of commits ending at the latest one
                                                    -> DELTA_MISSING_FILES_UNEXPECTED_VERSION
* a data file of a version still to read removed by VACUUM -> FAILED_READ_FILE.FILE_NOT_EXIST

``plan_source_repair`` moves the offsets the way ``failOnDataLoss=false`` would skip, but visibly:
``clamp`` to the earliest version a stream can resume from (the Delta analogue of Kafka's log start
offset; past the last version with VACUUMed files when that is later), or ``latest`` (the table's
next version). A moved offset is ``{"sourceVersion":1, ..., "index":-1,"isStartingVersion":false}``:
"nothing of that version read yet", the value DeltaSource writes itself after finishing a version.
Two cases never skip silently under ``clamp``: a stream inside an initial snapshot that can no longer
be rebuilt, and a re-created table, move to ``isStartingVersion:true`` at the earliest snapshot that
can be rebuilt, so the stream reads the table as of it in full (the first re-reads rows).

``check_sink`` warns when a Delta sink would skip batches: DeltaSink writes nothing for a batch id at
or below the ``txn`` version recorded for the query id (delta-io/delta ``sources/DeltaSink.scala``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TypedDict

from recovery.checkpoint.format import DeltaSourceOffset
from recovery.delta.model import (
    DIFFERENT_TABLE,
    FILE_NOT_EXIST,
    MISSING_VERSIONS,
    SNAPSHOT_GONE,
    DeltaFinding,
    DeltaMove,
    DeltaPlan,
    DeltaPosition,
    DeltaSourceLoss,
    DeltaSourceRead,
    DeltaStrategy,
    DeltaVerdict,
    SinkWarning,
    TableLog,
    unknown_loss,
)

BASE_INDEX = -1  # DeltaSourceOffset.BASE_INDEX_V1: before the first file of the version


def _span(first: int, last: int) -> str:
    return f"version {first}" if first == last else f"versions {first}-{last}"


def _first_commit(offset: DeltaSourceOffset) -> int:
    """The first commit DeltaSource lists from ``offset``: an initial-snapshot offset at v reads the
    snapshot of v, then the commits from v + 1 (DeltaSource.getFileChanges:
    ``getSnapshotAt(fromVersion) ++ filterAndIndexDeltaLogs(fromVersion + 1)``)."""
    return offset.reservoir_version + 1 if offset.is_starting_version else offset.reservoir_version


def needed_snapshots(read: DeltaSourceRead) -> list[tuple[DeltaPosition, int]]:
    """The snapshots Spark rebuilds on restart: that of an initial-snapshot offset, and for a first
    batch (no offsets/N-1) the one before its end (DeltaSource.getBatch with no start loads
    ``reservoirVersion - 1`` "so that index in endOffset is still valid")."""
    out = [(p, p.offset.reservoir_version) for p in read.positions if p.offset.is_starting_version]
    end = read.end.offset
    if read.start is None and not end.is_starting_version and end.reservoir_version > 0:
        out.append((read.end, end.reservoir_version - 1))
    return out


class _Common(TypedDict):
    """The fields every finding of one source shares, whatever its verdict."""

    source_id: str
    table: str
    needed_from: int
    resume_from: int
    earliest: int
    latest: int


def assess_source(read: DeltaSourceRead, log: TableLog) -> DeltaFinding:
    """One Delta source against its table as it is now."""
    positions = read.positions
    needed_from = min(_first_commit(p.offset) for p in positions)
    resume = read.resume.offset
    resume_from, resume_commit = resume.reservoir_version, _first_commit(resume)
    earliest, latest = log.earliest_change, log.latest
    base: _Common = {
        "source_id": read.source_id,
        "table": log.table,
        "needed_from": needed_from,
        "resume_from": resume_from,
        "earliest": earliest,
        "latest": latest,
    }
    other = sorted({p.offset.reservoir_id for p in positions if p.offset.reservoir_id != log.table_id})
    if other:
        return DeltaFinding(
            **base,
            verdict=DeltaVerdict.TABLE_RECREATED,
            spark_error=DIFFERENT_TABLE,
            lost_unknown=True,
            detail=f"the checkpoint read table id {other[0]}, {log.table} now has id {log.table_id} "
            f"(deleted and re-created?): {unknown_loss(resume_from)}",
        )
    gone_snapshots = [(p, v) for p, v in needed_snapshots(read) if not log.can_rebuild(v)]
    lost = max(0, min(earliest, latest + 1) - resume_commit)
    if gone_snapshots:
        p, version = gone_snapshots[0]
        detail = (
            f"{p.file} needs the snapshot of version {version}, which can no longer be rebuilt "
            f"(the earliest is {log.earliest_snapshot})"
        )
        if resume.is_starting_version and not log.can_rebuild(resume_from):
            detail += "; the stream had not finished reading that snapshot"
        return DeltaFinding(
            **base,
            verdict=DeltaVerdict.SNAPSHOT_GONE,
            versions_lost=lost,
            spark_error=SNAPSHOT_GONE,
            detail=detail,
        )
    if needed_from < earliest and needed_from <= latest:
        detail = (
            f"{_span(needed_from, earliest - 1)} needed on restart "
            f"{'are' if earliest - 1 > needed_from else 'is'} gone from _delta_log "
            f"(log retention); the log now starts at {earliest}"
        )
        if lost:
            detail += f"; {_span(resume_commit, resume_commit + lost - 1)} were never read"
        return DeltaFinding(
            **base,
            verdict=DeltaVerdict.VERSIONS_GONE,
            versions_lost=lost,
            spark_error=MISSING_VERSIONS,
            detail=detail,
        )
    beyond = max(positions, key=lambda p: p.offset.reservoir_version)
    if beyond.offset.reservoir_version > latest + 1:
        version = beyond.offset.reservoir_version
        return DeltaFinding(
            **base,
            verdict=DeltaVerdict.BEYOND_LATEST,
            detail=f"{beyond.file} is at version {version}, past the table's next version {latest + 1} "
            f"(log truncated, or another copy of the table?): {_span(latest + 1, version - 1)}, once "
            f"written, would never be read; repair moves the offset to {latest + 1}",
        )
    vacuumed = {v: f.missing for v, f in log.files.items() if v >= resume_from and f.missing}
    if vacuumed:
        return DeltaFinding(
            **base,
            verdict=DeltaVerdict.FILES_GONE,
            files_missing=sum(vacuumed.values()),
            spark_error=FILE_NOT_EXIST,
            detail=f"{sum(vacuumed.values())} data files added in {_span(min(vacuumed), max(vacuumed))} "
            "are no longer in storage (VACUUM)",
        )
    return DeltaFinding(**base, verdict=DeltaVerdict.OK)


def _target(
    finding: DeltaFinding, read: DeltaSourceRead, log: TableLog, strategy: DeltaStrategy
) -> DeltaSourceOffset | None:
    """The offset every position before it moves to; None: leave the source alone."""
    if finding.verdict is DeltaVerdict.OK and strategy is DeltaStrategy.CLAMP:
        return None
    resume = read.resume.offset
    snapshot_gone = resume.is_starting_version and not log.can_rebuild(resume.reservoir_version)
    if strategy is DeltaStrategy.CLAMP and (finding.verdict is DeltaVerdict.TABLE_RECREATED or snapshot_gone):
        # The start of the earliest snapshot that can be rebuilt, before its first file: the stream
        # reads the table as of that version in full, so nothing still in the table is skipped. A
        # re-created table is read whole; an unfinished initial snapshot is read again from its
        # start (moving past it would drop its unread files without a count).
        return DeltaSourceOffset(1, log.table_id, log.earliest_snapshot, BASE_INDEX, True)
    if strategy is DeltaStrategy.LATEST or finding.verdict is DeltaVerdict.BEYOND_LATEST:
        target = log.latest + 1
    else:
        target = min(log.earliest_change, log.latest + 1)
        # Past the last version whose data files VACUUM removed, if the stream would still read it.
        vacuumed = [v for v, f in log.files.items() if f.missing and v >= max(target, finding.resume_from)]
        target = max([target, *(v + 1 for v in vacuumed)])
    if read.start is None:
        # A first batch's end (v, -1) makes Spark rebuild the snapshot of v - 1 (see needed_snapshots).
        target = max(target, log.earliest_snapshot + 1)
    return DeltaSourceOffset(1, log.table_id, target, BASE_INDEX, False)


def _moved(
    offset: DeltaSourceOffset,
    new: DeltaSourceOffset,
    log: TableLog,
    finding: DeltaFinding,
    strategy: DeltaStrategy,
) -> bool:
    if offset.reservoir_id != log.table_id:
        return True
    if offset == new:
        return False
    if offset.reservoir_version > log.latest + 1:
        return True  # beyond latest: clamp down
    if finding.verdict is DeltaVerdict.BEYOND_LATEST and strategy is DeltaStrategy.CLAMP:
        return False  # only the positions past the table's next version move
    if offset.is_starting_version and not log.can_rebuild(offset.reservoir_version):
        return True
    if new.is_starting_version:
        # A snapshot target at s holds every version up to s: a position before it, or one at the
        # start of version s's own commit (which bounds the snapshot to nothing), moves too.
        v, s = offset.reservoir_version, new.reservoir_version
        return v < s or (v == s and not offset.is_starting_version)
    return _first_commit(offset) < new.reservoir_version


def _loss(
    read: DeltaSourceRead, finding: DeltaFinding, new: DeltaSourceOffset, log: TableLog, moved: bool
) -> DeltaSourceLoss:
    """What moving the source to ``new`` costs, counted from where it resumes."""
    recreated = finding.verdict is DeltaVerdict.TABLE_RECREATED
    # The old table's versions from where the stream resumes were never read, and its log is gone.
    lost_from = finding.resume_from if recreated else None
    if new.is_starting_version:
        return DeltaSourceLoss(
            read.source_id,
            0,
            0,
            0,
            new.reservoir_version,
            rereads=not recreated,
            lost_unknown=recreated,
            lost_from=lost_from,
        )
    if not moved:
        return DeltaSourceLoss(read.source_id, 0, 0, 0)
    resume = read.resume.offset
    if recreated:
        first, snapshot = 0, None  # everything in the new table before the target
    else:
        first = _first_commit(resume)
        snapshot = resume.reservoir_version if resume.is_starting_version else None
    present = set(log.commits)
    versions = range(first, new.reservoir_version)
    skipped = [v for v in versions if v in present]
    lost = len(versions) - len(skipped)
    if snapshot is not None:
        # The unread rest of an initial snapshot: its files cannot be counted from the commits.
        if log.can_rebuild(snapshot):
            skipped.append(snapshot)
        else:
            lost += 1
    return DeltaSourceLoss(
        source_id=read.source_id,
        versions_lost=lost,
        versions_skipped=len(skipped),
        files_skipped=sum(log.files[v].added for v in skipped if v in log.files and v != snapshot),
        lost_unknown=recreated,
        lost_from=lost_from,
    )


def plan_source_repair(
    reads: Iterable[DeltaSourceRead],
    logs: Mapping[str, TableLog],
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    checkpoint: str,
    query_id: str,
    batch_id: int,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
) -> DeltaPlan:
    """Findings, moves and losses for the Delta sources ``reads`` (``logs`` by source id).

    ``max_versions`` caps the versions lost plus skipped per plan; ``adopt_new_table`` allows moving
    a source onto a re-created table (otherwise the plan is refused: the data may be another table's).
    """
    findings: list[DeltaFinding] = []
    moves: list[DeltaMove] = []
    losses: list[DeltaSourceLoss] = []
    refusals: list[str] = []
    for read in sorted(reads, key=lambda r: r.source_id):
        log = logs[read.source_id]
        finding = assess_source(read, log)
        findings.append(finding)
        new = _target(finding, read, log, strategy)
        if new is None:
            continue
        if finding.verdict is DeltaVerdict.TABLE_RECREATED and not adopt_new_table:
            refusals.append(
                f"source {read.source_id}: {finding.detail}; start a new checkpoint, or allow reading the "
                "new table with `adopt_new_table=True`"
            )
        source_moves = [
            DeltaMove(read.source_id, p.file, p.offset, new)
            for p in read.positions
            if _moved(p.offset, new, log, finding, strategy)
        ]
        if not source_moves:
            continue
        moves.extend(source_moves)
        resume_moved = any(m.file == read.resume.file for m in source_moves)
        losses.append(_loss(read, finding, new, log, resume_moved))
    plan = DeltaPlan(
        checkpoint=checkpoint,
        query_id=query_id,
        batch_id=batch_id,
        strategy=strategy.value,
        findings=tuple(findings),
        moves=tuple(moves),
        losses=tuple(losses),
    )
    if not refusals and max_versions is not None and plan.lost_unknown:
        refusals.append(
            "a re-created table's unread versions are lost and cannot be counted, so the loss budget "
            f"of {max_versions} versions cannot be met"
        )
    if not refusals and max_versions is not None:
        cost = plan.versions_lost + plan.versions_skipped
        if cost > max_versions:
            refusals.append(f"the plan loses or skips {cost} versions, over the budget of {max_versions}")
    return replace(plan, refused="; ".join(refusals) or None)


def check_sink(
    table: str,
    query_id: str,
    sink_version: int | None,
    *,
    next_batch: int,
    rerun: bool,
    rerun_changed: bool = False,
) -> SinkWarning | None:
    """A warning when the Delta sink ``table`` will skip batches of the query on restart.

    ``sink_version`` is the table's ``txn`` version for ``query_id`` (None: never written by it).
    Re-running batch N that the sink already holds is normal (that is how the sink is exactly-once),
    unless the repair changed batch N's range: then the new range is never written.
    """
    if sink_version is None or sink_version < next_batch:
        return None
    if rerun and sink_version == next_batch and not rerun_changed:
        return None
    batches = f"batch {next_batch}" if sink_version == next_batch else f"batches {next_batch}-{sink_version}"
    if rerun and sink_version == next_batch:
        why = (
            f"the sink already holds batch {next_batch} (written before the checkpoint recorded its "
            "commit), so the repaired range of that batch will not be written"
        )
    else:
        why = f"the sink records batch {sink_version} for this query, ahead of the checkpoint"
    message = (
        f"Delta sink {table}: {why}; DeltaSink skips {batches} (txn appId {query_id}). Write them again "
        "under a new query id (new checkpoint), or accept that their records are not in the sink"
    )
    return SinkWarning(table, query_id, sink_version, next_batch, message)
