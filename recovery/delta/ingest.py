"""The protocol of a batch job whose Kafka positions live in an offset ledger (``jobs/ledger_ingest.py``).

Each run appends its records to a data table, then one ledger row per partition. The job does the
Spark part; this module keeps the two tables consistent (deltalake, no JVM):

1. :func:`prepare_run`, before any Spark work: create the ledger if missing; complete a run that died
   between its data append and its ledger append (:func:`recover_crashed_batch`: the data table's
   app transaction is ahead of the ledger's, so that batch's ledger rows are written from the range
   its data commit recorded, reading nothing twice); then the ledger gate. In that order: the gate
   must judge, and a clamp must number, the ledger as the data table has it.
2. :func:`next_batch`: the range to read, [ledger offsets, log end), as a :class:`LedgerBatch`.
3. The job appends the records with ``txnAppId`` = the pipeline, ``txnVersion`` = the batch id and
   ``userMetadata`` = :meth:`LedgerBatch.user_metadata`. Delta skips a batch id it already holds
   without a word, so :func:`confirm_written` reads the recorded range back and stops if another run
   wrote the batch.
4. :func:`record_batch` appends the ledger rows with the same app transaction, only if the ledger is
   still at the version this run read and records no batch at or above this one: two overlapping
   runs cannot both record a batch. The check is not atomic with the append (Delta does not conflict
   blind appends): run one instance per pipeline.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recovery.delta.ledger import ledger_gate
from recovery.delta.ledger_conf import LedgerConf
from recovery.delta.ledger_model import LedgerRow, LedgerState, PendingBatch
from recovery.delta.ledger_table import append_rows, create_ledger, read_ledger
from recovery.delta.log import app_transaction_version, delta_errors, open_table
from recovery.errors import LedgerJobStopped, PlanOutdated
from recovery.model import GateMode, Policy, TopicPartition

if TYPE_CHECKING:
    from recovery.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

META_KEY = "stream-recovery.ledger-batch"  # the data commit's userMetadata key: the batch's range
WRITTEN_BY = "ledger_ingest"  # the written_by of the job's ledger rows


@dataclass(frozen=True)
class LedgerBatch:
    """One run's range of ``topic``: from the ledger's offsets (a partition it does not know yet starts
    at its log start) to the log end, as batch ``batch_id`` of ``app_id``; ``read_at`` is the ledger
    version it was planned from."""

    app_id: str
    batch_id: int
    topic: str
    start: Mapping[TopicPartition, int]
    end: Mapping[TopicPartition, int]
    read_at: int

    @property
    def records(self) -> int:
        return sum(self.end[tp] - self.start[tp] for tp in self.end)

    @property
    def empty(self) -> bool:
        """Nothing new past the ledger's offsets."""
        return all(self.start[tp] >= self.end[tp] for tp in self.end)

    def recorded(self) -> dict[str, Any]:
        """The range as the data commit records it (partitions as strings, as JSON has them)."""
        return {
            "app_id": self.app_id,
            "batch_id": self.batch_id,
            "topic": self.topic,
            "start": {str(tp.partition): o for tp, o in sorted(self.start.items())},
            "end": {str(tp.partition): o for tp, o in sorted(self.end.items())},
        }

    def user_metadata(self) -> str:
        """The data append's ``userMetadata``."""
        return json.dumps({META_KEY: self.recorded()})


def _txn_version(table: str, app_id: str, storage_options: Mapping[str, str] | None) -> int | None:
    return app_transaction_version(table, app_id, storage_options, missing_table_ok=True)


def recorded_batch(
    data_table: str, app_id: str, batch_id: int, storage_options: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
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


def recover_crashed_batch(conf: LedgerConf, data_table: str, topic: str) -> int | None:
    """Complete a run that died between its data append and its ledger append: write that batch's
    ledger rows from the range its data commit recorded. Returns the batch id, None if none was
    pending. Runs before the gate, so a repair never takes the crashed batch's id or re-reads its
    range."""
    state = read_ledger(conf)
    pending = pending_batch(conf, data_table, state, topic)
    if pending is None:
        return None
    complete_batch(conf, pending, read_at=state.version)
    return pending.batch_id


def prepare_run(
    conf: LedgerConf,
    kafka: KafkaConfig,
    *,
    topic: str,
    data_table: str,
    gate: GateMode | None = GateMode.FAIL,
    policy: Policy | None = None,
) -> int | None:
    """Before any Spark work: create the ledger, complete a crashed batch, then run the gate
    (``None``: no gate, to see what Spark does on its own). Returns the recovered batch id."""
    create_ledger(conf.table, conf.storage_options)
    recovered = recover_crashed_batch(conf, data_table, topic)
    if gate is not None:
        ledger_gate(conf, kafka, mode=gate, policy=policy)
    return recovered


def next_batch(conf: LedgerConf, kafka: KafkaConfig, topic: str) -> LedgerBatch:
    """The next run's range of ``topic``: [the ledger's offsets, the high watermark) per partition."""
    from recovery.kafka.cluster import cluster_view

    state = read_ledger(conf)
    cluster = cluster_view(kafka, [topic])
    ranges = {tp: r for tp, r in cluster.partitions.items() if tp.topic == topic}
    start = {tp: state.positions.get(tp, r.start) for tp, r in ranges.items()}
    end = {tp: r.end for tp, r in ranges.items()}
    return LedgerBatch(conf.app_id, state.next_batch_id, topic, start, end, state.version)


def confirm_written(
    data_table: str, batch: LedgerBatch, storage_options: Mapping[str, str] | None = None
) -> None:
    """Raise LedgerJobStopped unless the data table records ``batch`` with this run's range: Delta
    skips a txnVersion it already holds without a word, so if another run wrote batch k first, this
    run's records are not in the table and the ledger must record that run's range, not ours."""
    written = recorded_batch(data_table, batch.app_id, batch.batch_id, storage_options)
    mine = batch.recorded()
    if written is None or (written["start"], written["end"]) != (mine["start"], mine["end"]):
        raise LedgerJobStopped(
            f"{data_table}: batch {batch.batch_id} of {batch.app_id} was written by another run, so Delta "
            "skipped this run's records (txnVersion); the ledger was not written. Run the job again"
        )


# Delta's optimistic concurrency, when two runs write the same batch at once: the second to commit
# read the app transaction the first one set (delta-io/delta ConflictChecker
# checkForUpdatedApplicationTransactionIdsThatCurrentTxnDependsOn -> ConcurrentTransactionException).
# Two first runs creating the table at once meet the metadata/protocol checks instead.
CONCURRENT_CONDITIONS = ("DELTA_CONCURRENT_", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED")


def _conditions(exc: BaseException) -> list[str]:
    """The Spark error conditions of a pyspark exception and of its Java cause chain (duck-typed:
    this module does not import pyspark)."""
    found: list[str] = []

    def condition(obj: Any) -> None:
        for name in ("getCondition", "getErrorClass"):
            method = getattr(obj, name, None)
            if callable(method):
                try:
                    value = method()
                except Exception:  # a Py4J call on a foreign object: no condition
                    value = None
                if value:
                    found.append(str(value))
                    return

    condition(exc)
    java = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    for _ in range(25):
        if java is None:
            break
        condition(java)
        try:
            java = java.getCause()
        except Exception:  # the end of what Py4J can tell
            break
    return found


def concurrent_run_stop(exc: BaseException, data_table: str, batch: LedgerBatch) -> LedgerJobStopped | None:
    """The one-line stop for a data append that lost to another run's commit of the same batch
    (None: ``exc`` is something else, to be raised as it is). Delta wrote nothing of this run."""
    conditions = _conditions(exc)
    text = str(exc)
    hit = next((c for c in conditions if c.startswith(CONCURRENT_CONDITIONS)), None)
    if hit is None:
        hit = next((c for c in CONCURRENT_CONDITIONS if f"[{c}" in text), None)
    if hit is None:
        return None
    return LedgerJobStopped(
        f"{data_table}: another run of {batch.app_id} committed to the table while this run was writing "
        f"batch {batch.batch_id} ({hit.rstrip('_')}); this run wrote nothing and its ledger rows were not "
        "written. Run one instance per pipeline"
    )


def record_batch(conf: LedgerConf, batch: LedgerBatch) -> int:
    """Append ``batch``'s ledger rows (see :func:`append_ledger_rows`); returns the ledger's version."""
    recorded = batch.recorded()
    rows = batch_rows(conf, batch.batch_id, batch.topic, recorded["start"], recorded["end"])
    return append_ledger_rows(conf, batch.batch_id, rows, read_at=batch.read_at)
