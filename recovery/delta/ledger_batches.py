"""A ledger job's batches as its two tables record them, and a batch only one of them holds.

A run of the ledger job (:mod:`recovery.delta.ingest`) appends its records to the data table with
``txnAppId`` = the pipeline, ``txnVersion`` = the batch id and the batch's range under
:data:`META_KEY` in the commit's ``userMetadata``; then one ledger row per partition with the same
app transaction (:func:`append_ledger_rows`, guarded against another run that got there first).
A run that died between the two appends leaves a batch the data table holds and the ledger does
not: :func:`pending_batch` finds it, :func:`complete_batch` writes its ledger rows from the range
its data commit recorded. The job does that before its gate, the ledger repair
(:mod:`recovery.delta.ledger`) before it plans.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from recovery.core.model import JsonObject, TopicPartition
from recovery.delta.ledger_conf import LedgerConf
from recovery.delta.ledger_model import LedgerRow, LedgerState, PendingBatch
from recovery.delta.ledger_table import append_rows
from recovery.delta.log import app_transaction_version, delta_errors, open_table
from recovery.errors import LedgerJobStopped, PlanOutdated

log = logging.getLogger(__name__)

META_KEY = "stream-recovery.ledger-batch"  # the data commit's userMetadata key: the batch's range
WRITTEN_BY = "ledger_ingest"  # the written_by of the job's ledger rows


def _txn_version(table: str, app_id: str, storage_options: Mapping[str, str] | None) -> int | None:
    return app_transaction_version(table, app_id, storage_options, missing_table_ok=True)


def recorded_batch(
    data_table: str, app_id: str, batch_id: int, storage_options: Mapping[str, str] | None = None
) -> JsonObject | None:
    """The range of ``batch_id`` recorded in the data table's commit (``META_KEY`` in its
    ``userMetadata``), None if that batch was not written. Raises LedgerJobStopped when the app
    transaction says it was written but no commit records it."""
    version = _txn_version(data_table, app_id, storage_options)
    if version is None or version < batch_id:
        return None
    dt = open_table(data_table, storage_options)
    with delta_errors(data_table):
        history = dt.history()
    for commit in history:
        try:
            recorded = json.loads(commit.get("userMetadata") or "{}").get(META_KEY)
        except (ValueError, AttributeError):
            continue  # another writer's userMetadata
        if recorded and recorded.get("batch_id") == batch_id and recorded.get("app_id") == app_id:
            return dict(recorded)
    raise LedgerJobStopped(
        f"{data_table}: txn {app_id} is at version {version} but no commit records batch {batch_id} in "
        f"its userMetadata ({META_KEY}); check the table's history before running the job again"
    )


def batch_rows(
    conf: LedgerConf,
    batch_id: int,
    topic: str,
    start: Mapping[str, int],
    end: Mapping[str, int],
    *,
    now_us: int | None = None,
) -> tuple[LedgerRow, ...]:
    """The ledger rows of a batch, from its recorded range (partitions as strings)."""
    now = int(time.time() * 1_000_000) if now_us is None else now_us
    return tuple(
        LedgerRow(
            conf.pipeline, batch_id, TopicPartition(topic, int(p)), start[p], end[p], now, WRITTEN_BY, ""
        )
        for p in sorted(end, key=int)
    )


def append_ledger_rows(conf: LedgerConf, batch_id: int, rows: tuple[LedgerRow, ...], *, read_at: int) -> int:
    """Append batch ``batch_id``'s ledger rows, only if the ledger is still at version ``read_at`` and
    its app transaction is below ``batch_id``: otherwise another run recorded a batch since this one
    read the ledger, and appending would overwrite its end offsets (losing what lies between).
    Raises LedgerJobStopped, nothing written. Returns the ledger's new version."""
    app_id = conf.app_id
    ledger_txn = _txn_version(conf.table, app_id, conf.storage_options)
    if ledger_txn is not None and ledger_txn >= batch_id:
        raise LedgerJobStopped(
            f"{conf.table}: the ledger already records batch {ledger_txn} of {app_id}: another run got "
            f"there first; this run's ledger rows for batch {batch_id} were not written"
        )
    try:
        return append_rows(conf, rows, expected_version=read_at, app_transaction=(app_id, batch_id))
    except PlanOutdated:
        raise LedgerJobStopped(
            f"{conf.table}: the ledger changed since this run read it at version {read_at}: another run "
            f"(or a repair) got there first; this run's ledger rows for batch {batch_id} were not written"
        ) from None


def pending_batch(
    conf: LedgerConf, data_table: str, state: LedgerState, topic: str | None = None
) -> PendingBatch | None:
    """The batch ``data_table`` holds for the pipeline (its app transaction) that the ledger does not
    record: a run died between its data append and its ledger append. None when the ledger is level
    with the data. ``topic`` when the data commit does not name it (commits before it did); else the
    ledger's only topic. Raises LedgerJobStopped when the two disagree in a way only a person can
    settle (a correction took the crashed batch's id)."""
    app_id = conf.app_id
    data_txn = _txn_version(data_table, app_id, conf.storage_options)
    if data_txn is None:
        return None
    ledger_txn = _txn_version(conf.table, app_id, conf.storage_options)
    if ledger_txn is not None and ledger_txn >= data_txn:
        return None
    if data_txn != state.next_batch_id:
        raise LedgerJobStopped(
            f"{data_table}: holds batch {data_txn} of {app_id}, which {conf.table} does not record, but the "
            f"ledger's next batch is {state.next_batch_id} (a correction took the id after a crash?). "
            f"Compare the batch's range ({META_KEY} in the data commit) with the ledger before running again"
        )
    recorded = recorded_batch(data_table, app_id, data_txn, conf.storage_options)
    assert recorded is not None  # data_txn >= batch id
    name = recorded.get("topic") or topic or (state.topics[0] if len(state.topics) == 1 else None)
    if not isinstance(name, str):
        raise LedgerJobStopped(
            f"{data_table}: batch {data_txn} of {app_id} is not in {conf.table} and its data commit does not "
            "name its topic: run the job once (it writes that batch's ledger rows first)"
        )

    def offsets(by_partition: Mapping[str, int]) -> dict[TopicPartition, int]:
        return {TopicPartition(name, int(p)): int(o) for p, o in by_partition.items()}

    return PendingBatch(data_table, app_id, data_txn, offsets(recorded["start"]), offsets(recorded["end"]))


def complete_batch(conf: LedgerConf, pending: PendingBatch, *, read_at: int) -> int:
    """Write the pending batch's ledger rows from the range its data commit recorded (guarded as a
    run's own rows are); returns the ledger's new version."""
    (topic,) = {tp.topic for tp in pending.end}
    start = {str(tp.partition): o for tp, o in pending.start.items()}
    end = {str(tp.partition): o for tp, o in pending.end.items()}
    rows = batch_rows(conf, pending.batch_id, topic, start, end)
    version = append_ledger_rows(conf, pending.batch_id, rows, read_at=read_at)
    log.info("batch %d: ledger rows written from the data commit (a run died)", pending.batch_id)
    return version
