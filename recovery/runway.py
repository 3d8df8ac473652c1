"""Retention runway: how long until retention may delete records a query has not read (pure: facts
in, values out; the facts come from :mod:`recovery.kafka.runway`).

How the broker deletes (apache/kafka core/src/main/scala/kafka/log/UnifiedLog.scala,
``deleteRetentionMsBreachedSegments``; LogManager.scala schedules it every
``log.retention.check.interval.ms``): a segment is deletable when ``now - largestTimestamp >
retention.ms``, oldest first, stopping at the first segment that is not. The segment holding the
record at the query's position ``p`` has a largest timestamp ``>= ts(p)``, and the log start passes
``p`` only when that segment goes. So nothing the query has not read can be deleted by time before
``ts(p) + retention.ms``: that is :attr:`~recovery.model.Runway.earliest_delete_ms`, a guaranteed
lower bound. In practice deletion comes later: when the segment's newest record is that old
(up to ``segment.ms`` later under steady writes) and at the next retention check.

Not covered, and said so in the reason: ``retention.bytes`` (a client cannot see segment sizes
cheaply), ``DeleteRecords`` (an operator's act), compaction (``cleanup.policy=compact`` deletes
superseded keys, not old records).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from recovery.errors import OffsetSpecError
from recovery.model import Finding, Runway, TopicPartition, Verdict
from recovery.strategy import parse_duration_ms

__all__ = [
    "RecordStamp",
    "TopicRetention",
    "apply_runway",
    "format_duration_ms",
    "parse_runway_warn",
    "runway_of",
    "wanted_positions",
]

_COMPACT = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$", re.IGNORECASE)
_COMPACT_MS = (604_800_000, 86_400_000, 3_600_000, 60_000, 1000)


@dataclass(frozen=True)
class TopicRetention:
    """A topic's effective deletion settings (DescribeConfigs; the broker's default when not set)."""

    retention_ms: int  # -1: no time limit
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    segment_ms: int | None = None

    @property
    def deletes(self) -> bool:
        """Whether retention deletes old segments at all (``delete`` in ``cleanup.policy``)."""
        return "delete" in self.cleanup_policy


@dataclass(frozen=True)
class RecordStamp:
    """The first record a reader gets at or after a position: its offset (above the position when
    transaction markers or compaction left gaps) and its timestamp (-1: the record has none)."""

    offset: int
    timestamp_ms: int


def parse_runway_warn(text: str, option: str = "--runway-warn") -> int:
    """``PT6H`` (ISO-8601, as ``--by-duration``) or ``6h``/``1h30m``/``2d`` in milliseconds.

    >>> parse_runway_warn("PT6H") == parse_runway_warn("6h") == 21_600_000
    True
    """
    compact = text.strip().replace(" ", "")
    if compact[:1] in ("P", "p"):
        try:
            ms = parse_duration_ms(compact)
        except OffsetSpecError:
            ms = 0
    else:
        match = _COMPACT.match(compact)
        ms = (
            sum(int(n) * unit for n, unit in zip(match.groups(), _COMPACT_MS, strict=True) if n)
            if match
            else 0
        )
    if ms <= 0:
        raise OffsetSpecError(f"{option} {text!r}: expected a duration such as PT6H, 6h, 1h30m or P1D")
    return ms


def format_duration_ms(ms: int) -> str:
    """``18720000`` -> ``5h12m``; two units at most (a runway is not read to the second when it is
    days long); ``0s`` below a second."""
    parts: list[str] = []
    rest = abs(ms)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        count, rest = divmod(rest, size)
        if count or parts:
            parts.append(f"{count}{unit}")
    shown = "".join(p for p in parts[:2] if not p.startswith("0")) or "0s"
    return f"-{shown}" if ms < 0 else shown


def wanted_positions(findings: Iterable[Finding]) -> frozenset[tuple[TopicPartition, int]]:
    """The (partition, position) whose record timestamp a runway needs: partitions Spark resumes
    cleanly (OK) with records still to read. Others have lost records already, or nothing unread."""
    return frozenset(
        (f.tp, f.position)
        for f in findings
        if f.verdict is Verdict.OK
        and f.position is not None
        and f.available is not None
        and f.position < f.available.end
    )


def runway_of(
    position: int,
    retention: TopicRetention | str | None,
    stamp: RecordStamp | str | None,
) -> Runway:
    """The runway of unread records from ``position``: ``retention`` (or why it is unknown) and the
    ``stamp`` of the first record at or after it (or why it was not read)."""
    if isinstance(retention, str) or retention is None:
        return Runway(None, _ts(stamp), f"retention settings not read: {retention or 'unknown'}")
    if not retention.deletes:
        return Runway(None, _ts(stamp), "compacted (cleanup.policy=compact): not deleted by time")
    size_note = (
        f"; retention.bytes={retention.retention_bytes}: not estimated"
        if retention.retention_bytes >= 0
        else ""
    )
    if isinstance(stamp, str) or stamp is None:
        return Runway(None, None, f"record at {position} not read: {stamp or 'unknown'}{size_note}")
    if stamp.timestamp_ms < 0:
        return Runway(None, None, f"record at {stamp.offset} has no timestamp{size_note}")
    gap = f"; first record at or after {position} is {stamp.offset}" if stamp.offset != position else ""
    if retention.retention_ms < 0 and retention.retention_bytes >= 0:
        # No time limit, but size retention still deletes: not "infinite", and not estimated.
        return Runway(
            None,
            stamp.timestamp_ms,
            f"size-limited (retention.ms=-1, retention.bytes={retention.retention_bytes}): "
            f"not estimated{gap}",
        )
    if retention.retention_ms < 0:
        return Runway(None, stamp.timestamp_ms, f"infinite retention (retention.ms=-1){gap}")
    return Runway(
        stamp.timestamp_ms + retention.retention_ms,
        stamp.timestamp_ms,
        f"retention.ms={retention.retention_ms}{size_note}{gap}",
    )


def apply_runway(
    findings: Iterable[Finding],
    retention: Mapping[str, TopicRetention | str],
    stamps: Mapping[tuple[TopicPartition, int], RecordStamp | str],
    *,
    now_ms: int,
    warn_ms: int | None,
) -> tuple[Finding, ...]:
    """Each finding with its runway; an OK partition whose runway is below ``warn_ms`` (None: no
    threshold) becomes AT_RISK. Spark still restarts it cleanly: starting the query is the cure."""
    out = []
    for f in findings:
        if f.verdict is not Verdict.OK or f.position is None or f.available is None:
            out.append(f)
            continue
        if f.position >= f.available.end:
            out.append(replace(f, runway=Runway(None, None, "nothing unread")))
            continue
        runway = runway_of(f.position, retention.get(f.tp.topic), stamps.get((f.tp, f.position)))
        left = runway.left_ms(now_ms)
        if warn_ms is not None and left is not None and left < warn_ms:
            when = f"in {format_duration_ms(left)}" if left > 0 else "at the next retention check"
            oldest = runway.oldest_unread_ms if runway.oldest_unread_ms is not None else now_ms
            detail = (
                f"retention may delete unread records {when} (record at {f.position} is "
                f"{format_duration_ms(now_ms - oldest)} old; {runway.reason}): start the query"
            )
            out.append(replace(f, verdict=Verdict.AT_RISK, runway=runway, detail=detail))
        else:
            out.append(replace(f, runway=runway))
    return tuple(out)


def _ts(stamp: RecordStamp | str | None) -> int | None:
    return stamp.timestamp_ms if isinstance(stamp, RecordStamp) and stamp.timestamp_ms >= 0 else None


def shortest(findings: Iterable[Finding], now_ms: int) -> tuple[Finding, int] | None:
    """The finding with the least runway left, and that time (None: no finding has a time limit)."""
    timed = [(f, left) for f in findings if f.runway and (left := f.runway.left_ms(now_ms)) is not None]
    return min(timed, key=lambda item: item[1]) if timed else None
