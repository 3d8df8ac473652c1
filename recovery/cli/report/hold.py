"""Values -> rows and ``%`` lines for ``retention hold`` and ``retention release`` (pure).

Rows are dicts whose keys are the documented JSON keys; the table shows durations for people
(``2d2h``) beside them.
"""

from __future__ import annotations

from recovery.core.hold import HoldAction, HoldPlan, ReleaseAction, ReleasePlan, TopicHold
from recovery.core.runway import format_bytes, format_duration_ms

Columns = tuple[tuple[str, str], ...]

HOLD_COLUMNS: Columns = (
    ("topic", "TOPIC"),
    ("action", "ACTION"),
    ("runway", "RUNWAY"),
    ("retention_ms_shown", "RETENTION.MS"),
    ("retention_bytes_shown", "RETENTION.BYTES"),
    ("extra_shown", "EXTRA-PER-BROKER"),
    ("reason", "REASON"),
)

RELEASE_COLUMNS: Columns = (("topic", "TOPIC"), ("action", "ACTION"), ("reason", "REASON"))


def hold_rows(plan: HoldPlan, fmt: str) -> list[dict[str, object]]:
    """One row per topic the checkpoint reads, by name."""
    rows: list[dict[str, object]] = []
    for t in plan.topics:
        row: dict[str, object] = {
            "topic": t.topic,
            "action": ("FAILED" if t.error else "RAISED")
            if plan.executed and t.action is HoldAction.RAISE
            else t.action.value,
            "runway_s": None if t.runway_ms is None else t.runway_ms / 1000,
            "runway_after_s": None if (after := _after(plan, t)) is None else after / 1000,
            "retention_ms": t.retention_ms,
            "new_retention_ms": t.new_retention_ms,
            "retention_bytes": t.retention_bytes,
            "new_retention_bytes": t.new_retention_bytes,
            "extra_bytes_per_broker": {str(b): n for b, n in sorted(t.extra_bytes.items())},
            "protect_until": {str(p): o for p, o in sorted(t.protect_until.items())},
            "reason": t.reason if not t.error else f"{t.reason}; {t.error}",
        }
        if fmt == "table":
            row.update(
                runway=_runway(t.runway_ms, _after(plan, t)),
                retention_ms_shown=_change(t.retention_ms, t.new_retention_ms, _ms),
                retention_bytes_shown=_change(t.retention_bytes, t.new_retention_bytes, _size),
                extra_shown=", ".join(f"{b}:{format_bytes(n)}" for b, n in sorted(t.extra_bytes.items()))
                or "-",
            )
        rows.append(row)
    return rows


def hold_notes(plan: HoldPlan) -> list[str]:
    notes = list(plan.notes)
    keep = format_duration_ms(plan.keep_ms)
    raising = plan.raising
    if not plan.topics:
        notes.append("the checkpoint reads no topic")
    elif plan.executed:
        done = [t.topic for t in raising if not t.error]
        if done:
            notes.append(
                f"held {', '.join(done)}: unread records are kept {keep} more; the original values are "
                f"recorded in {plan.location}/_recovery/retention-hold.json; put them back once the query "
                f"has caught up: `release_retention('{plan.location}', execute=True)`"
            )
    elif raising:
        notes.append(f"dry run: nothing changed; `execute=True` raises {', '.join(t.topic for t in raising)}")
    elif not any(t.action is HoldAction.REFUSED for t in plan.topics):
        notes.append(f"nothing to hold: every topic keeps its unread records {keep} or more")
    if any(t.action is HoldAction.REFUSED for t in plan.topics):
        notes.append("refused topics were not changed: see REASON")
    return notes + free_space_lines(plan)


def free_space_lines(plan: HoldPlan) -> list[str]:
    """Per broker that holds a raised topic's replicas: its log directories' free space (where
    the broker reports it) and what the raised topics add there."""
    extra: dict[int, int] = {}
    for t in plan.raising:
        for broker, n in t.extra_bytes.items():
            extra[broker] = extra.get(broker, 0) + n
    lines = []
    for broker in sorted(extra):
        dirs = [d for d in plan.free_space if d.broker == broker]
        known = [d for d in dirs if d.usable_bytes is not None and d.total_bytes is not None]
        if known:
            free = sum(d.usable_bytes or 0 for d in known)
            total = sum(d.total_bytes or 0 for d in known)
            disk = f"{format_bytes(free)} free of {format_bytes(total)}"
        else:
            disk = "free space not reported"
        lines.append(f"broker {broker}: {disk}; the hold adds ~{format_bytes(extra[broker])} (estimate)")
    return lines


def release_rows(plan: ReleasePlan) -> list[dict[str, object]]:
    done = {ReleaseAction.RESTORE: "RESTORED"}
    return [
        {
            "topic": t.topic,
            "action": ("FAILED" if t.error else done.get(t.action, t.action.value))
            if plan.executed
            else t.action.value,
            "changes": dict(t.changes),
            "reason": t.reason if not t.error else f"{t.reason}; {t.error}",
        }
        for t in plan.topics
    ]


def release_notes(plan: ReleasePlan) -> list[str]:
    if not plan.topics:
        return [f"no retention hold is recorded in {plan.location}: nothing to put back"]
    notes = []
    changed = [t.topic for t in plan.topics if t.action is ReleaseAction.CHANGED]
    if changed:
        fate = "dropped from the record" if plan.executed else "dropped from the record by `execute=True`"
        notes.append(
            f"{', '.join(changed)}: someone changed the held values since the hold: theirs now, left as "
            f"they are; the hold is {fate}"
        )
    if any(t.action is ReleaseAction.KEEP for t in plan.topics):
        notes.append(
            "a hold is kept until the query has read past the records it protects (start the query); "
            "`now=True` puts the values back anyway"
        )
    if not plan.executed and any(t.action is ReleaseAction.RESTORE for t in plan.topics):
        notes.append("dry run: nothing changed; `execute=True` puts the values back")
    return notes


def _after(plan: HoldPlan, t: TopicHold) -> int | None:
    """The runway by time once the raised retention.ms applies (None: not raised by time)."""
    if t.runway_ms is None or t.new_retention_ms is None or t.retention_ms is None or t.error:
        return None
    if t.action is not HoldAction.RAISE:
        return None
    return t.runway_ms + t.new_retention_ms - t.retention_ms


def _runway(before: int | None, after: int | None) -> str:
    """``3h58m -> 2d`` where a hold lengthens it."""
    if before is None:
        return "-"
    shown = format_duration_ms(before)
    return f"{shown} -> {format_duration_ms(after)}" if after is not None else shown


def _change(old: int | None, new: int | None, shown: object) -> str:
    fmt = shown if callable(shown) else str
    if old is None:
        return "-"
    return f"{fmt(old)} -> {fmt(new)}" if new is not None else fmt(old)


def _ms(ms: int) -> str:
    return "-1 (none)" if ms < 0 else f"{ms} ({format_duration_ms(ms)})"


def _size(n: int) -> str:
    return "-1 (none)" if n < 0 else f"{n} ({format_bytes(n)})"
