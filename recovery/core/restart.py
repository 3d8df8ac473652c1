"""What Spark does when a query restarts from a checkpoint. Pure: batch ids in, a value out.

Mirrors ``MicroBatchExecution.populateStartOffsets`` (spec §5.1)::

    no offsets/                      -> FIRST_BATCH 0, from the initial offsets (sources/<i>/0)
    latest offsets/N, commits/N      -> NEXT_BATCH N+1, starting at offsets/N (end: fresh "latest")
    latest offsets/N, commits/N-1    -> RERUN_BATCH N over [offsets/N-1, offsets/N)
    latest offsets/0, no commit      -> FIRST_BATCH 0 over [sources/<i>/0, offsets/0)
    commits older than N-1 or none   -> Spark warns and re-runs batch N, as above

A log with gaps was written with async progress tracking (offsets and commits written every
``asyncProgressTrackingCheckpointIntervalMs``; MicroBatchExecution never leaves a gap: it purges the
oldest batches only). There "N-1" is the previous batch on disk
(``AsyncProgressTrackingMicroBatchExecution.validateOffsetLogAndGetPrevOffset``:
``offsetLog.getPrevBatchFromStorage``); a query restarted without the option fails instead (batch N-1
doesn't exist).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from recovery.core.model import CheckpointFile

# spark.sql.streaming.minBatchesToRetain (default 100; public since 4.3.0, SPARK-47013).
DEFAULT_MIN_BATCHES_TO_RETAIN = 100


class NextRun(StrEnum):
    NEXT_BATCH = "next_batch"  # batch N+1 starts from offsets/N
    RERUN_BATCH = "rerun_batch"  # batch N is planned again over [offsets/N-1, offsets/N)
    FIRST_BATCH = "first_batch"  # batch 0 starts from the initial offsets (sources/<i>/0)


class Level(StrEnum):
    ERROR = "error"  # Spark will refuse to restart
    WARNING = "warning"  # Spark restarts, but something is off
    INFO = "info"


@dataclass(frozen=True)
class Issue:
    level: Level
    message: str


@dataclass(frozen=True)
class RestartState:
    """What the next run of the query will do, and what looks wrong."""

    next_run: NextRun
    batch_id: int  # the batch Spark runs next
    # Where its start offsets come from: offsets/N or offsets/N-1; None = each source's own initial
    # offsets (sources/<i>/0).
    start: CheckpointFile | None
    # Where its end offsets come from: offsets/N; None = computed afresh (Kafka "latest", rate limits).
    end: CheckpointFile | None
    latest_offsets: int | None
    latest_commit: int | None
    issues: tuple[Issue, ...] = ()
    # The batch Spark reads as the one before N (its start offsets when N re-runs): N-1, or under
    # async progress tracking the previous batch on disk; None: there is none.
    previous: int | None = None
    asynchronous: bool = False  # the logs have gaps: written with async progress tracking

    @property
    def can_restart(self) -> bool:
        return not any(i.level is Level.ERROR for i in self.issues)


def _gaps(ids: Sequence[int]) -> tuple[int, ...]:
    present = set(ids)
    return tuple(i for i in range(min(ids), max(ids)) if i not in present) if ids else ()


def _ranges(ids: Sequence[int]) -> str:
    parts: list[str] = []
    for i in sorted(ids):
        if parts and parts[-1].split("-")[-1] == str(i - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{i}"
        else:
            parts.append(str(i))
    return ", ".join(parts)


def plan_restart(
    offset_ids: Sequence[int],
    commit_ids: Sequence[int],
    *,
    min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN,
) -> RestartState:
    """The restart decision for a checkpoint whose ``offsets/`` and ``commits/`` hold these batch ids."""
    issues: list[Issue] = []
    latest_commit = max(commit_ids) if commit_ids else None
    if not offset_ids:
        if commit_ids:
            issues.append(
                Issue(Level.ERROR, f"commits/ has batches ({_ranges(commit_ids)}) but offsets/ is empty")
            )
        return RestartState(NextRun.FIRST_BATCH, 0, None, None, None, latest_commit, tuple(issues))

    n = max(offset_ids)
    gaps = _gaps(offset_ids)
    asynchronous = bool(gaps)
    earlier = [i for i in offset_ids if i < n]
    previous = (
        (max(earlier) if earlier else None) if asynchronous else (n - 1 if n - 1 in offset_ids else None)
    )
    if asynchronous and previous is not None and previous != n - 1:
        # The one case where the two modes differ: the checkpoint cannot say which the query runs.
        issues.append(
            Issue(
                Level.WARNING,
                f"offsets/ has gaps (missing {_ranges(gaps)}): written with async progress tracking, "
                f"which restarts from the previous batch on disk (offsets/{previous}); restarted "
                f"without asyncProgressTrackingEnabled, Spark fails (batch {n - 1} doesn't exist)",
            )
        )
    elif asynchronous:
        issues.append(
            Issue(
                Level.INFO,
                f"offsets/ has gaps (missing {_ranges(gaps)}), as async progress tracking leaves them; "
                f"Spark restarts from offsets/{n - 1} either way",
            )
        )
    if commit_ids and (commit_gaps := _gaps(commit_ids)):
        level = Level.INFO if asynchronous else Level.WARNING
        issues.append(Issue(level, f"commits/ has gaps (missing {_ranges(commit_gaps)})"))
    if latest_commit is not None and latest_commit > n:
        issues.append(
            Issue(
                Level.ERROR,
                f"commits/{latest_commit} is newer than the latest offsets/{n}: the logs disagree",
            )
        )
    if latest_commit is not None and latest_commit < n - 1 and not asynchronous:
        issues.append(
            Issue(
                Level.WARNING,
                f"latest commit {latest_commit} does not trail latest offsets {n} by one; "
                f"Spark warns and re-runs batch {n}",
            )
        )

    latest = CheckpointFile.offsets(n)
    if latest_commit == n:
        state = RestartState(NextRun.NEXT_BATCH, n + 1, latest, None, n, latest_commit)
    elif n == 0:
        state = RestartState(NextRun.FIRST_BATCH, 0, None, latest, n, latest_commit)
    else:
        start = None if previous is None else CheckpointFile.offsets(previous)
        state = RestartState(NextRun.RERUN_BATCH, n, start, latest, n, latest_commit)

    if n > 0 and previous is None:
        issues.append(
            Issue(
                Level.ERROR,
                f"offsets/{n - 1} is missing: Spark needs it to restart from batch {n} "
                f"(The offset log for batch {n - 1} doesn't exist)",
            )
        )
    oldest = min(offset_ids)
    if oldest < n - min_batches_to_retain:
        issues.append(
            Issue(
                Level.INFO,
                f"{n - oldest + 1} offsets batches retained, more than minBatchesToRetain="
                f"{min_batches_to_retain} implies: the query ran with a larger setting or purging failed",
            )
        )
    elif oldest > 0:
        issues.append(
            Issue(
                Level.INFO, f"batches before {oldest} were purged (minBatchesToRetain keeps the newest ones)"
            )
        )
    return RestartState(
        state.next_run,
        state.batch_id,
        state.start,
        state.end,
        n,
        latest_commit,
        tuple(issues),
        previous,
        asynchronous,
    )
