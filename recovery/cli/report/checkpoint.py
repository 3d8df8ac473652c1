"""Values -> rows and text for ``checkpoint show``, ``checkpoint backups`` and ``checkpoint restore``.

Pure: no IO. The JSON keys are documented (docs/checkpoint.md) and tested:

* ``show``: one object: ``checkpoint``, ``query_id``, ``offsets`` / ``commits`` (``batches``,
  ``latest``), ``batch``, ``batch_timestamp_ms``, ``batch_watermark_ms``, ``sources`` (``source_id``,
  ``kind``, ``offsets`` rows of ``topic``/``partition``/``offset`` or null, ``text``,
  ``initial_offsets`` rows or null), ``next_run`` (``action``, ``batch_id``, ``start``, ``end``),
  ``issues`` (``level``, ``message``), ``files`` (``path``, ``size``, ``crc``);
* ``backups``: a list of ``id``, ``created``, ``reason``, ``files``, ``absent``, ``location``;
* ``restore``: ``backup``, ``executed``, ``written``, ``removed``, ``unchanged``, ``safety_backup``.

The tables pick columns from rows with the same keys; the ``%`` lines (:func:`show_notes` ...) carry
the context. Beyond :data:`PAGE_ROWS` partitions the ``show`` table has one row per topic
(:func:`summary_rows`: ``partitions``, ``min_offset``, ``max_offset``, ``min_initial``,
``max_initial``) and a ``%`` line saying so; ``--all`` and ``--output json`` give every partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from recovery.core.model import JsonObject

if TYPE_CHECKING:  # the values only; importing recovery.checkpoint would pull in fsspec
    from recovery.checkpoint.backup import BackupSet
    from recovery.checkpoint.inspect import BackupListing, CheckpointInfo, Offsets
    from recovery.checkpoint.intent import RecoverResult
    from recovery.checkpoint.rewrite import RestoreResult
    from recovery.core.model import CheckpointFile
    from recovery.core.restart import RestartState

# How Spark's docs (and our JSON) name "each source's initial offsets" (RestartState.start is None).
INITIAL_OFFSETS = "sources/<i>/0"

Columns = tuple[tuple[str, str], ...]

SOURCE_COLUMNS: Columns = (
    ("source_id", "SOURCE"),
    ("kind", "KIND"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("offset", "OFFSET"),
    ("initial_offset", "INITIAL"),
)
TEXT_COLUMN = ("text", "TEXT")  # only when a source is not Kafka: its offset as written
BACKUP_COLUMNS: Columns = (
    ("id", "ID"),
    ("created", "CREATED"),
    ("reason", "REASON"),
    ("paths", "FILES"),
    ("absent_paths", "ABSENT"),
)
RESTORE_COLUMNS: Columns = (("path", "PATH"), ("change", "CHANGE"))
# Beyond this many partitions the table shows one line per topic (``--all``: one per partition).
PAGE_ROWS = 50  # as validate's table (recovery.cli.report.findings.PAGE_ROWS)
SUMMARY_COLUMNS: Columns = (
    ("source_id", "SOURCE"),
    ("kind", "KIND"),
    ("topic", "TOPIC"),
    ("partitions", "PARTITIONS"),
    ("min_offset", "MIN_OFFSET"),
    ("max_offset", "MAX_OFFSET"),
    ("min_initial", "MIN_INITIAL"),
    ("max_initial", "MAX_INITIAL"),
)

_NEXT = {
    "next_batch": "batch {batch_id} starts from {start}; its end is read fresh from the source",
    "rerun_batch": "batch {batch_id} runs again over [{start}, {end})",
    "first_batch": "batch 0 runs from the initial offsets ({start})",
}


# -- show ------------------------------------------------------------------------------------------


def _offset_rows(offsets: Offsets | None) -> list[JsonObject] | None:
    if offsets is None:
        return None
    return [{"topic": tp.topic, "partition": tp.partition, "offset": offset} for tp, offset in offsets]


def _file(file: CheckpointFile | None, *, initial: bool) -> str | None:
    if file is None:
        return INITIAL_OFFSETS if initial else None
    return str(file)


def _next_run(state: RestartState) -> JsonObject:
    return {
        "action": state.next_run.value,
        "batch_id": state.batch_id,
        "start": _file(state.start, initial=True),
        "end": _file(state.end, initial=False),
    }


def show_body(info: CheckpointInfo) -> JsonObject:
    """The ``show --output json`` document."""
    offset_ids, commit_ids = info.offset_batch_ids, info.commit_batch_ids
    state = info.restart
    return {
        "checkpoint": info.checkpoint,
        "query_id": info.query_id,
        "offsets": {"batches": list(offset_ids), "latest": offset_ids[-1] if offset_ids else None},
        "commits": {"batches": list(commit_ids), "latest": commit_ids[-1] if commit_ids else None},
        "batch": info.batch,
        "batch_timestamp_ms": info.metadata.batch_timestamp_ms if info.metadata else None,
        "batch_watermark_ms": info.metadata.batch_watermark_ms if info.metadata else None,
        "sources": [
            {
                "source_id": s.source_id,
                "kind": s.kind.value if s.kind else None,
                "offsets": _offset_rows(s.offsets),
                "text": s.text,
                "initial_offsets": _offset_rows(s.initial_offsets),
            }
            for s in info.sources
        ],
        "next_run": _next_run(state),
        "issues": [{"level": i.level.value, "message": i.message} for i in state.issues],
        "files": [{"path": f.path, "size": f.size, "crc": f.crc.value} for f in info.files],
    }


def source_rows(info: CheckpointInfo) -> list[JsonObject]:
    """One row per partition of each Kafka source of the batch shown, one per other source."""
    rows: list[JsonObject] = []
    for source in info.sources:
        kind = source.kind.value if source.kind else None
        if source.offsets is None:
            text = "-" if source.text is None else source.text.strip()  # "-": no offset in this batch
            rows.append({"source_id": source.source_id, "kind": kind, "text": text})
            continue
        initial = dict(source.initial_offsets or ())
        rows.extend(
            {
                "source_id": source.source_id,
                "kind": kind,
                "topic": tp.topic,
                "partition": tp.partition,
                "offset": offset,
                "initial_offset": initial.get(tp),
            }
            for tp, offset in source.offsets
        )
    return rows


def partition_count(info: CheckpointInfo) -> int:
    """How many partition rows the full table has (all Kafka sources of the batch shown)."""
    return sum(len(source.offsets) for source in info.sources if source.offsets is not None)


def is_summarised(info: CheckpointInfo, *, show_all: bool) -> bool:
    """Whether the table shows one line per topic: more partitions than a page, and no ``--all``."""
    return not show_all and partition_count(info) > PAGE_ROWS


def _by_topic(offsets: Offsets | None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp, offset in offsets or ():
        out.setdefault(tp.topic, []).append(offset)
    return out


def summary_rows(info: CheckpointInfo) -> list[JsonObject]:
    """One row per topic of each Kafka source (partition count, lowest and highest offset and initial
    offset), one per other source: what a table of 100,000 partitions would bury."""
    rows: list[JsonObject] = []
    for source in info.sources:
        kind = source.kind.value if source.kind else None
        if source.offsets is None:
            text = "-" if source.text is None else source.text.strip()
            rows.append({"source_id": source.source_id, "kind": kind, "text": text})
            continue
        initial = _by_topic(source.initial_offsets)
        for topic, offsets in _by_topic(source.offsets).items():
            first = initial.get(topic)
            rows.append(
                {
                    "source_id": source.source_id,
                    "kind": kind,
                    "topic": topic,
                    "partitions": len(offsets),
                    "min_offset": min(offsets),
                    "max_offset": max(offsets),
                    "min_initial": min(first) if first else None,
                    "max_initial": max(first) if first else None,
                }
            )
    return rows


def summary_columns(info: CheckpointInfo) -> Columns:
    other = any(source.offsets is None for source in info.sources)
    return (*SUMMARY_COLUMNS, TEXT_COLUMN) if other else SUMMARY_COLUMNS


def summary_note(info: CheckpointInfo) -> str:
    """The ``%`` line under a summarised table: what it stands for and how to see every row."""
    topics = len({(s.source_id, tp.topic) for s in info.sources for tp, _ in s.offsets or ()})
    return (
        f"{partition_count(info)} partitions in {topics} topic{'' if topics == 1 else 's'}: one line "
        f"per topic (more than {PAGE_ROWS}); add --all for one line per partition, or --output json"
    )


def source_columns(info: CheckpointInfo) -> Columns:
    """The table's columns: the Kafka ones when some source is Kafka (or none is shown), TEXT when some
    source is not."""
    kafka = any(source.offsets is not None for source in info.sources)
    other = any(source.offsets is None for source in info.sources)
    columns = SOURCE_COLUMNS if kafka or not other else SOURCE_COLUMNS[:2]
    return (*columns, TEXT_COLUMN) if other else columns


def _span(log: str, ids: Sequence[int]) -> str:
    if not ids:
        return f"{log}/ empty"
    return f"{log}/ {ids[0]}..{ids[-1]} ({len(ids)} file{'' if len(ids) == 1 else 's'})"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def next_run_text(info: CheckpointInfo) -> str:
    """``batch 3 starts from offsets/2; its end is read fresh from the source``."""
    run = _next_run(info.restart)
    text = _NEXT[run["action"]].format(**run)
    if run["action"] == "first_batch" and run["end"]:
        text += f" to {run['end']}"
    return text


def show_notes(info: CheckpointInfo) -> list[str]:
    """The ``%`` lines of ``show``: which checkpoint and batch, the logs, the next run, each issue, and
    each file read with its ``.crc`` status."""
    lines = [
        f"checkpoint {info.checkpoint} (query {info.query_id})",
        f"{_span('offsets', info.offset_batch_ids)}; {_span('commits', info.commit_batch_ids)}",
    ]
    if info.batch is None:
        lines.append("no batch planned yet: no sources to show")
    else:
        when = f", batch timestamp {_iso(info.metadata.batch_timestamp_ms)}" if info.metadata else ""
        lines.append(f"sources of batch {info.batch} (offsets/{info.batch}{when})")
    lines.append(f"next run: {next_run_text(info)}")
    lines.extend(f"{issue.level.value}: {issue.message}" for issue in info.restart.issues)
    lines.extend(f"read {f.path}: {f.size} bytes, .crc {f.crc.value}" for f in info.files)
    if not info.can_restart:
        lines.append("action needed: Spark would refuse to restart from this checkpoint")
    return lines


# -- backups ---------------------------------------------------------------------------------------


def _backup_row(backup: BackupSet) -> JsonObject:
    return {
        "id": backup.id,
        "created": backup.created,
        "reason": backup.reason,
        "files": [f.path for f in backup.files],
        "absent": list(backup.absent),
        "location": backup.location,
    }


def backup_rows(listing: BackupListing) -> list[JsonObject]:
    """The ``backups --output json`` list, oldest first."""
    return [_backup_row(b) for b in listing.backups]


def backup_table_rows(rows: Sequence[JsonObject]) -> list[JsonObject]:
    """``rows`` with the file lists joined by spaces, for the table."""
    return [{**row, "paths": " ".join(row["files"]), "absent_paths": " ".join(row["absent"])} for row in rows]


def backup_notes(listing: BackupListing) -> list[str]:
    lines = [] if listing.backups else [f"no backups of {listing.checkpoint}"]
    lines.extend(
        f"warning: backup set {name} has no manifest (a command was killed while writing it): "
        "it is never used for a restore"
        for name in listing.incomplete
    )
    return lines


# -- restore ---------------------------------------------------------------------------------------


def restore_body(result: RestoreResult) -> JsonObject:
    """The ``restore --output json`` document."""
    return {
        "backup": result.backup.id,
        "executed": result.executed,
        "written": list(result.written),
        "removed": list(result.removed),
        "unchanged": list(result.unchanged),
        "safety_backup": result.safety_backup.id if result.safety_backup else None,
    }


def restore_rows(result: RestoreResult) -> list[JsonObject]:
    """One row per file of the backup set: ``restore`` (bytes put back), ``remove`` (it did not exist
    when the backup was taken) or ``unchanged``."""
    return [
        *({"path": rel, "change": "restore"} for rel in result.written),
        *({"path": rel, "change": "remove"} for rel in result.removed),
        *({"path": rel, "change": "unchanged"} for rel in result.unchanged),
    ]


def restore_notes(result: RestoreResult) -> list[str]:
    first = [f"warning: {result.recovered.message}; rolled back first"] if result.recovered else []
    return first + _restore_outcome(result)


def _restore_outcome(result: RestoreResult) -> list[str]:
    if result.safety_backup is not None:
        return [
            f"restored backup {result.backup.id}; the previous files were backed up as "
            f"{result.safety_backup.id}"
        ]
    if result.has_changes:
        return [f"dry run of backup {result.backup.id}: nothing was written; add --execute to restore"]
    return [f"nothing to restore: the files already match backup {result.backup.id}"]


# -- recover ---------------------------------------------------------------------------------------


def recover_notes(result: RecoverResult) -> list[str]:
    """The ``%`` lines of ``checkpoint recover``."""
    if result.interrupted is None:
        return [f"nothing to recover: no interrupted command left a record in {result.checkpoint}"]
    if result.executed:
        return [f"rolled back: {result.interrupted.message.split('; running any')[0]}"]
    return [f"{result.interrupted.message}", "dry run: nothing was written; add --execute to roll it back"]
