"""Retention runway: how long until retention may delete records a query has not read (pure: facts
in, values out; the facts come from :mod:`recovery.kafka.runway_facts`).

How the broker deletes (apache/kafka core/src/main/scala/kafka/log/UnifiedLog.scala,
``deleteRetentionMsBreachedSegments``; LogManager.scala schedules it every
``log.retention.check.interval.ms``): a segment is deletable when ``now - largestTimestamp >
retention.ms``, oldest first, stopping at the first segment that is not. The segment holding the
record at the query's position ``p`` has a largest timestamp ``>= ts(p)``, and the log start passes
``p`` only when that segment goes. So nothing the query has not read can be deleted by time before
``ts(p) + retention.ms``: that is :attr:`~recovery.core.model.Runway.earliest_delete_ms`, a guaranteed
lower bound. In practice deletion comes later: when the segment's newest record is that old
(up to ``segment.ms`` later under steady writes) and at the next retention check.

By size (``deleteRetentionSizeBreachedSegments``): while the partition is larger than
``retention.bytes``, the oldest segments go, each only if the excess still covers it whole. The
segment holding ``p`` goes only once the bytes after it reach ``retention.bytes``, so nothing
unread can be deleted by size while the bytes from ``p`` to the log end stay below the limit. A
client sees only the partition's size (DescribeLogDirs), so the bytes from ``p`` are estimated as
the size times the share of the log's records at or after ``p`` (even record sizes), and the time
left as the bytes to go at the rate written since the record at ``p``: an *estimate*, said so in
the reason, and the earlier of the two limits is the runway.

Not covered, and said so in the reason: ``DeleteRecords`` (an operator's act), compaction
(``cleanup.policy=compact`` deletes superseded keys, not old records).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recovery.core.model import Finding, OffsetRange, Runway, TopicPartition, Verdict, copied_with
from recovery.core.strategy import parse_duration_ms
from recovery.errors import OffsetSpecError

__all__ = [
    "RecordStamp",
    "TopicRetention",
    "apply_runway",
    "format_bytes",
    "format_duration_ms",
    "parse_runway_warn",
    "runway_of",
    "size_runway",
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
    # Tiered storage (KIP-405, ``remote.storage.enable``): retention.ms and retention.bytes count the
    # whole log, remote segments included; local.retention.* only moves segments off the brokers.
    remote_storage: bool = False
    local_retention_ms: int = -2  # -2: as retention.ms

    @property
    def deletes(self) -> bool:
        """Whether retention deletes old segments at all (``delete`` in ``cleanup.policy``)."""
        return "delete" in self.cleanup_policy


@dataclass(frozen=True, slots=True)
class RecordStamp:
    """The first record a reader gets at or after a position: its offset (above the position when
    transaction markers or compaction left gaps) and its timestamp (-1: the record has none)."""

    offset: int
    timestamp_ms: int


def parse_runway_warn(text: str, name: str = "runway_warn") -> int:
    """``PT6H`` (ISO-8601, as :func:`~recovery.core.strategy.parse_duration_ms`) or ``6h``/``1h30m``/``2d``
    in milliseconds; messages start with ``name`` (the CLI passes its flag).

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
        raise OffsetSpecError(
            f"{name} {text!r}: expected a duration such as PT6H, 6h, 1h30m or P1D", parameter=name
        )
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
    *,
    size: int | str | None = None,
    log: OffsetRange | None = None,
    now_ms: int | None = None,
) -> Runway:
    """The runway of unread records from ``position``: ``retention`` (or why it is unknown) and the
    ``stamp`` of the first record at or after it (or why it was not read). Under ``retention.bytes``,
    ``size`` (the partition's bytes, or why unknown), ``log`` (its offsets) and ``now_ms`` give the
    size estimate; without them the reason says it was not estimated."""
    if isinstance(retention, str) or retention is None:
        return Runway(None, _ts(stamp), f"retention settings not read: {retention or 'unknown'}")
    if not retention.deletes:
        return Runway(None, _ts(stamp), "compacted (cleanup.policy=compact): not deleted by time")
    tiered = _tiered_note(retention)
    note = f"; retention.bytes={retention.retention_bytes}: not estimated" if _sized(retention) else ""
    note += tiered
    if isinstance(stamp, str) or stamp is None:
        return Runway(None, None, f"record at {position} not read: {stamp or 'unknown'}{note}")
    if stamp.timestamp_ms < 0:
        return Runway(None, None, f"record at {stamp.offset} has no timestamp{note}")
    gap = f"; first record at or after {position} is {stamp.offset}" if stamp.offset != position else ""
    by_time = stamp.timestamp_ms + retention.retention_ms if retention.retention_ms >= 0 else None
    by_size, size_reason = None, ""
    if _sized(retention):
        if retention.remote_storage:
            # DescribeLogDirs sizes the brokers' local segments only; retention.bytes counts the
            # remote ones too, so an estimate from the local part would come too late.
            size_reason = (
                f"retention.bytes={retention.retention_bytes}: not estimated (Kafka reports the size "
                "of the local segments only)"
            )
        elif isinstance(size, int) and log is not None and now_ms is not None:
            by_size, size_reason = size_runway(
                position, log, size, retention.retention_bytes, stamp.timestamp_ms, now_ms
            )
        else:
            why = f" ({size})" if isinstance(size, str) else ""
            size_reason = f"retention.bytes={retention.retention_bytes}: not estimated{why}"
    if by_time is None and not size_reason:
        return Runway(None, stamp.timestamp_ms, f"infinite retention (retention.ms=-1){gap}{tiered}")
    time_reason = f"retention.ms={retention.retention_ms}" if by_time is not None else "retention.ms=-1"
    if by_time is None and by_size is None:
        # No time limit, and size retention still deletes: not "infinite", whatever was estimated.
        return Runway(None, stamp.timestamp_ms, f"size-limited ({time_reason}): {size_reason}{gap}{tiered}")
    known = [t for t in (by_time, by_size) if t is not None]
    reason = "; ".join(r for r in (time_reason, size_reason) if r)
    return Runway(min(known), stamp.timestamp_ms, f"{reason}{gap}{tiered}")


def _tiered_note(retention: TopicRetention) -> str:
    """What a tiered topic's runway counts: the whole log (Spark reads remote segments as local ones)."""
    if not retention.remote_storage:
        return ""
    local = retention.local_retention_ms
    kept = (
        "local.retention.ms=-2: the brokers keep them as long as retention.ms"
        if local == -2
        else f"local.retention.ms={local} only moves segments off the brokers' disks"
    )
    return f"; tiered storage: the whole log counts, remote segments included ({kept})"


def size_runway(
    position: int, log: OffsetRange, size_bytes: int, retention_bytes: int, oldest_ms: int, now_ms: int
) -> tuple[int | None, str]:
    """When ``retention.bytes`` may delete the record at ``position`` (an estimate; None: no write
    rate to go by), and the reason: the unread bytes estimated as ``size_bytes`` times the share of
    ``log``'s records from ``position``, the bytes left to the limit at the rate written since the
    record at ``position`` (timestamp ``oldest_ms``)."""
    limit = f"retention.bytes={retention_bytes}"
    records = log.end - log.start
    if records <= 0 or size_bytes <= 0 or position >= log.end:
        return None, f"{limit}: not estimated (partition size {size_bytes} B, {records} records)"
    unread = size_bytes * (log.end - max(position, log.start)) // records
    if unread <= 0:  # fewer bytes than offsets (compacted away, or transaction markers): no rate
        return None, f"{limit}: not estimated ({format_bytes(size_bytes)} on disk for {records} offsets)"
    shown = f"~{format_bytes(unread)} of the partition's {format_bytes(size_bytes)} unread"
    to_go = retention_bytes - unread
    if to_go <= 0:
        return now_ms, f"{limit}: {shown}, over the limit (estimate)"
    elapsed = now_ms - oldest_ms
    if elapsed <= 0:
        return None, f"{limit}: {shown}, write rate unknown (record at {position} is not in the past)"
    rate = unread / elapsed  # bytes a millisecond, written since the oldest unread record
    return (
        now_ms + int(to_go / rate),
        f"{limit}: {shown}, ~{format_bytes(to_go)} to go at ~{format_bytes(int(rate * 1000))}/s (estimate)",
    )


def _sized(retention: TopicRetention) -> bool:
    return retention.retention_bytes >= 0


def format_bytes(n: int) -> str:
    """``1536`` -> ``1.5 KiB``: sizes for people."""
    if abs(n) < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if abs(size) < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


_NOTHING_UNREAD = Runway(None, None, "nothing unread")


def apply_runway(
    findings: Iterable[Finding],
    retention: Mapping[str, TopicRetention | str],
    stamps: Mapping[tuple[TopicPartition, int], RecordStamp | str],
    *,
    now_ms: int,
    warn_ms: int | None,
    sizes: Mapping[TopicPartition, int | str] | None = None,
) -> tuple[Finding, ...]:
    """Each finding with its runway; an OK partition whose runway is below ``warn_ms`` (None: no
    threshold) becomes AT_RISK. Spark still restarts it cleanly: starting the query is the cure.
    ``sizes``: the partitions' bytes (or why unknown), for topics limited by ``retention.bytes``."""
    out = []
    for f in findings:
        if f.verdict is not Verdict.OK or f.position is None or f.available is None:
            out.append(f)
            continue
        if f.position >= f.available.end:
            out.append(copied_with(f, runway=_NOTHING_UNREAD))
            continue
        runway = runway_of(
            f.position,
            retention.get(f.tp.topic),
            stamps.get((f.tp, f.position)),
            size=(sizes or {}).get(f.tp),
            log=f.available,
            now_ms=now_ms,
        )
        left = runway.left_ms(now_ms)
        if warn_ms is not None and left is not None and left < warn_ms:
            when = f"in {format_duration_ms(left)}" if left > 0 else "at the next retention check"
            oldest = runway.oldest_unread_ms if runway.oldest_unread_ms is not None else now_ms
            detail = (
                f"retention may delete unread records {when} (record at {f.position} is "
                f"{format_duration_ms(now_ms - oldest)} old; {runway.reason}): start the query"
            )
            out.append(copied_with(f, verdict=Verdict.AT_RISK, runway=runway, detail=detail))
        else:
            out.append(copied_with(f, runway=runway))
    return tuple(out)


def _ts(stamp: RecordStamp | str | None) -> int | None:
    return stamp.timestamp_ms if isinstance(stamp, RecordStamp) and stamp.timestamp_ms >= 0 else None


def shortest(findings: Iterable[Finding], now_ms: int) -> tuple[Finding, int] | None:
    """The finding with the least runway left, and that time (None: no finding has a time limit)."""
    timed = [(f, left) for f in findings if f.runway and (left := f.runway.left_ms(now_ms)) is not None]
    return min(timed, key=lambda item: item[1]) if timed else None
