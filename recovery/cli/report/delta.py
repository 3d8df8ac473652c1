"""Values -> rows and ``%`` lines for ``delta-source validate|repair`` and ``ledger show|validate|repair``.

JSON keys (``--output json``; tested in tests/delta):

* ``delta-source validate|repair``: one object: ``checkpoint``, ``query_id``, ``batch_id``,
  ``strategy``, ``findings`` (``source_id``, ``table``, ``verdict``, ``needed_from``, ``resume_from``,
  ``earliest``, ``latest``, ``versions_lost``, ``lost_unknown`` (true: a re-created table, whose
  unread versions cannot be counted; ``versions_lost`` is then not the loss), ``files_missing``,
  ``spark_error``, ``detail``),
  ``moves`` (``source_id``, ``file``, ``old``, ``new``: offset objects as Delta spells them),
  ``losses`` (``source_id``, ``versions_lost``, ``versions_skipped``, ``files_skipped``,
  ``reads_snapshot``: the version whose snapshot the stream reads in full from its first file or
  null, ``rereads``, ``lost_unknown`` and ``lost_from``: the old table's version from which an
  unknown number of rows is lost, or null), ``refused``, ``sink_warning`` (message or null),
  ``restart_problem`` (why Spark cannot restart from the checkpoint at all, or null),
  ``executed`` and ``backup_id`` (null unless executed).
* ``ledger show``: a list of rows: ``topic``, ``partition``, ``offset``, ``batch_id``,
  ``committed_at``, ``written_by``, ``note``.
* ``ledger validate``: one object: ``table``, ``pipeline``, ``version``, ``batch_id`` (the next run),
  ``isolation``, ``needs_action``, ``pending_batch`` (``data_table``, ``batch_id``, ``end``: a
  batch the data table holds and the ledger does not, judged as written; null), ``partitions``:
  ``topic``, ``partition``, ``verdict``, ``ledger_offset``, ``batch_end``, ``log_start_offset``,
  ``log_end_offset``, ``records_lost``, ``spark_error``, ``spark_says`` (as Spark 4 says it),
  ``silently_skipped``, ``detail``.
* ``ledger repair``: one object: ``table``, ``pipeline``, ``from_version``, ``batch_id``,
  ``strategy``, ``isolation``, ``partitions`` (as for ``validate``, plus ``on_restart``), ``moves``
  (``topic``, ``partition``, ``verdict``, ``old``, ``new``, ``lost``, ``skipped``, ``replayed``,
  ``reason``), ``rows`` (the correction rows: ``topic``, ``partition``, ``start_offset``,
  ``end_offset``, ``note``), ``dropped`` (``topic``, ``partition``: gone, which no row can express),
  ``totals`` (``lost``, ``skipped``, ``replayed``), ``refused``, ``pending_batch`` (as for
  ``validate``), ``executed``, ``completed_version`` (of the commit that wrote the pending batch's
  rows, or null), ``version`` (of the correction commit, or null).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from recovery.checkpoint.format import DeltaSourceOffset, delta_offset_json
from recovery.cli.report.findings import MOVE_COLUMNS, VALIDATE_COLUMNS, finding_rows, move_rows
from recovery.core.model import Finding, JsonObject
from recovery.core.runway import format_duration_ms
from recovery.delta.ledger_model import LedgerPlan, LedgerRepair, LedgerState
from recovery.delta.model import DeltaFinding, DeltaSourceResult, DeltaVerdict, unknown_loss

# -- delta-source ----------------------------------------------------------------------------------

SOURCE_FINDING_COLUMNS = (
    ("source", "SOURCE"),
    ("verdict", "VERDICT"),
    ("offset", "OFFSET"),
    ("earliest", "EARLIEST"),
    ("latest", "LATEST"),
    ("versions_lost", "LOST-VERSIONS"),
    ("files_missing", "MISSING-FILES"),
    ("on_restart", "SPARK-ON-RESTART"),
    ("runway", "RUNWAY"),
)
# Versions as text ("7 (snapshot) index 4"): left-aligned, so not the numeric old/new keys.
SOURCE_MOVE_COLUMNS = (("source", "SOURCE"), ("file", "FILE"), ("from", "FROM"), ("to", "TO"))


def _offset(value: DeltaSourceOffset) -> JsonObject:
    return json.loads(delta_offset_json(value))  # type: ignore[no-any-return]


def source_body(result: DeltaSourceResult) -> JsonObject:
    """``delta-source validate|repair --output json``."""
    plan = result.plan
    now_ms = result.runway_at_ms or 0
    return {
        "checkpoint": plan.checkpoint,
        "query_id": plan.query_id,
        "batch_id": plan.batch_id,
        "strategy": plan.strategy,
        "findings": [
            {
                "source_id": f.source_id,
                "table": f.table,
                "verdict": f.verdict.value,
                "needed_from": f.needed_from,
                "resume_from": f.resume_from,
                "earliest": f.earliest,
                "latest": f.latest,
                "versions_lost": f.versions_lost,
                "lost_unknown": f.lost_unknown,
                "files_missing": f.files_missing,
                "spark_error": f.spark_error,
                "detail": f.detail,
                **_runway_keys(f, now_ms),
            }
            for f in plan.findings
        ],
        "moves": [
            {"source_id": m.source_id, "file": str(m.file), "old": _offset(m.old), "new": _offset(m.new)}
            for m in plan.moves
        ],
        "losses": [
            {
                "source_id": loss.source_id,
                "versions_lost": loss.versions_lost,
                "versions_skipped": loss.versions_skipped,
                "files_skipped": loss.files_skipped,
                "reads_snapshot": loss.reads_snapshot,
                "rereads": loss.rereads,
                "lost_unknown": loss.lost_unknown,
                "lost_from": loss.lost_from,
            }
            for loss in plan.losses
        ],
        "refused": plan.refused,
        "sink_warning": result.sink_warning.message if result.sink_warning else None,
        "restart_problem": result.restart_problem,
        "executed": result.executed,
        "backup_id": result.backup_id,
    }


def source_finding_rows(result: DeltaSourceResult) -> list[JsonObject]:
    """``delta-source validate``'s table: one row per Delta source."""
    now_ms = result.runway_at_ms or 0
    return [
        {
            "source": f.source_id,
            "verdict": f.verdict.value,
            "offset": f.resume_from,
            "earliest": f.earliest,
            "latest": f.latest,
            "versions_lost": f"unknown (from {f.resume_from})" if f.lost_unknown else f.versions_lost,
            "files_missing": f.files_missing,
            "on_restart": f.spark_error
            or ("skips versions" if f.needs_action and f.verdict is not DeltaVerdict.AT_RISK else "runs"),
            "runway": _runway_cell(f, now_ms),
        }
        for f in result.plan.findings
    ]


def _runway_keys(f: DeltaFinding, now_ms: int) -> JsonObject:
    """``runway_s`` (null: no limit known), ``runway_reason``, ``oldest_unread_age_s``."""
    runway = f.runway
    left = runway.left_ms(now_ms) if runway else None
    age = runway.age_ms(now_ms) if runway else None
    return {
        "runway_s": None if left is None else left / 1000,
        "runway_reason": runway.reason if runway else None,
        "oldest_unread_age_s": None if age is None else age / 1000,
    }


def _runway_cell(f: DeltaFinding, now_ms: int) -> str:
    left = f.runway.left_ms(now_ms) if f.runway else None
    if left is None:
        return "-"
    return format_duration_ms(left) if left > 0 else "due"


def _version(offset: DeltaSourceOffset) -> str:
    text = str(offset.reservoir_version)
    if offset.is_starting_version:
        text += " (snapshot)"
    if offset.index != -1:
        text += f" index {offset.index}"
    return text


def source_move_rows(result: DeltaSourceResult) -> list[JsonObject]:
    """``delta-source repair``'s table: one row per rewritten Delta source line."""
    return [
        {"source": m.source_id, "file": str(m.file), "from": _version(m.old), "to": _version(m.new)}
        for m in result.plan.moves
    ]


def source_notes(result: DeltaSourceResult, *, repair: bool) -> list[str]:
    """The ``%`` lines after the table: each source's finding, what a repair costs, the sink and
    restart problems, and (``repair``) the outcome."""
    plan = result.plan
    lines = [f"source {f.source_id} ({f.table}): {f.detail}" for f in plan.findings if f.detail]
    if repair:
        unknown = "".join(
            f"source {loss.source_id}: {unknown_loss(loss.lost_from)} (the old log is gone); "
            for loss in plan.losses
            if loss.lost_unknown and loss.lost_from is not None
        )
        lines.append(
            f"{plan.strategy}: {unknown}{plan.versions_lost} versions lost (commits gone), "
            f"{plan.versions_skipped} versions skipped ({plan.files_skipped} data files)"
        )
        for loss in plan.losses:
            if loss.reads_snapshot is None:
                continue
            what = (
                "rows it delivered before are delivered again (nothing skipped)"
                if loss.rereads
                else "the new table is read in full"
            )
            lines.append(
                f"source {loss.source_id}: reads the snapshot of version {loss.reads_snapshot} from its "
                f"first file: {what}"
            )
    if result.sink_warning:
        lines.append(f"warning: {result.sink_warning.message}")
    if result.restart_problem:
        lines.append(result.restart_problem)
    if not repair or plan.refused:
        return lines  # a refusal is the error line
    if result.executed:
        files = ", ".join(str(f) for f in plan.files)
        lines.append(f"rewrote {files}; originals backed up as {result.backup_id}")
    elif plan.moves:
        lines.append("dry run: nothing was written; add --execute to apply")
    elif not result.restart_problem:  # the offsets are fine; a checkpoint that can't restart is not
        lines.append("nothing to change")
    return lines


def refusal_line(refused: str | None) -> str | None:
    """The error line of a plan the policy refuses (printed as ``Error: ...``)."""
    return f"repair refused: {refused}. Nothing was written." if refused else None


# -- ledger ------------------------------------------------------------------------------------------

SHOW_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("offset", "OFFSET"),
    ("batch_id", "BATCH"),
    ("committed_at", "COMMITTED-AT"),
    ("written_by", "WRITTEN-BY"),
)
# The repair command's columns, with the ledger in place of the checkpoint and no source column
# (a ledger is one source).
LEDGER_VALIDATE_COLUMNS = tuple(
    ("ledger_offset", "LEDGER") if key == "checkpoint_offset" else (key, header)
    for key, header in VALIDATE_COLUMNS
    if key != "source"
)
LEDGER_MOVE_COLUMNS = tuple(c for c in MOVE_COLUMNS if c[0] != "source")


def _ledger_row(row: JsonObject) -> JsonObject:
    """A checkpoint's finding or move row for a ledger: no ``source``, ``ledger_offset`` for
    ``checkpoint_offset``."""
    return {("ledger_offset" if k == "checkpoint_offset" else k): v for k, v in row.items() if k != "source"}


def ledger_finding_rows(findings: Iterable[Finding], *, table: bool = False) -> list[JsonObject]:
    return [_ledger_row(row) for row in finding_rows(findings, table=table)]


def ledger_context(state: LedgerState) -> str:
    """``ledger /t pipeline p at version 3: the next run is batch 2``."""
    pipeline = f" pipeline {state.pipeline}" if state.pipeline else ""
    at = f"at version {state.version}: the next run is batch {state.next_batch_id}"
    return f"ledger {state.table}{pipeline} {at}"


def show_rows(state: LedgerState) -> list[JsonObject]:
    """``ledger show``: the latest row of each partition."""
    return [
        {
            "topic": e.tp.topic,
            "partition": e.tp.partition,
            "offset": e.offset,
            "batch_id": e.batch_id,
            "committed_at": e.committed_at,
            "written_by": e.written_by,
            "note": e.note,
        }
        for e in state.entries
    ]


def validate_body(ledger: LedgerPlan) -> JsonObject:
    """``ledger validate --output json``."""
    state = ledger.state
    return {
        "table": state.table,
        "pipeline": state.pipeline,
        "version": state.version,
        "batch_id": state.next_batch_id,
        "isolation": ledger.isolation.value,
        "needs_action": ledger.needs_action,
        "pending_batch": _pending(ledger),
        "partitions": ledger_finding_rows(ledger.plan.findings),
    }


def _pending(ledger: LedgerPlan) -> JsonObject | None:
    pending = ledger.pending
    if pending is None:
        return None
    return {
        "data_table": pending.data_table,
        "batch_id": pending.batch_id,
        "end": [
            {"topic": tp.topic, "partition": tp.partition, "offset": o}
            for tp, o in sorted(pending.end.items())
        ],
    }


def _pending_line(ledger: LedgerPlan) -> list[str]:
    if ledger.pending is None:
        return []
    return [
        f"{ledger.pending.describe()}: judged from the end its data commit records, not as loss; the job's "
        "next run writes those rows first (so does `ledger repair --data-table ... --execute`)"
    ]


def validate_notes(ledger: LedgerPlan) -> list[str]:
    """The ``%`` lines after ``ledger validate``'s table."""
    lines = _pending_line(ledger)
    lines += [f"{f.tp}: {f.detail}" for f in ledger.plan.findings if f.needs_action]
    lines.append("action needed: see `stream-recovery ledger repair`" if ledger.needs_action else "healthy")
    return lines


def repair_body(result: LedgerRepair) -> JsonObject:
    """``ledger repair --output json``."""
    ledger, plan, state = result.ledger, result.ledger.plan, result.ledger.state
    return {
        "table": state.table,
        "pipeline": state.pipeline,
        "from_version": state.version,
        "batch_id": state.next_batch_id,
        "strategy": plan.strategy,
        "isolation": ledger.isolation.value,
        "partitions": ledger_finding_rows(plan.findings, table=True),
        "moves": [_ledger_row(row) for row in move_rows(plan.moves)],
        "rows": [
            {"topic": r.tp.topic, "partition": r.tp.partition}
            | {"start_offset": r.start_offset, "end_offset": r.end_offset, "note": r.note}
            for r in ledger.rows
        ],
        "dropped": [{"topic": m.tp.topic, "partition": m.tp.partition} for m in ledger.dropped],
        "totals": {"lost": plan.lost, "skipped": plan.skipped, "replayed": plan.replayed},
        "refused": plan.refused,
        "pending_batch": _pending(ledger),
        "executed": result.executed,
        "completed_version": result.completed,
        "version": result.version,
    }


def repair_move_rows(result: LedgerRepair) -> list[JsonObject]:
    return [_ledger_row(row) for row in move_rows(result.ledger.plan.moves)]


def repair_notes(result: LedgerRepair) -> list[str]:
    """The ``%`` lines after ``ledger repair``'s table: each move's reason, the totals, partitions
    no row can drop, and the outcome."""
    ledger, plan, state = result.ledger, result.ledger.plan, result.ledger.state
    lines = _pending_line(ledger) if result.completed is None else []
    if ledger.pending is not None and result.completed is not None:
        lines.append(
            f"batch {ledger.pending.batch_id}: ledger rows written from its data commit in "
            f"{ledger.pending.data_table} (version {result.completed})"
        )
    lines += [f"{move.tp}: {move.reason}" for move in plan.moves]
    lines.append(
        f"strategy {plan.strategy}: {len(plan.moves)} partitions move, {plan.lost} records lost, "
        f"{plan.skipped} skipped, {plan.replayed} replayed"
    )
    lines += [f"{m.tp}: no ledger row can drop a partition; stop the job reading it" for m in ledger.dropped]
    if plan.refused:
        return lines  # the refusal is the error line
    if result.version is not None:
        lines.append(
            f"appended {len(ledger.rows)} correction rows as batch {state.next_batch_id} in version "
            f"{result.version}; time travel to version {state.version} undoes it"
        )
    elif result.dry_run and (ledger.rows or ledger.pending):
        lines.append("dry run: nothing was written; add --execute to apply")
    elif result.completed is not None and not ledger.dropped:
        lines.append("no correction needed: ledger and data table agree")
    elif ledger.dropped:
        gone = ", ".join(str(m.tp) for m in ledger.dropped)
        lines.append(
            f"nothing was written: the only changes are partitions that are gone ({gone}), which a ledger "
            "row cannot express; stop the job reading them"
        )
    else:
        lines.append("nothing to change")
    return lines
