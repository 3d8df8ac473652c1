"""The ledger table's edge: read the latest offsets, create a ledger, append rows (deltalake + pyarrow).

deltalake's exceptions become :class:`~recovery.errors.DeltaError` (``DeltaTableNotFound`` when there
is no table at the path). deltalake and pyarrow come from :mod:`recovery.delta.log`, which loads them
on first use (``DeltaNotInstalled`` without the Delta extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from recovery.core.model import TopicPartition
from recovery.delta.ledger_conf import OPTIONAL_COLUMNS, LedgerColumns, LedgerConf
from recovery.delta.ledger_model import LedgerEntry, LedgerRow, LedgerState
from recovery.delta.log import delta_errors, deltalake, open_table
from recovery.delta.log import pyarrow as pa
from recovery.errors import InvalidInput, PlanOutdated

if TYPE_CHECKING:
    from arro3.core import RecordBatchReader


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def read_ledger(conf: LedgerConf) -> LedgerState:
    """The latest row per partition (highest batch id, then latest commit time) of the pipeline."""
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
    with delta_errors(conf.table):
        rows = _pylist(deltalake.QueryBuilder().register("ledger", dt).execute(sql))
        [max_row] = _pylist(deltalake.QueryBuilder().register("ledger", dt).execute(top))
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


def _refuse_mixed_pipelines(table: str, dt: deltalake.DeltaTable, column: str) -> None:
    """Without a pipeline, the latest rows of every pipeline would be merged into one position per
    partition (and a repair would append rows no pipeline reads): name one."""
    sql = (
        f"SELECT DISTINCT {_quote(column)} AS p FROM ledger WHERE {_quote(column)} IS NOT NULL "
        "ORDER BY p LIMIT 11"
    )
    with delta_errors(table):
        present = [str(r["p"]) for r in _pylist(deltalake.QueryBuilder().register("ledger", dt).execute(sql))]
    if present:
        named = ", ".join(present[:10]) + (" ..." if len(present) > 10 else "")
        raise InvalidInput(
            f"pipeline is needed: column {column!r} of {table} holds pipelines {named}; name one "
            "(nothing was read or written)",
            parameter="pipeline",
        )


def _iso(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return str(value.astimezone(UTC).isoformat(timespec="milliseconds")).replace("+00:00", "Z")
    return str(value)


# pyarrow is untyped (ignore_missing_imports): a row of its tables is a dict of Python values.
def _pylist(reader: RecordBatchReader) -> list[dict[str, Any]]:
    table = pa.table(reader.read_all())
    return table.to_pylist()  # type: ignore[no-any-return]


def ledger_schema() -> Any:  # a pyarrow.Schema; pyarrow is untyped
    """The toolkit's ledger schema (pyarrow)."""
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
    with delta_errors(table):
        deltalake.DeltaTable.create(
            table,
            schema=ledger_schema(),
            mode="ignore",
            storage_options=dict(storage_options) if storage_options else None,
            commit_properties=deltalake.CommitProperties(
                custom_metadata={"stream-recovery": "create ledger"}
            ),
        )


# A pyarrow.Schema in, a pyarrow.Table out; pyarrow is untyped.
def rows_table(rows: Sequence[LedgerRow], columns: LedgerColumns, schema: Any) -> Any:
    """``rows`` as a pyarrow table in the ledger's own column names and types."""
    values: dict[str, list[object]] = {
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
    dt = open_table(conf.table, conf.storage_options)
    with delta_errors(conf.table):
        if expected_version is not None and dt.version() != expected_version:
            raise PlanOutdated(
                f"{conf.table}: the ledger is at version {dt.version()}, the plan was made at "
                f"{expected_version}; nothing was written. Plan again."
            )
        schema = pa.schema(dt.schema().to_arrow())
        data = rows_table(rows, conf.columns, schema)
        txns = (
            [deltalake.Transaction(app_id=app_transaction[0], version=app_transaction[1])]
            if app_transaction
            else None
        )
        deltalake.write_deltalake(
            dt,
            data,
            mode="append",
            commit_properties=deltalake.CommitProperties(
                custom_metadata=dict(metadata or {}), app_transactions=txns
            ),
        )
        return int(open_table(conf.table, conf.storage_options).version())
