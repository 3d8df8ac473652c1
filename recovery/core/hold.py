"""A retention hold (pure: facts in, a plan out; :mod:`recovery.hold` reads the facts and writes).

A stopped or slow query loses records when retention deletes them before it reads them. Raising the
topic's ``retention.ms`` (and ``retention.bytes`` where the topic is limited by size) for a while
prevents that; putting the values back afterwards is the other half. This module decides both.

**How much.** The broker deletes by time once a segment's newest record is older than
``retention.ms`` (:mod:`recovery.core.runway`), so records from the query's position ``p`` are kept
``keep`` more when ``ts(p) + retention.ms >= now + keep``: the smallest such ``retention.ms`` over
the topic's unread partitions, rounded up to a minute. By size, a partition keeps its newest
``retention.bytes``: the unread bytes (estimated as the runway does) plus what is written during
``keep`` at the partition's write rate, rounded up to a MiB. A value is only ever raised.

**What it costs.** Each replica holds more: by time, what the partition writes during the extra
retention (its write rate: its size over the age of its oldest record); by size, up to the raised
limit. Summed per broker log directory, with the directory's free space where the broker reports it
(KIP-827, Kafka 3.3 on). Topics are judged most urgent first; one that would push a directory under
the free-space floor, or a broker over ``max_extra_bytes``, or needs more than ``max_retention_ms``,
is refused, the others still held.

**Release.** A topic's hold ends once the query has read past every record the hold protected (the
log end offsets when it was placed), or when the operator says so. Each value is put back only when
it is still the one the hold set; a value someone else changed since is theirs, and is left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from recovery.core.model import Finding, OffsetRange, TopicPartition, Verdict
from recovery.core.runway import RecordStamp, TopicRetention, format_bytes, format_duration_ms
from recovery.errors import ExitCode

__all__ = [
    "DEFAULT_MAX_RETENTION_MS",
    "DEFAULT_MIN_FREE_RATIO",
    "HOLD_MARK",
    "HeldValue",
    "HoldAction",
    "HoldLimits",
    "HoldPlan",
    "LogDir",
    "ReleaseAction",
    "ReleasePlan",
    "TopicHold",
    "TopicHoldRecord",
    "TopicRelease",
    "decide_release",
    "plan_hold",
    "set_by_a_hold",
    "write_rate",
]

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
# What a careful operator would allow without being asked: a month of retention at most (a hold is
# for an outage, not a new policy), and a tenth of each log directory left free.
DEFAULT_MAX_RETENTION_MS = 30 * 86_400_000
DEFAULT_MIN_FREE_RATIO = 0.10
_MINUTE = 60_000
_MIB = 1024 * 1024
# A value a hold sets is 7 past a whole minute (retention.ms) or a whole MiB (retention.bytes): the
# release of another hold of the same topic (another query reads it) then tells "raised further by a
# hold" from "changed by someone" (people set round numbers), and waits for that hold to end instead
# of leaving the topic at its value for good.
HOLD_MARK = 7
_UNIT = {RETENTION_MS: _MINUTE, RETENTION_BYTES: _MIB}
# Verdicts whose position is not where Spark goes on (recreated, truncated, gone, not read now).
_NOT_HELD = frozenset(
    {
        Verdict.TOPIC_RECREATED,
        Verdict.BEYOND_LOG_END,
        Verdict.TOPIC_GONE,
        Verdict.PARTITION_GONE,
        Verdict.OPEN_TRANSACTION,
        Verdict.TRANSIENT,
    }
)


@dataclass(frozen=True)
class HoldLimits:
    """How long to keep unread records (``keep_ms`` from now), and the caps a hold may not pass."""

    keep_ms: int
    max_retention_ms: int = DEFAULT_MAX_RETENTION_MS
    max_extra_bytes: int | None = None  # per broker, all held topics together
    min_free_ratio: float = DEFAULT_MIN_FREE_RATIO


@dataclass(frozen=True)
class LogDir:
    """One log directory of one broker: the sizes of the replicas it holds and, where the broker
    says (DescribeLogDirs v4, KIP-827), the disk's total and usable bytes (None: not reported)."""

    broker: int
    path: str
    total_bytes: int | None
    usable_bytes: int | None
    sizes: Mapping[TopicPartition, int]


class HoldAction(StrEnum):
    RAISE = "RAISE"  # the plan raises a value (with execute: raised, unless ``error`` says otherwise)
    ENOUGH = "ENOUGH"  # the runway is already at least ``keep``: nothing to change
    REFUSED = "REFUSED"  # a cap, the free-space floor, or a fact that could not be read


@dataclass(frozen=True)
class TopicHold:
    """The plan for one topic: the values now and as raised (``new_*`` None: unchanged), the
    shortest runway now, the estimated extra bytes per broker, and why."""

    topic: str
    action: HoldAction
    reason: str
    runway_ms: int | None = None  # shortest time left before retention may delete unread records
    retention_ms: int | None = None
    new_retention_ms: int | None = None
    retention_bytes: int | None = None
    new_retention_bytes: int | None = None
    extra_bytes: Mapping[int, int] = field(default_factory=dict)  # broker -> estimated extra bytes
    protect_until: Mapping[int, int] = field(default_factory=dict)  # partition -> log end offset now
    error: str | None = None  # the broker refused the change (execute only)

    @property
    def changes(self) -> dict[str, str]:
        """The values a RAISE sets: name -> value (a REFUSED hold shows what it would have needed)."""
        out = {}
        if self.new_retention_ms is not None:
            out[RETENTION_MS] = str(self.new_retention_ms)
        if self.new_retention_bytes is not None:
            out[RETENTION_BYTES] = str(self.new_retention_bytes)
        return out


@dataclass(frozen=True)
class HoldPlan:
    """A hold's plan (or, with ``executed``, what was done) for every topic a checkpoint reads."""

    location: str
    keep_ms: int
    now_ms: int
    topics: tuple[TopicHold, ...]
    notes: tuple[str, ...] = ()
    executed: bool = False
    free_space: tuple[LogDir, ...] = ()

    @property
    def raising(self) -> tuple[TopicHold, ...]:
        return tuple(t for t in self.topics if t.action is HoldAction.RAISE)

    @property
    def exit_code(self) -> ExitCode:
        """0: nothing needed, or every raise applied; 1: a dry run with raises pending, a refusal,
        or a change the broker refused."""
        if any(t.action is HoldAction.REFUSED or t.error for t in self.topics):
            return ExitCode.ACTION_NEEDED
        if self.raising and not self.executed:
            return ExitCode.ACTION_NEEDED
        return ExitCode.OK


def write_rate(size_bytes: int | str | None, log_start: RecordStamp | str | None, now_ms: int) -> float | str:
    """A partition's write rate in bytes a millisecond: its size over the age of its oldest record
    (what it holds was written since), or why it cannot be told."""
    if isinstance(size_bytes, str) or size_bytes is None:
        return f"size not known ({size_bytes or 'not read'})"
    if size_bytes == 0:
        return 0.0
    if not isinstance(log_start, RecordStamp):
        return f"oldest record not read ({log_start or 'unknown'})"
    if log_start.timestamp_ms < 0:
        return f"oldest record (offset {log_start.offset}) has no timestamp"
    return size_bytes / max(1, now_ms - log_start.timestamp_ms)


def plan_hold(
    location: str,
    findings: Iterable[Finding],
    retention: Mapping[str, TopicRetention | str],
    log_start_stamps: Mapping[TopicPartition, RecordStamp | str],
    dirs: Sequence[LogDir] | str,
    limits: HoldLimits,
    now_ms: int,
) -> HoldPlan:
    """The hold for each topic of ``findings`` (a validation's, with runways): what to raise to
    keep every unread record ``limits.keep_ms`` more, and what it costs each broker.
    ``log_start_stamps``: the oldest record of each partition (its write rate, and the oldest unread
    record of a partition Spark will read from the start); ``dirs``: every broker's log directories
    with the topics' replicas (or why they could not be read)."""
    by_topic: dict[str, list[Finding]] = {}
    notes: list[str] = []
    for f in findings:
        by_topic.setdefault(f.tp.topic, []).append(f)
    sizes = _largest_sizes(dirs)
    rates = {
        f.tp: write_rate(sizes.get(f.tp, "not reported"), log_start_stamps.get(f.tp), now_ms)
        for fs in by_topic.values()
        for f in fs
    }
    drafts = [
        _with_extra(
            _draft(topic, fs, retention.get(topic), log_start_stamps, sizes, rates, limits, now_ms, notes),
            dirs,
            rates,
            limits,
        )
        for topic, fs in sorted(by_topic.items())
    ]
    # Most urgent first: when the disk is short, the topic about to lose records gets it.
    order = sorted(range(len(drafts)), key=lambda i: (_urgency(drafts[i][0]), drafts[i][0].topic))
    used: dict[tuple[int, str], int] = {}
    judged: dict[int, TopicHold] = {}
    for i in order:
        judged[i] = _within_disk(*drafts[i], dirs, limits, used)
    if not isinstance(dirs, str) and any(d.usable_bytes is None or d.total_bytes is None for d in dirs):
        brokers = sorted({d.broker for d in dirs if d.usable_bytes is None or d.total_bytes is None})
        notes.append(
            f"broker {', '.join(map(str, brokers))} does not report its free space (DescribeLogDirs "
            "before v4, Kafka < 3.3): the free-space floor was not checked there"
        )
    free = () if isinstance(dirs, str) else tuple(dirs)
    return HoldPlan(
        location,
        limits.keep_ms,
        now_ms,
        tuple(judged[i] for i in range(len(drafts))),
        tuple(notes),
        free_space=free,
    )


def _urgency(hold: TopicHold) -> tuple[int, int]:
    return (
        0 if hold.action is HoldAction.RAISE else 1,
        hold.runway_ms if hold.runway_ms is not None else 2**62,
    )


def _largest_sizes(dirs: Sequence[LogDir] | str) -> dict[TopicPartition, int]:
    sizes: dict[TopicPartition, int] = {}
    if isinstance(dirs, str):
        return sizes
    for d in dirs:
        for tp, size in d.sizes.items():
            sizes[tp] = max(sizes.get(tp, 0), size)
    return sizes


def _unread_from(
    f: Finding, stamps: Mapping[TopicPartition, RecordStamp | str]
) -> tuple[int, int | str] | None:
    """(first unread offset, its record's timestamp or why unknown) of a partition Spark will read
    from, None when it has nothing unread or its position says nothing of what Spark reads next."""
    if f.available is None:
        return None
    # A new partition is read from its start; so is one that lost records (after the repair, or
    # with failOnDataLoss=false): what is left there is unread, and a hold keeps it.
    if f.verdict in (Verdict.NEW_PARTITION, Verdict.BELOW_LOG_START):
        start = f.available.start
        stamp = stamps.get(f.tp)
    elif f.verdict in (Verdict.OK, Verdict.AT_RISK) and f.position is not None:
        start = f.position
        stamp = None
        if f.runway is not None and f.runway.oldest_unread_ms is not None:
            return (start, f.runway.oldest_unread_ms) if start < f.available.end else None
    else:
        return None
    if start >= f.available.end:
        return None
    if isinstance(stamp, RecordStamp):
        return (start, stamp.timestamp_ms) if stamp.timestamp_ms >= 0 else (start, "it has no timestamp")
    why = (f.runway.reason if f.runway else None) or stamp or "not read"
    return start, str(why)


def _draft(
    topic: str,
    findings: list[Finding],
    retention: TopicRetention | str | None,
    stamps: Mapping[TopicPartition, RecordStamp | str],
    sizes: Mapping[TopicPartition, int],
    rates: Mapping[TopicPartition, float | str],
    limits: HoldLimits,
    now_ms: int,
    notes: list[str],
) -> TopicHold:
    """A topic's hold before its cost in disk is counted."""
    lost = [f.tp for f in findings if f.records_lost > 0 or f.verdict is Verdict.BELOW_LOG_START]
    if lost:
        notes.append(
            f"{_tps(lost)}: records are already lost; a hold keeps what is left, it cannot bring "
            "those back (`repair_checkpoint` counts them)"
        )
    # Positions that say nothing about what Spark will read next: a hold would guess.
    unsure = {f.tp: f.verdict for f in findings if f.verdict in _NOT_HELD}
    for verdict in sorted(set(unsure.values())):
        tps = [tp for tp, v in unsure.items() if v is verdict]
        notes.append(f"{_tps(tps)}: {verdict.value}: not held; see `validate_checkpoint` and repair first")
    if unsure and all(f.tp in unsure for f in findings):
        verdicts = ", ".join(sorted({v.value for v in unsure.values()}))
        return TopicHold(
            topic, HoldAction.REFUSED, f"no partition Spark resumes cleanly ({verdicts}): repair first"
        )
    if isinstance(retention, str) or retention is None:
        return TopicHold(topic, HoldAction.REFUSED, f"retention settings not read: {retention or 'unknown'}")
    unread = {f.tp: u for f in findings if (u := _unread_from(f, stamps)) is not None}
    lefts = [
        left
        for f in findings
        if f.tp in unread and f.runway is not None and (left := f.runway.left_ms(now_ms)) is not None
    ]
    if retention.retention_ms >= 0:  # a partition Spark reads from its start has no runway of its own
        lefts += [
            int(ts) + retention.retention_ms - now_ms for _, ts in unread.values() if not isinstance(ts, str)
        ]
    runway = min(lefts) if lefts else None

    def judged(
        action: HoldAction, reason: str, new_ms: int | None = None, new_bytes: int | None = None
    ) -> TopicHold:
        protect = {f.tp.partition: f.available.end for f in findings if f.available is not None}
        return TopicHold(
            topic,
            action,
            reason,
            runway,
            retention.retention_ms,
            new_ms,
            retention.retention_bytes,
            new_bytes,
            protect_until=protect if action is HoldAction.RAISE else {},
        )

    if not retention.deletes:
        return judged(HoldAction.ENOUGH, "compacted (cleanup.policy=compact): not deleted by age")
    if not unread:
        return judged(HoldAction.ENOUGH, "nothing unread")
    unknown = sorted((tp, ts) for tp, (_, ts) in unread.items() if isinstance(ts, str))
    if unknown:
        tp, why = unknown[0]
        return judged(HoldAction.REFUSED, f"{tp}: the oldest unread record's time is not known ({why})")
    oldest = min(int(ts) for _, ts in unread.values())
    keep = format_duration_ms(limits.keep_ms)
    reasons: list[str] = []
    new_ms = None
    if retention.retention_ms >= 0:
        needed = now_ms + limits.keep_ms - oldest
        if needed > retention.retention_ms:
            new_ms = math.ceil(needed / _MINUTE) * _MINUTE + HOLD_MARK
            reasons.append(f"the oldest unread record is {format_duration_ms(now_ms - oldest)} old")
    new_bytes = None
    if retention.retention_bytes >= 0:
        if retention.remote_storage:  # the sizes known are the local segments' only
            return judged(
                HoldAction.REFUSED,
                f"retention.bytes={retention.retention_bytes} on a topic with tiered storage: its unread "
                "bytes cannot be estimated (Kafka reports the size of the local segments only)",
            )
        needed_bytes = 0
        for f in findings:
            if f.tp not in unread or f.available is None:
                continue
            rate, size = rates.get(f.tp, "not read"), sizes.get(f.tp)
            if isinstance(rate, str) or size is None:
                why = rate if isinstance(rate, str) else "size not reported"
                return judged(
                    HoldAction.REFUSED,
                    f"{f.tp}: retention.bytes={retention.retention_bytes}, and its unread bytes cannot be "
                    f"estimated ({why})",
                )
            unread_bytes = _unread_bytes(unread[f.tp][0], f.available, size)
            needed_bytes = max(needed_bytes, unread_bytes + int(rate * limits.keep_ms))
        if needed_bytes > retention.retention_bytes:
            new_bytes = math.ceil(needed_bytes / _MIB) * _MIB + HOLD_MARK
            reasons.append(f"~{format_bytes(needed_bytes)} unread or written within {keep}")
    if new_ms is None and new_bytes is None:
        shown = "no time limit" if runway is None else f"runway {format_duration_ms(runway)}"
        return judged(HoldAction.ENOUGH, f"{shown}: keeps unread records {keep} or more")
    if new_ms is not None and new_ms > limits.max_retention_ms:
        return judged(
            HoldAction.REFUSED,
            f"needs retention.ms={new_ms} ({format_duration_ms(new_ms)}), above the cap "
            f"`max_retention_s` ({format_duration_ms(limits.max_retention_ms)})",
            new_ms,
            new_bytes,
        )
    return judged(
        HoldAction.RAISE, f"keep unread records {keep} more ({'; '.join(reasons)})", new_ms, new_bytes
    )


def _with_extra(
    hold: TopicHold,
    dirs: Sequence[LogDir] | str,
    rates: Mapping[TopicPartition, float | str],
    limits: HoldLimits,
) -> tuple[TopicHold, dict[tuple[int, str], int]]:
    """``hold`` with the extra bytes its replicas will take (per broker), and the same per log
    directory. By time: what the partition writes during the added retention; by size: what it
    writes during ``keep``; either way no more than its (raised) size limit allows."""
    if hold.action is not HoldAction.RAISE or isinstance(dirs, str):
        return hold, {}
    extra: dict[tuple[int, str], int] = {}
    for d in dirs:
        for tp, size in d.sizes.items():
            if tp.topic != hold.topic:
                continue
            rate = rates.get(tp, "not in the checkpoint's partitions")
            if isinstance(rate, str):
                return _refused(hold, f"{tp}: the extra disk cannot be estimated ({rate})"), {}
            if hold.new_retention_ms is not None and hold.retention_ms is not None:
                grow = rate * (hold.new_retention_ms - hold.retention_ms)
            else:
                grow = rate * limits.keep_ms
            limit = hold.new_retention_bytes if hold.new_retention_bytes is not None else hold.retention_bytes
            if limit is not None and limit >= 0:
                grow = min(grow, max(0, limit - size))
            extra[(d.broker, d.path)] = extra.get((d.broker, d.path), 0) + int(grow)
    per_broker: dict[int, int] = {}
    for (broker, _), n in extra.items():
        per_broker[broker] = per_broker.get(broker, 0) + n
    return replace(hold, extra_bytes=per_broker), extra


def _within_disk(
    hold: TopicHold,
    extra: Mapping[tuple[int, str], int],
    dirs: Sequence[LogDir] | str,
    limits: HoldLimits,
    used: dict[tuple[int, str], int],
) -> TopicHold:
    """``hold`` (``extra``: its bytes per log directory) as judged with the disk the topics judged
    before it already take (``used``, updated when this one is accepted)."""
    if hold.action is not HoldAction.RAISE:
        return hold
    if isinstance(dirs, str):
        return _refused(hold, f"the brokers' log directories could not be read ({dirs})")
    if limits.max_extra_bytes is not None:
        for broker, n in sorted(hold.extra_bytes.items()):
            before = sum(v for (b, _), v in used.items() if b == broker)
            if before + n > limits.max_extra_bytes:
                return _refused(
                    hold,
                    f"would hold ~{format_bytes(before + n)} more on broker {broker}, above "
                    f"`max_extra_bytes` ({format_bytes(limits.max_extra_bytes)})",
                )
    for d in dirs:
        key = (d.broker, d.path)
        n = extra.get(key, 0)
        if not n or d.usable_bytes is None or d.total_bytes is None:
            continue
        left = d.usable_bytes - used.get(key, 0) - n
        floor = int(d.total_bytes * limits.min_free_ratio)
        if left < floor:
            return _refused(
                hold,
                f"would leave broker {d.broker}'s {d.path} with ~{format_bytes(max(0, left))} free of "
                f"{format_bytes(d.total_bytes)}, under the floor `min_free_ratio` "
                f"({limits.min_free_ratio:g})",
            )
    for key, n in extra.items():
        used[key] = used.get(key, 0) + n
    return hold


def _refused(hold: TopicHold, why: str) -> TopicHold:
    return replace(hold, action=HoldAction.REFUSED, reason=why, protect_until={})


def set_by_a_hold(name: str, value: str | None) -> bool:
    """Whether ``value`` of ``name`` carries a hold's mark (:data:`HOLD_MARK`)."""
    unit = _UNIT.get(name)
    try:
        return unit is not None and value is not None and int(value) % unit == HOLD_MARK
    except ValueError:
        return False


def _unread_bytes(start: int, log: OffsetRange, size: int) -> int:
    """The bytes from ``start`` to the log end, at the partition's average record size."""
    records = log.end - log.start
    return 0 if records <= 0 else size * (log.end - max(start, log.start)) // records


def _tps(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps, key=lambda t: (t.topic, t.partition)))


# -- the record of a hold, and its release --------------------------------------------------------


@dataclass(frozen=True)
class HeldValue:
    """One value a hold set: what the topic had before (``original`` None: no value of its own, it
    inherited the broker's), what the hold set (``held``), and what earlier holds from the same
    checkpoint set before it (``earlier``: a later hold that was killed before its change, or whose
    change timed out, leaves one of those in place, still ours)."""

    original: str | None
    held: str
    earlier: tuple[str, ...] = ()

    def ours(self, value: str | None) -> bool:
        return value is not None and (value == self.held or value in self.earlier)


@dataclass(frozen=True)
class TopicHoldRecord:
    """What a hold of one topic changed, when, by whom and why, and the offsets it protects (each
    partition's log end when it was placed)."""

    topic: str
    values: Mapping[str, HeldValue]
    protect_until: Mapping[int, int]
    held_at_ms: int
    by: str
    why: str


class ReleaseAction(StrEnum):
    RESTORE = "RESTORE"  # put the original values back (with execute: done, unless ``error``)
    KEEP = "KEEP"  # the query has not read past the protected records yet
    RESTORED = "RESTORED"  # the values are already the original ones: only the record goes
    CHANGED = "CHANGED"  # someone changed a held value since: theirs, left as it is
    UNKNOWN = "UNKNOWN"  # the topic's values could not be read: nothing done


@dataclass(frozen=True)
class TopicRelease:
    topic: str
    action: ReleaseAction
    reason: str
    changes: Mapping[str, str | None] = field(default_factory=dict)  # name -> value (None: delete)
    error: str | None = None


@dataclass(frozen=True)
class ReleasePlan:
    location: str
    topics: tuple[TopicRelease, ...]
    executed: bool = False

    @property
    def exit_code(self) -> ExitCode:
        """0: nothing held, or every hold ended; 1: a dry run with changes pending, a hold kept
        (the query has not caught up), or a value that could not be read or put back."""
        pending = any(t.action is ReleaseAction.RESTORE for t in self.topics) and not self.executed
        stuck = any(t.action in (ReleaseAction.KEEP, ReleaseAction.UNKNOWN) or t.error for t in self.topics)
        return ExitCode.ACTION_NEEDED if pending or stuck else ExitCode.OK


def decide_release(
    location: str,
    records: Iterable[TopicHoldRecord],
    current: Mapping[str, Mapping[str, tuple[str | None, bool]] | str],
    positions: Mapping[TopicPartition, int],
    *,
    now: bool = False,
) -> ReleasePlan:
    """What to put back for each held topic. ``current``: each topic's values now (value, whether
    the topic's own) or why not read; ``positions``: where the query resumes; ``now``: release even
    if the query has not read past the protected records (the operator accepts the runway)."""
    out = []
    for record in sorted(records, key=lambda r: r.topic):
        values = current.get(record.topic, "not read")
        if isinstance(values, str):
            out.append(TopicRelease(record.topic, ReleaseAction.UNKNOWN, f"values not read: {values}"))
            continue
        # A partition with no position is no longer read (gone): nothing there to protect.
        behind = {
            p: end
            for p, end in record.protect_until.items()
            if positions.get(TopicPartition(record.topic, p), end) < end
        }
        if behind and not now:
            p, end = min(behind.items())
            where = f"is at {positions[TopicPartition(record.topic, p)]}"
            out.append(
                TopicRelease(
                    record.topic,
                    ReleaseAction.KEEP,
                    f"the query has not read past the records the hold protects: partition {p} {where}, "
                    f"below {end} ({len(behind)} of {len(record.protect_until)} partitions behind; "
                    "a query moved to a new checkpoint never will: `now=True`)",
                )
            )
            continue
        missing = sorted(set(record.values) - set(values))
        if missing:
            out.append(
                TopicRelease(record.topic, ReleaseAction.UNKNOWN, f"{', '.join(missing)} not answered")
            )
            continue
        further = [
            f"{name}={value}"
            for name, held in sorted(record.values.items())
            if not held.ours(value := values[name][0]) and values[name][1] and set_by_a_hold(name, value)
        ]
        if further:  # put back after that hold, whatever ``now``: it protects another query's records
            out.append(
                TopicRelease(
                    record.topic,
                    ReleaseAction.KEEP,
                    f"raised further by another retention hold since ({', '.join(further)}): "
                    "this one goes back once that one is released",
                )
            )
            continue
        changes: dict[str, str | None] = {}
        changed = []
        for name, held in sorted(record.values.items()):
            value, own = values[name]
            mine = own and held.ours(value)
            if mine:
                changes[name] = held.original
            elif (value if own else None) != held.original:
                changed.append(f"{name}={value if own else '(default)'}, the hold set {held.held}")
        if changed and not changes:
            out.append(
                TopicRelease(
                    record.topic,
                    ReleaseAction.CHANGED,
                    f"changed since the hold ({'; '.join(changed)}): left as it is",
                )
            )
        elif changes:
            shown = ", ".join(f"{n}={'(default)' if v is None else v}" for n, v in changes.items())
            extra = f"; left as changed since: {'; '.join(changed)}" if changed else ""
            out.append(TopicRelease(record.topic, ReleaseAction.RESTORE, f"put back {shown}{extra}", changes))
        else:
            out.append(TopicRelease(record.topic, ReleaseAction.RESTORED, "already the original values"))
    return ReleasePlan(location, tuple(out))
