"""How the library words its values in one line (pure): shared by its own log lines and messages
and by the report layer (:mod:`recovery.report`), which builds its tables and text on these."""

from __future__ import annotations

from recovery.core.model import Move


def record_count(n: int, upper_bound: bool) -> str:
    """``n`` records; ``at most n`` when they were counted in offsets under read_committed, where
    aborted records and transaction markers take offsets too."""
    return f"at most {n}" if upper_bound and n else str(n)


def describe_move(m: Move) -> str:
    """``orders [0] 100 -> 250 (lost 150, skipped 0, replayed 0)``: one partition's new position."""
    old = "-" if m.old is None else str(m.old)
    new = "dropped" if m.new is None else str(m.new)
    lost = record_count(m.lost, m.upper_bound) + (" + unknown (recreated topic)" if m.lost_unknown else "")
    skipped = record_count(m.skipped, m.upper_bound)
    return f"{m.tp} {old} -> {new} (lost {lost}, skipped {skipped}, replayed {m.replayed})"
