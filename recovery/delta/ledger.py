"""Offset ledger tables: Kafka positions kept in a Delta table instead of a Spark checkpoint.

A scheduled batch job reads ``spark.read.format("kafka")`` from the ledger's latest offsets and
appends one row per partition per run; a foreachBatch job records each batch's offsets next to its
data. The toolkit's own ledger has these columns (conf can map a user's table onto them)::

    pipeline      string     which job (one table can hold several)
    batch_id      long       the run / batch that read the range; the highest is the latest
    topic         string
    partition     int
    start_offset  long       first offset read
    end_offset    long       next offset to read (exclusive end): where the next run starts
    committed_at  timestamp  UTC
    written_by    string     the job, or "stream-recovery" for a correction
    note          string

Repair never rewrites history: it appends correction rows (``start_offset`` = the old position,
``end_offset`` = the new one) under a new batch id, in one commit whose custom metadata names the
plan. Delta time travel is the audit trail and the rollback (``DeltaTable(t, version=v)``).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recovery.delta.log import _delta_errors, open_table
from recovery.errors import ConfigError, InvalidInput, PlanOutdated
from recovery.model import (
    CheckpointView,
    ClusterView,
    Move,
    OffsetRange,
    Plan,
    SourcePosition,
    TopicPartition,
)

OPTIONAL_COLUMNS = ("start_offset", "committed_at", "written_by", "note")
SOURCE_ID = "ledger"  # the one SourcePosition a ledger is seen as
WRITTEN_BY = "stream-recovery"
METADATA_KEY = "stream-recovery.plan"

# -- conf --------------------------------------------------------------------------------------------


class LedgerColumns(BaseModel):
    """Column names of a ledger table; ``None`` for optional columns the table does not have."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pipeline: str | None = "pipeline"
    batch_id: str = "batch_id"
    topic: str = "topic"
    partition: str = "partition"
    start_offset: str | None = "start_offset"
    end_offset: str = "end_offset"
    committed_at: str | None = "committed_at"
    written_by: str | None = "written_by"
    note: str | None = "note"


class LedgerConf(BaseModel):
    """Where a ledger is and how to read it (``conf/ledger.example.toml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str
    pipeline: str | None = None  # required when the table has a pipeline column
    columns: LedgerColumns = Field(default_factory=LedgerColumns)
    storage_options: dict[str, str] = Field(default_factory=dict)
    # The Delta table the pipeline appends to with txnAppId = pipeline (jobs/ledger_ingest.py): a
    # repair refuses while it records a batch the ledger does not (a run died between its appends).
    data_table: str | None = None


def load_conf(
    path: str | Path, *, table: str | None = None, pipeline: str | None = None, data_table: str | None = None
) -> LedgerConf:
    """Read the ``[ledger]`` table of a TOML file; ``table``/``pipeline``/``data_table`` override it."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML ({exc})") from None
    section = dict(data.get("ledger", {}))
    if table is not None:
        section["table"] = table
    if pipeline is not None:
        section["pipeline"] = pipeline
    if data_table is not None:
        section["data_table"] = data_table
    return make_conf(section, source=str(path))


def make_conf(
    values: Mapping[str, Any], *, source: str = "ledger conf", pipeline_required: bool = True
) -> LedgerConf:
    """A validated conf. ``columns.pipeline`` set to ``""`` (or None) means the table has no pipeline
    column. With ``pipeline_required=False`` a missing pipeline is checked against the table itself
    when it is read (``read_ledger`` refuses a table whose pipeline column holds pipelines)."""
    try:
        conf = LedgerConf.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{source}: {problems}") from None
    if pipeline_required and conf.columns.pipeline and conf.pipeline is None:
        raise ConfigError(
            f"{source}: the ledger has a pipeline column ({conf.columns.pipeline!r}); name the pipeline "
            '(--pipeline), or set columns.pipeline to "" if the table holds one pipeline'
        )
    return conf


# -- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    """The latest row of one partition: where the next run starts."""

    tp: TopicPartition
    offset: int  # end_offset: the next offset to read
    batch_id: int
    committed_at: str | None = None
    written_by: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class LedgerState:
    """A ledger as read at Delta ``version``."""

    table: str
    pipeline: str | None
    version: int
    next_batch_id: int
    entries: tuple[LedgerEntry, ...]

    @property
    def positions(self) -> dict[TopicPartition, int]:
        return {e.tp: e.offset for e in self.entries}

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({e.tp.topic for e in self.entries}))


@dataclass(frozen=True)
class LedgerRow:
    """One row to append, in the toolkit's column names."""

    pipeline: str | None
    batch_id: int
    tp: TopicPartition
    start_offset: int | None
    end_offset: int
    committed_at_us: int
    written_by: str
    note: str


@dataclass(frozen=True)
class LedgerPlan:
    state: LedgerState
    plan: Plan
    rows: tuple[LedgerRow, ...]
    dropped: tuple[Move, ...]  # partitions whose topic or partition is gone: no row can say that

    def metadata(self) -> dict[str, str]:
        """The commit's custom metadata: the plan, so the Delta history says why the rows are there."""
        summary = {
            "pipeline": self.state.pipeline,
            "from_version": self.state.version,
            "batch_id": self.state.next_batch_id,
            "strategy": self.plan.strategy,
            "lost": self.plan.lost,
            "skipped": self.plan.skipped,
            "replayed": self.plan.replayed,
            "moves": [
                {
                    "topic": m.tp.topic,
                    "partition": m.tp.partition,
                    "old": m.old,
                    "new": m.new,
                    "verdict": m.verdict,
                }
                for m in self.plan.moves
            ],
        }
        return {METADATA_KEY: json.dumps(summary, separators=(",", ":"))}


# -- pure --------------------------------------------------------------------------------------------


def ledger_view(state: LedgerState) -> CheckpointView:
    """The ledger as the planning core sees a checkpoint: one source whose start is the latest
    ``end_offset`` of each partition (the next run's ``startingOffsets``)."""
    label = state.table if state.pipeline is None else f"{state.table} ({state.pipeline})"
    source = SourcePosition(SOURCE_ID, "ledger", state.positions)
    return CheckpointView(label, state.pipeline or "", state.next_batch_id, False, (source,))


def correction_rows(
    state: LedgerState, plan: Plan, *, now_us: int
) -> tuple[tuple[LedgerRow, ...], tuple[Move, ...]]:
    """One row per moved partition, under the next batch id; moves that drop a partition are
    returned apart (a row cannot delete a partition: the job must stop reading it)."""
    rows: list[LedgerRow] = []
    dropped: list[Move] = []
    for move in plan.moves:
        if move.new is None:
            dropped.append(move)
            continue
        cost = ", ".join(
            f"{what} {n}"
            for what, n in (("lost", move.lost), ("skipped", move.skipped), ("replayed", move.replayed))
            if n
        )
        note = f"{plan.strategy}: {move.verdict}" + (f" ({cost})" if cost else "")
        rows.append(
            LedgerRow(
                pipeline=state.pipeline,
                batch_id=state.next_batch_id,
                tp=move.tp,
                start_offset=move.old,
                end_offset=move.new,
                committed_at_us=now_us,
                written_by=WRITTEN_BY,
                note=note,
            )
        )
    return tuple(rows), tuple(dropped)


def cluster_view(
    ranges: Mapping[TopicPartition, OffsetRange | None], topic_partitions: Mapping[str, int | None]
) -> ClusterView:
    """What Kafka holds, from ``offset_ranges`` answers (``None``: missing) and partition counts."""
    existing = {t for t, n in topic_partitions.items() if n is not None}
    return ClusterView({tp: r for tp, r in ranges.items() if r is not None and tp.topic in existing})


# -- IO ----------------------------------------------------------------------------------------------


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def read_ledger(conf: LedgerConf) -> LedgerState:
    """The latest row per partition (highest batch id, then latest commit time) of the pipeline."""
    from deltalake import QueryBuilder

    cols = conf.columns
    dt = open_table(conf.table, conf.storage_options)
    names = {f.name for f in dt.schema().fields}
    wanted = {
        k: v
        for k, v in cols.model_dump().items()
        if v  # "" or None: the table has no such column
    }
    # Optional columns left at their default name are simply absent from a table without them.
    defaults = LedgerColumns()
    for key in OPTIONAL_COLUMNS:
        if key in wanted and wanted[key] not in names and wanted[key] == getattr(defaults, key):
            del wanted[key]
    # No pipeline column (at its default name) and none asked for: the table holds one pipeline.
    if (
        conf.pipeline is None
        and wanted.get("pipeline") == defaults.pipeline
        and defaults.pipeline not in names
    ):
        del wanted["pipeline"]
    missing = sorted(v for v in wanted.values() if v not in names)
    if missing:
        raise InvalidInput(
            f"{conf.table}: no column {', '.join(repr(m) for m in missing)} "
            f"(columns: {', '.join(sorted(names))}); map the ledger's columns in the conf file"
        )
    select = ", ".join(f"{_quote(v)} AS {k}" for k, v in wanted.items())
    where = ""
    if "pipeline" in wanted and conf.pipeline is not None:
        where = f"WHERE {_quote(wanted['pipeline'])} = {_literal(conf.pipeline)}"
    if "pipeline" in wanted and conf.pipeline is None:
        _refuse_mixed_pipelines(conf.table, dt, wanted["pipeline"])
    order = "batch_id DESC" + (", committed_at DESC" if "committed_at" in wanted else "")
    sql = (
        f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY topic, partition ORDER BY {order}) AS rn "
        f"FROM (SELECT {select} FROM ledger {where}) AS l) AS r WHERE rn = 1 ORDER BY topic, partition"
    )
    batch = _quote(wanted["batch_id"])
    top = f"SELECT max(batch_id) AS top FROM (SELECT {batch} AS batch_id FROM ledger {where}) AS b"
    with _delta_errors(conf.table):
        rows = _rows(QueryBuilder().register("ledger", dt).execute(sql))
        [max_row] = _rows(QueryBuilder().register("ledger", dt).execute(top))
        version = int(dt.version())
    entries = tuple(
        LedgerEntry(
            tp=TopicPartition(str(r["topic"]), int(r["partition"])),
            offset=int(r["end_offset"]),
            batch_id=int(r["batch_id"]),
            committed_at=_iso(r.get("committed_at")),
            written_by=r.get("written_by"),
            note=r.get("note"),
        )
        for r in rows
    )
    top_id = max_row["top"]
    return LedgerState(
        table=conf.table,
        pipeline=conf.pipeline if "pipeline" in wanted else None,
        version=version,
        next_batch_id=0 if top_id is None else int(top_id) + 1,
        entries=entries,
    )


def _refuse_mixed_pipelines(table: str, dt: Any, column: str) -> None:
    """Without a pipeline, the latest rows of every pipeline would be merged into one position per
    partition (and a repair would append rows no pipeline reads): name one."""
    from deltalake import QueryBuilder

    sql = (
        f"SELECT DISTINCT {_quote(column)} AS p FROM ledger WHERE {_quote(column)} IS NOT NULL "
        "ORDER BY p LIMIT 11"
    )
    with _delta_errors(table):
        present = [str(r["p"]) for r in _rows(QueryBuilder().register("ledger", dt).execute(sql))]
    if present:
        named = ", ".join(present[:10]) + (" ..." if len(present) > 10 else "")
        raise InvalidInput(
            f"{table}: column {column!r} holds pipelines {named}; name one with --pipeline (nothing was "
            "read or written)"
        )


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value)


def _rows(reader: Any) -> list[dict[str, Any]]:
    import pyarrow as pa

    table = pa.table(reader.read_all())
    return table.to_pylist()  # type: ignore[no-any-return]


def ledger_schema() -> Any:
    """The toolkit's ledger schema (pyarrow)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("pipeline", pa.string()),
            pa.field("batch_id", pa.int64(), nullable=False),
            pa.field("topic", pa.string(), nullable=False),
            pa.field("partition", pa.int32(), nullable=False),
            pa.field("start_offset", pa.int64()),
            pa.field("end_offset", pa.int64(), nullable=False),
            pa.field("committed_at", pa.timestamp("us", tz="UTC")),
            pa.field("written_by", pa.string()),
            pa.field("note", pa.string()),
        ]
    )


def create_ledger(table: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Create an empty ledger with the toolkit's schema (nothing happens if one exists)."""
    from deltalake import CommitProperties, DeltaTable

    with _delta_errors(table):
        DeltaTable.create(
            table,
            schema=ledger_schema(),
            mode="ignore",
            storage_options=dict(storage_options) if storage_options else None,
            commit_properties=CommitProperties(custom_metadata={"stream-recovery": "create ledger"}),
        )


def rows_table(rows: Sequence[LedgerRow], columns: LedgerColumns, schema: Any) -> Any:
    """``rows`` as a pyarrow table in the ledger's own column names and types."""
    import pyarrow as pa

    values: dict[str, list[Any]] = {
        "pipeline": [r.pipeline for r in rows],
        "batch_id": [r.batch_id for r in rows],
        "topic": [r.tp.topic for r in rows],
        "partition": [r.tp.partition for r in rows],
        "start_offset": [r.start_offset for r in rows],
        "end_offset": [r.end_offset for r in rows],
        "committed_at": [r.committed_at_us for r in rows],
        "written_by": [r.written_by for r in rows],
        "note": [r.note for r in rows],
    }
    mapped = {k: v for k, v in columns.model_dump().items() if v}
    fields = []
    arrays = []
    for field in schema:
        ours = next((k for k, v in mapped.items() if v == field.name), None)
        data = values[ours] if ours is not None else [None] * len(rows)
        if pa.types.is_timestamp(field.type) and ours == "committed_at":
            arrays.append(pa.array(data, pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(data, field.type))
        fields.append(field)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def ledger_history(conf: LedgerConf, limit: int | None = None) -> list[dict[str, Any]]:
    """The ledger's Delta history, newest first: correction commits carry ``stream-recovery.plan``."""
    dt = open_table(conf.table, conf.storage_options)
    with _delta_errors(conf.table):
        return list(dt.history(limit))


def append_rows(
    conf: LedgerConf,
    rows: Sequence[LedgerRow],
    *,
    expected_version: int | None = None,
    metadata: Mapping[str, str] | None = None,
    app_transaction: tuple[str, int] | None = None,
) -> int:
    """Append ``rows`` in one commit and return its version.

    ``expected_version``: raise PlanOutdated (nothing written) if the table moved on since it was read
    (a blind append never conflicts in Delta, so the check is ours). ``app_transaction``: a
    ``(txnAppId, txnVersion)`` committed with the rows, as Spark's idempotent writes do.
    """
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    dt = open_table(conf.table, conf.storage_options)
    with _delta_errors(conf.table):
        if expected_version is not None and dt.version() != expected_version:
            raise PlanOutdated(
                f"{conf.table}: the ledger is at version {dt.version()}, the plan was made at "
                f"{expected_version}; nothing was written. Plan again."
            )
        schema = pa.schema(dt.schema().to_arrow())
        data = rows_table(rows, conf.columns, schema)
        txns = (
            [Transaction(app_id=app_transaction[0], version=app_transaction[1])] if app_transaction else None
        )
        write_deltalake(
            dt,
            data,
            mode="append",
            commit_properties=CommitProperties(custom_metadata=dict(metadata or {}), app_transactions=txns),
        )
        return int(open_table(conf.table, conf.storage_options).version())
