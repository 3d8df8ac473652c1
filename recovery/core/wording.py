"""How the library words its values in one line (pure): shared by its own log lines and messages
(the pre-start gate's) and by the CLI's report layer (:mod:`recovery.cli.report`), which builds its
tables and text on these."""

from __future__ import annotations

from collections.abc import Iterable

from recovery.core.model import Finding, Move
from recovery.core.real_time import NOT_PREDICTED
from recovery.core.spark_lines import DEFAULT_LINE, says


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


def describe_finding(f: Finding, line: str = DEFAULT_LINE) -> str:
    """``orders [0] BELOW_LOG_START: checkpoint 100, log [250, 900): 150 records lost; on restart
    Spark fails with KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE``."""
    where = f"checkpoint {f.position if f.position is not None else '-'}"
    if f.available is not None:
        where += f", log [{f.available.start}, {f.available.end})"
    lost = f"{record_count(f.records_lost, f.upper_bound)} records lost; " if f.records_lost else ""
    outcome = spark_outcome(f, line=line)
    return f"{f.tp} {f.verdict.value}: {where}: {lost}on restart {outcome}. {f.detail}".rstrip(". ") + "."


def spark_outcome(f: Finding, *, short: bool = False, line: str = DEFAULT_LINE) -> str:
    """What Spark does on restart: fails (in Spark ``line``'s words: an error condition from 4.0 on,
    an exception and its message's start on 3.5), silently skips records, or runs; in Real-Time Mode
    perhaps not predicted (:mod:`recovery.core.real_time`)."""
    if f.spark_error == NOT_PREDICTED:
        return "not predicted (Real-Time Mode)" if short else "Spark's outcome not predicted (Real-Time Mode)"
    if f.spark_error:
        said = says(f, line)
        return str(said) if short else f"Spark fails with {said}"
    if f.silently_skipped:
        n = record_count(f.silently_skipped, f.upper_bound)
        return f"runs, silently skips {n}" if short else f"Spark silently skips {n} records"
    return "runs" if short else "Spark runs"


def findings_text(findings: Iterable[Finding], line: str = DEFAULT_LINE) -> str:
    lines = [describe_finding(f, line) for f in findings if f.needs_action]
    return "\n".join(lines) if lines else "all partitions OK"
