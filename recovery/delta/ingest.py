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

How the two tables record a batch, and the batch of a run that died between them, is
:mod:`recovery.delta.ledger_batches` (the ledger repair reads it too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from recovery.core.model import GateMode, JsonObject, Policy, TopicPartition
from recovery.delta.ledger import ledger_gate
from recovery.delta.ledger_batches import (
    META_KEY,
    append_ledger_rows,
    batch_rows,
    complete_batch,
    pending_batch,
    recorded_batch,
)
from recovery.delta.ledger_conf import LedgerConf
from recovery.delta.ledger_table import create_ledger, read_ledger
from recovery.errors import LedgerJobStopped
from recovery.kafka.cluster import cluster_view
from recovery.kafka.config import KafkaConfig


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

    def recorded(self) -> JsonObject:
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

    def condition(obj: object) -> None:
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
    """Append ``batch``'s ledger rows (see :func:`~recovery.delta.ledger_batches.append_ledger_rows`);
    returns the ledger's version."""
    recorded = batch.recorded()
    rows = batch_rows(conf, batch.batch_id, batch.topic, recorded["start"], recorded["end"])
    return append_ledger_rows(conf, batch.batch_id, rows, read_at=batch.read_at)
