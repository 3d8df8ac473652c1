"""Values -> text for people: one line per partition that needs attention, Kafka's words."""

from __future__ import annotations

from collections.abc import Iterable

from recovery.model import Finding, Move


def describe_finding(f: Finding) -> str:
    """``orders [0] BELOW_LOG_START: checkpoint 100, log [250, 900): 150 records lost; on restart
    Spark fails with KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE``."""
    where = f"checkpoint {f.position if f.position is not None else '-'}"
    if f.available is not None:
        where += f", log [{f.available.start}, {f.available.end})"
    lost = f"{f.records_lost} records lost; " if f.records_lost else ""
    return (
        f"{f.tp} {f.verdict.value}: {where}: {lost}on restart {spark_outcome(f)}. {f.detail}".rstrip(". ")
        + "."
    )


def spark_outcome(f: Finding, *, short: bool = False) -> str:
    """What Spark does on restart: fails with an error condition, silently skips records, or runs."""
    if f.spark_error:
        return f.spark_error if short else f"Spark fails with {f.spark_error}"
    if f.silently_skipped:
        return (
            f"runs, silently skips {f.silently_skipped}"
            if short
            else (f"Spark silently skips {f.silently_skipped} records")
        )
    return "runs" if short else "Spark runs"


def describe_move(m: Move) -> str:
    old = "-" if m.old is None else str(m.old)
    new = "dropped" if m.new is None else str(m.new)
    return f"{m.tp} {old} -> {new} (lost {m.lost}, skipped {m.skipped}, replayed {m.replayed})"


def findings_text(findings: Iterable[Finding]) -> str:
    lines = [describe_finding(f) for f in findings if f.needs_action]
    return "\n".join(lines) if lines else "all partitions OK"
