"""The runway of a Delta source: how long until the table's cleanup may remove something the stopped
stream still needs (pure: a finding and the table's log in, the finding with its runway out).

Two cleanups, each with a guaranteed lower bound:

* **Log cleanup** deletes ``_delta_log/<v>.json`` files older than ``delta.logRetentionDuration``
  (default 30 days), when a checkpoint is written and ``delta.enableExpiredLogCleanup`` is on, and
  only files before a checkpoint (delta-io/delta ``MetadataCleanup.cleanUpExpiredLogs``: a file is
  expired when its modification time is before ``truncateDay(now - retention)``; the time is made
  monotonic across versions, only ever later, by ``BufferingLogDeletionIterator``). So the first
  commit the stream lists on restart is not deleted before its file's time plus the retention;
  Delta Lake on Spark waits for the next UTC midnight after that, delta-rs does not. Once it goes,
  the restart fails with ``DELTA_MISSING_FILES_UNEXPECTED_VERSION``.
* **VACUUM** deletes data files removed from the table more than
  ``delta.deletedFileRetentionDuration`` ago (default 7 days; a tombstone's ``deletionTimestamp``).
  A file added by a version the stream has still to read and removed by a later one goes at the
  first VACUUM after that; the restart then fails with ``FAILED_READ_FILE.FILE_NOT_EXIST``. VACUUM
  runs when someone runs it: the last one in the table's history is said, as a hint of the cadence.

Not covered, and said: ``VACUUM ... RETAIN n HOURS`` below the property (an operator's override, as
Kafka's ``DeleteRecords``), and the files of an initial snapshot the stream is still reading.
"""

from __future__ import annotations

import re
from dataclasses import replace

from recovery.core.model import Runway
from recovery.core.runway import format_duration_ms
from recovery.delta.model import DeltaFinding, DeltaSourceRead, DeltaVerdict, TableLog
from recovery.delta.source import needed_snapshots

__all__ = ["delta_runway", "parse_interval_ms"]

_UNITS_MS = {
    "microsecond": 0.001,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_PART = re.compile(r"(-?\d+)\s*([a-z]+?)s?\b")


def parse_interval_ms(text: str) -> int:
    """A Delta table property interval (``interval 30 days``, ``1 week``, ``interval 2 hours 30
    minutes``) in milliseconds; ValueError for anything else, months and years included (Delta
    refuses them: a month has no fixed length).

    >>> parse_interval_ms("interval 1 week") == parse_interval_ms("7 days") == 604_800_000
    True
    """
    body = text.strip().lower()
    body = body[len("interval") :].strip() if body.startswith("interval") else body
    parts = _PART.findall(body)
    if not parts or _PART.sub("", body).strip():
        raise ValueError(f"not an interval: {text!r}")
    total = 0.0
    for count, unit in parts:
        if unit not in _UNITS_MS:
            raise ValueError(f"unit {unit!r} in {text!r}: Delta takes weeks to microseconds")
        total += int(count) * _UNITS_MS[unit]
    if total < 0:
        raise ValueError(f"negative interval: {text!r}")
    return int(total)


def delta_runway(
    finding: DeltaFinding, read: DeltaSourceRead, log: TableLog, *, now_ms: int, warn_ms: int | None
) -> DeltaFinding:
    """``finding`` with its runway; an OK one whose runway is below ``warn_ms`` becomes AT_RISK."""
    if finding.verdict is not DeltaVerdict.OK:
        return finding
    resume = read.resume.offset
    oldest = log.commit_ms.get(resume.reservoir_version)
    snapshots = [version for _, version in needed_snapshots(read)]
    if finding.needed_from > log.latest and not snapshots:
        return replace(finding, runway=Runway(None, None, "nothing unread"))
    limits: list[tuple[int, str]] = []
    reasons: list[str] = []
    retention = log.retention
    if not retention.log_cleanup:
        reasons.append("log cleanup off (delta.enableExpiredLogCleanup=false)")
    elif isinstance(retention.log_ms, str):
        reasons.append(f"delta.logRetentionDuration not read: {retention.log_ms}")
    else:
        # Each log file the restart starts from: the first commit it lists, and where each snapshot
        # it rebuilds starts (a checkpoint's version, or 0); a commit not written yet is nothing to lose.
        needs = [(finding.needed_from, "")] if finding.needed_from <= log.latest else []
        for snapshot in snapshots:
            base = log.snapshot_base(snapshot)
            said = "its snapshot" if base == snapshot else f"the snapshot of version {snapshot}"
            needs.append((base, f" (to rebuild {said})"))
        keep = format_duration_ms(retention.log_ms)
        for version, why_snapshot in sorted(set(needs)):
            written = log.commit_ms.get(version)
            if written is None:  # said, never dropped silently: the bound is then incomplete
                reasons.append(f"the time of version {version}'s commit is not known{why_snapshot}")
                continue
            ago = format_duration_ms(now_ms - written)
            why = (
                f"delta.logRetentionDuration={keep}: log cleanup may delete version {version}"
                f"{why_snapshot}, committed {ago} ago"
            )
            limits.append((written + retention.log_ms, why))
    removed = [
        (f.removed_ms, v)
        for v, f in log.files.items()
        if v >= finding.resume_from and f.removed_ms is not None
    ]
    if removed:
        removed_ms, version = min(removed)
        if isinstance(retention.deleted_file_ms, int):
            last = (
                f"; last VACUUM {format_duration_ms(now_ms - log.last_vacuum_ms)} ago"
                if log.last_vacuum_ms is not None
                else "; no VACUUM in the table's history"
            )
            why = (
                f"delta.deletedFileRetentionDuration={format_duration_ms(retention.deleted_file_ms)}: "
                f"VACUUM may delete a file of version {version} removed "
                f"{format_duration_ms(now_ms - removed_ms)} ago{last}"
            )
            limits.append((removed_ms + retention.deleted_file_ms, why))
    unread_files = resume.is_starting_version or any(
        f.added for v, f in log.files.items() if v >= finding.resume_from
    )
    if unread_files and isinstance(retention.deleted_file_ms, str):
        reasons.append(f"delta.deletedFileRetentionDuration not read: {retention.deleted_file_ms}")
    elif unread_files and isinstance(retention.deleted_file_ms, int):
        # A file still to read that is not removed yet can be, any time (OPTIMIZE, DELETE, an
        # overwrite): VACUUM may then delete it once the retention has passed from then on.
        keep = format_duration_ms(retention.deleted_file_ms)
        limits.append(
            (
                now_ms + retention.deleted_file_ms,
                f"delta.deletedFileRetentionDuration={keep}: a file still to read, if removed from now on "
                "(OPTIMIZE, DELETE, an overwrite), may be deleted by VACUUM",
            )
        )
    if not limits:
        return replace(finding, runway=Runway(None, oldest, "; ".join(reasons) or "not deleted by cleanup"))
    earliest, why = min(limits)
    runway = Runway(earliest, oldest, "; ".join([why, *reasons]))
    left = earliest - now_ms
    if warn_ms is None or left >= warn_ms:
        return replace(finding, runway=runway)
    when = f"in {format_duration_ms(left)}" if left > 0 else "at its next run"
    detail = f"cleanup may remove what the stream still needs {when} ({why}): start the query"
    return replace(finding, verdict=DeltaVerdict.AT_RISK, runway=runway, detail=detail)
