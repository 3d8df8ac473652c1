"""Values -> text for people: one line per partition that needs attention, Kafka's words."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from recovery.core.model import Finding, JsonObject, Move, Plan, Runway, Verdict
from recovery.core.results import RepairResult, StartingOffsets, ValidationReport
from recovery.core.runway import format_duration_ms, shortest
from recovery.core.spark_lines import DEFAULT_LINE, says
from recovery.core.wording import record_count, spark_outcome

_RECORD_AT = re.compile(r"^record at \d+")

# Tables longer than this show the rows that need action first, up to this many, and one summary
# line per verdict for the rest (JSON and CSV always hold every row).
PAGE_ROWS = 50


# -- rows and lines for validate, repair and starting-offsets ------------------------------------
# JSON keys of a finding row (one per partition of each Kafka source, sorted by source, topic,
# partition): source, topic, partition, verdict, checkpoint_offset (where Spark resumes), batch_end
# (stored end of a re-run batch), log_start_offset, log_end_offset (high watermark, or last stable
# offset under read_committed), records_lost, records_lost_upper_bound (true under read_committed:
# lost and skipped are counted in offsets, aborted records and markers included), spark_error (error
# condition on restart with failOnDataLoss=true, Spark 4's name on every line; in Real-Time Mode
# OffsetOutOfRangeException or REAL_TIME_MODE.NOT_PREDICTED; null: it runs), spark_says (what the
# query's Spark prints for it: the condition from 4.0 on, the exception and its message's start on
# 3.5, the spark_error itself in Real-Time Mode; null: it runs), silently_skipped (records skipped
# with failOnDataLoss=false), detail, notes (what the outcome depends on; what cannot be told);
# validate's rows add the retention runway (null when not looked up or not known): runway_s (seconds until
# retention may delete records the query has not read, at the time of the check; negative: it may
# now), runway_earliest_delete_ms (the record at the position's timestamp + retention.ms),
# oldest_unread_ms (that record's timestamp), oldest_unread_age_s (the lag in time), runway_reason
# ("retention.ms=...", "compacted ...", "infinite retention ...", "nothing unread", why unknown).
# Tables add on_restart (spark_says, or "runs[, silently skips N]"), runway (time left, or
# "compacted", "infinite", "-" when nothing is unread) and oldest_unread (the age), and print LOST as
# "at most N" when it is an upper bound.

VALIDATE_COLUMNS = (
    ("source", "SOURCE"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("verdict", "VERDICT"),
    ("checkpoint_offset", "CHECKPOINT"),
    ("log_start_offset", "LOG-START"),
    ("log_end_offset", "LOG-END"),
    ("records_lost", "LOST"),
    ("on_restart", "SPARK-ON-RESTART"),
)
# ``validate``'s table: the columns above (shared with the ledger's) and the retention runway.
VALIDATE_RUNWAY_COLUMNS = (*VALIDATE_COLUMNS, ("runway", "RUNWAY"), ("oldest_unread", "OLDEST-UNREAD"))
MOVE_COLUMNS = (
    ("source", "SOURCE"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("verdict", "VERDICT"),
    ("old", "FROM"),
    ("new", "TO"),
    ("lost", "LOST"),
    ("skipped", "SKIPPED"),
    ("replayed", "REPLAYED"),
)
STARTING_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("offset", "OFFSET"),
    ("origin", "FROM"),
    ("note", "NOTE"),
)


def finding_rows(
    findings: Iterable[Finding],
    *,
    table: bool = False,
    runway: bool = False,
    now_ms: int | None = None,
    line: str = DEFAULT_LINE,
) -> list[JsonObject]:
    """One row per finding; with ``runway`` (validate's rows), the runway keys too, judged at
    ``now_ms`` (``ValidationReport.runway_at_ms``). ``line``: the Spark whose words ``spark_says``
    and the table's SPARK-ON-RESTART give."""
    rows = []
    for f in findings:
        row: JsonObject = {
            "source": f.source_id,
            "topic": f.tp.topic,
            "partition": f.tp.partition,
            "verdict": f.verdict.value,
            "checkpoint_offset": f.position,
            "batch_end": f.batch_end,
            "log_start_offset": f.available.start if f.available else None,
            "log_end_offset": f.available.end if f.available else None,
            "records_lost": f.records_lost,
            "records_lost_upper_bound": f.upper_bound,
            "spark_error": f.spark_error,
            "spark_says": says(f, line),
            "silently_skipped": f.silently_skipped,
            "detail": f.detail,
            "notes": list(f.notes),
        }
        if runway:
            row |= runway_fields(f.runway, now_ms)
        if table:
            row["on_restart"] = spark_outcome(f, short=True, line=line)
            row["records_lost"] = record_count(f.records_lost, f.upper_bound)
        if table and runway:
            row["runway"] = runway_cell(f.runway, now_ms)
            age = row["oldest_unread_age_s"]
            row["oldest_unread"] = None if age is None else format_duration_ms(int(age * 1000))
        rows.append(row)
    return rows


def runway_fields(runway: Runway | None, now_ms: int | None) -> JsonObject:
    """The runway keys of a JSON row (module comment above)."""
    left = runway.left_ms(now_ms) if runway and now_ms is not None else None
    age = runway.age_ms(now_ms) if runway and now_ms is not None else None
    return {
        "runway_s": None if left is None else left / 1000,
        "runway_earliest_delete_ms": runway.earliest_delete_ms if runway else None,
        "oldest_unread_ms": runway.oldest_unread_ms if runway else None,
        "oldest_unread_age_s": None if age is None else age / 1000,
        "runway_reason": runway.reason if runway else None,
    }


def runway_cell(runway: Runway | None, now_ms: int | None) -> str | None:
    """``5h12m``, ``due`` (deletable now), ``compacted``, ``infinite``, ``-`` (nothing unread),
    ``unknown``; None when not looked up."""
    if runway is None or now_ms is None:
        return None
    left = runway.left_ms(now_ms)
    if left is not None:
        return format_duration_ms(left) if left > 0 else "due"
    for word in ("compacted", "infinite", "nothing unread"):
        if runway.reason.startswith(word):
            return "-" if word == "nothing unread" else word
    return "unknown"


# -- long tables: what needs action first, the rest summed up per verdict ------------------------


def paged(
    rows: list[JsonObject], urgent: list[bool], *, page: int = PAGE_ROWS, noun: str = "partitions"
) -> tuple[list[JsonObject], list[str]]:
    """Up to ``page`` rows for a table, those flagged ``urgent`` first (in their order), and the
    ``%`` lines for the rest: one per verdict, then where to see them all. ``rows`` of ``page`` or
    fewer come back as they are."""
    if len(rows) <= page:
        return rows, []
    order = [i for i, u in enumerate(urgent) if u] + [i for i, u in enumerate(urgent) if not u]
    shown, rest = order[:page], order[page:]
    counts: dict[str, int] = {}
    for i in rest:
        verdict = str(rows[i].get("verdict"))
        counts[verdict] = counts.get(verdict, 0) + 1
    lines = [f"{n} more {noun} {verdict} (not shown)" for verdict, n in sorted(counts.items(), key=_urgency)]
    lines.append(f"{len(rest)} of {len(rows)} {noun} not shown: --output json shows all")
    return [rows[i] for i in sorted(shown, key=lambda i: (not urgent[i], i))], lines


def _urgency(item: tuple[str, int]) -> tuple[bool, str]:
    return (item[0] == Verdict.OK.value, item[0])


def validate_table(report: ValidationReport, *, page: int = PAGE_ROWS) -> tuple[list[JsonObject], list[str]]:
    """``validate``'s table rows (needing action first past a page) and the summary ``%`` lines."""
    rows = finding_rows(
        report.findings, table=True, runway=True, now_ms=report.runway_at_ms, line=report.spark_line
    )
    return paged(rows, [f.needs_action for f in report.findings], page=page)


def repair_table(result: RepairResult, *, page: int = PAGE_ROWS) -> tuple[list[JsonObject], list[str]]:
    """``repair``'s move rows (past a page: those that lose or skip records first) and summary lines."""
    moves = result.plan.moves
    return paged(
        move_rows(moves),
        [bool(m.lost or m.skipped or m.lost_unknown) for m in moves],
        page=page,
        noun="moves",
    )


def move_rows(moves: Iterable[Move]) -> list[JsonObject]:
    return [
        {
            "source": m.source_id,
            "topic": m.tp.topic,
            "partition": m.tp.partition,
            "verdict": m.verdict.value,
            "old": m.old,
            "new": m.new,
            "lost": m.lost,
            "skipped": m.skipped,
            "replayed": m.replayed,
            "lost_unknown": m.lost_unknown,
            "upper_bound": m.upper_bound,
            "reason": m.reason,
        }
        for m in moves
    ]


def context_line(what: ValidationReport | Plan) -> str:
    """``checkpoint /chk (query …): Spark re-runs uncommitted batch 1 next``."""
    run = "re-runs uncommitted batch" if what.rerun else "starts batch"
    mode = " in Real-Time Mode" if isinstance(what, ValidationReport) and what.real_time else ""
    return f"checkpoint {what.checkpoint} (query {what.query_id}): Spark {run} {what.batch_id} next{mode}"


def report_body(report: ValidationReport) -> JsonObject:
    """``validate --output json``."""
    return {
        "checkpoint": report.checkpoint,
        "query_id": report.query_id,
        "batch_id": report.batch_id,
        "rerun": report.rerun,
        "isolation": report.isolation.value,
        "spark_version": report.spark_line,
        "real_time": report.real_time,
        "needs_action": report.needs_action,
        "sink_warning": report.sink_warning,
        "issues": [{"level": i.level.value, "message": i.message} for i in report.issues],
        "delta_at_risk": list(report.delta_at_risk),
        "runway_warn_s": report.runway_warn_s,
        "runway_checked_at_ms": report.runway_at_ms,
        "partitions": finding_rows(
            report.findings, runway=True, now_ms=report.runway_at_ms, line=report.spark_line
        ),
    }


def report_notes(report: ValidationReport, *, page: int = PAGE_ROWS) -> list[str]:
    """The ``%`` lines after ``validate``'s table (at most ``page`` partition details)."""
    lines = [f"{issue.level.value}: {issue.message}" for issue in report.issues]
    acting = [f"{f.tp}: {f.detail}" for f in report.findings if f.needs_action]
    lines += acting[:page]
    if len(acting) > page:
        lines.append(f"and {len(acting) - page} more partitions need action: --output json shows all")
    notes = _unique_notes(report.findings)
    lines += notes
    if report.sink_warning:
        lines.append(f"warning: {report.sink_warning}")
    lines += runway_lines(report)
    if report.needs_repair:
        lines.append("action needed: see `stream-recovery repair`")
    elif report.needs_action:
        before = (
            ["retention deletes what it has not read"] if report.at_risk or not report.delta_at_risk else []
        )
        if report.delta_at_risk:
            before.append("the Delta table's cleanup removes what it still needs")
        lines.append(f"action needed: start the query before {' and '.join(before)}")
    elif any("topic ids never recorded" in n for n in notes):
        lines.append("healthy as far as can be told (see the notes above)")
    else:
        lines.append("healthy")
    return lines


def runway_lines(report: ValidationReport) -> list[str]:
    """The shortest runway (when no partition is AT_RISK already: those have their own lines), and
    why a runway is not known where Kafka refused what it needs (an ACL, a setting)."""
    if report.runway_at_ms is None:
        return []
    lines = _unknown_runways(report.findings)
    found = None if report.at_risk else shortest(report.findings, report.runway_at_ms)
    if found is None:
        return lines
    f, left = found
    when = f"in {format_duration_ms(left)}" if left > 0 else "at the next retention check"
    threshold = (
        f" (--runway-warn {format_duration_ms(int(report.runway_warn_s * 1000))})"
        if report.runway_warn_s
        else " (no --runway-warn threshold)"
    )
    assert f.runway is not None
    return [
        *lines,
        f"shortest runway: {f.tp}: retention may delete unread records {when}{threshold}; {f.runway.reason}",
    ]


def _unknown_runways(findings: Iterable[Finding], shown: int = 10) -> list[str]:
    """``runway unknown for P, Q: <why>`` where Kafka did not give what a runway needs (the topic's
    settings, refused or not answered; a record it would not let us read): the table only says
    ``unknown``, and an ACL missing is worth a line."""
    by_reason: dict[str, list[str]] = {}
    for f in findings:
        runway = f.runway
        if runway is None or runway.earliest_delete_ms is not None:
            continue
        if not runway.reason.startswith("retention settings not read") and "_FAILED" not in runway.reason:
            continue
        reason = _RECORD_AT.sub("the first unread record", runway.reason)
        by_reason.setdefault(reason, []).append(str(f.tp))
    return [f"runway unknown for {_some(tps, shown)}: {why}" for why, tps in by_reason.items()]


def _unique_notes(findings: Iterable[Finding], shown: int = 10) -> list[str]:
    """Each finding's notes once, prefixed with the partitions they are about (the first ``shown``)."""
    by_note: dict[str, list[str]] = {}
    for f in findings:
        for n in f.notes:
            by_note.setdefault(n, []).append(str(f.tp))
    return [f"{_some(tps, shown)}: {n}" for n, tps in by_note.items()]


def _some(names: list[str], shown: int) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def repair_body(result: RepairResult, line: str = DEFAULT_LINE) -> JsonObject:
    """``repair --output json``; ``line``: the Spark whose words ``spark_says`` gives."""
    plan = result.plan
    return {
        "checkpoint": plan.checkpoint,
        "query_id": plan.query_id,
        "batch_id": plan.batch_id,
        "rerun": plan.rerun,
        "strategy": plan.strategy,
        "isolation": plan.isolation.value,
        "spark_version": line,
        "partitions": finding_rows(plan.findings, line=line),
        "moves": move_rows(plan.moves),
        "changes": [
            {
                "file": str(c.file),
                "source": c.source_id,
                "topic": c.tp.topic,
                "partition": c.tp.partition,
                "old": c.old,
                "new": c.new,
            }
            for c in plan.changes
        ],
        "totals": {"lost": plan.lost, "skipped": plan.skipped, "replayed": plan.replayed}
        | ({"lost_unknown": True} if plan.lost_unknown else {})
        | ({"upper_bound": True} if plan.upper_bound else {}),
        "refused": plan.refused,
        "executed": result.executed,
        "backup_id": result.backup_id,
        "sink_warning": result.sink_warning,
    }


def repair_notes(result: RepairResult, *, page: int = PAGE_ROWS) -> list[str]:
    """The ``%`` lines after ``repair``'s table: each move's reason (at most ``page``), the totals,
    the outcome."""
    plan = result.plan
    lines = [f"{move.tp}: {move.reason}" for move in plan.moves[:page]]
    if len(plan.moves) > page:
        lines.append(f"and {len(plan.moves) - page} more moves: --output json shows all")
    if result.sink_warning:
        lines.append(f"warning: {result.sink_warning}")
    files = ", ".join(map(str, plan.files)) or "none"
    lines += _unique_notes(plan.findings)
    lost = record_count(plan.lost, plan.upper_bound) + (
        " (plus an unknown number: a recreated topic's unread records)" if plan.lost_unknown else ""
    )
    lines.append(
        f"strategy {plan.strategy}: {len(plan.moves)} partitions move, {lost} records lost, "
        f"{record_count(plan.skipped, plan.upper_bound)} skipped, {plan.replayed} replayed; files: {files}"
    )
    if plan.refused:
        return lines  # the refusal itself is the error line
    if not result.executed:
        lines.append(
            "dry run: nothing was written; add --execute to apply" if plan.changes else "nothing to change"
        )
    elif result.backup_id:
        lines.append(f"applied; originals backed up as {result.backup_id}")
    else:
        lines.append("nothing to change")
    return lines


def refusal_line(result: RepairResult) -> str | None:
    return f"repair refused: {result.plan.refused}. Nothing was written." if result.plan.refused else None


def starting_rows(result: StartingOffsets) -> list[JsonObject]:
    return [
        {
            "topic": r.tp.topic,
            "partition": r.tp.partition,
            "offset": r.offset,
            "origin": r.origin,
            "note": r.note,
            "lost": r.lost,
            "skipped": r.skipped,
        }
        for r in result.rows
    ]


def starting_body(result: StartingOffsets) -> JsonObject:
    """``starting-offsets --output json``."""
    return {
        "startingOffsets": json.loads(result.to_json()),
        "partitions": starting_rows(result),
        "caveats": list(result.caveats),
    }
