"""A scheduled batch ingestion job whose Kafka positions live in a Delta offset ledger.

Each run reads ``spark.read.format("kafka")`` from the ledger's latest offsets to the current high
watermark, appends the records to a Delta table, then appends one ledger row per partition:

    python jobs/ledger_ingest.py -b kafka:9092 --topic orders --table /lake/orders \\
        --ledger /lake/ops/kafka_ledger --pipeline orders-hourly --gate clamp --max-loss-records 10000

1. Crash recovery: if a run died between its data append and its ledger append, the data table's
   app transaction is ahead of the ledger's; the ledger rows of that batch are written from the
   range its data commit recorded, reading nothing twice. This comes first, so the gate below never
   takes the crashed batch's id.
2. The pre-start gate (``recovery.delta.api.ledger_gate``) checks the ledger against Kafka:
   ``fail`` (default) exits 1 with the findings when offsets aged out; ``clamp`` appends correction
   rows within ``--max-loss-records`` and goes on; ``warn`` prints and goes on.
3. The data append is idempotent: ``txnAppId`` = the pipeline, ``txnVersion`` = the batch id, and
   ``userMetadata`` records the batch's offset range. Delta skips a batch id it already holds without
   a word, so the job reads the recorded range back and stops if another run wrote the batch.
4. The ledger append carries the same app transaction and happens only if the ledger is still at the
   version this run read and records no batch at or above this one: two overlapping runs cannot both
   record a batch (the second stops with exit 1, nothing written). The check is not atomic with the
   append: run one instance per pipeline.

On a cluster, run it with spark-submit and the Kafka connector and Delta on the classpath;
``--local-rig`` builds the project's local SparkSession instead (demo and tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from recovery.cli import run
from recovery.cli.options import kafka_options
from recovery.errors import LedgerJobStopped
from recovery.model import TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recovery.delta.ledger import LedgerConf
    from recovery.kafka.config import KafkaConfig
    from recovery.model import Policy

META_KEY = "stream-recovery.ledger-batch"


@dataclass(frozen=True)
class IngestResult:
    batch_id: int | None  # None: nothing new to read
    records: int
    start: dict[TopicPartition, int]
    end: dict[TopicPartition, int]
    recovered_batch: int | None = None  # a batch whose ledger rows a previous run did not write


def _offsets_json(topic: str, offsets: dict[TopicPartition, int]) -> str:
    return json.dumps({topic: {str(tp.partition): o for tp, o in sorted(offsets.items())}})


def _txn_version(table: str, app_id: str, storage_options: Mapping[str, str] | None = None) -> int | None:
    """The table's app-transaction version for ``app_id``; None if the table or the txn is absent.
    Only a missing table counts as absent: any other storage error propagates (exit 3)."""
    from recovery.delta.log import DeltaTableNotFound, app_transaction_version

    try:
        return app_transaction_version(table, app_id, storage_options)
    except DeltaTableNotFound:
        return None  # no data table yet: the first run creates it


def _recorded_batch(data_table: str, app_id: str, batch_id: int) -> dict[str, Any] | None:
    """The offset range of ``batch_id`` recorded in the data table's commit, if it was written."""
    from recovery.delta.log import _delta_errors, open_table

    version = _txn_version(data_table, app_id)
    if version is None or version < batch_id:
        return None
    dt = open_table(data_table)
    with _delta_errors(data_table):
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


def _ledger_rows(
    conf: LedgerConf, batch_id: int, topic: str, start: dict[str, int], end: dict[str, int]
) -> list[Any]:
    from recovery.delta.ledger import LedgerRow

    now_us = int(time.time() * 1_000_000)
    return [
        LedgerRow(
            conf.pipeline,
            batch_id,
            TopicPartition(topic, int(p)),
            start[p],
            end[p],
            now_us,
            "ledger_ingest",
            "",
        )
        for p in sorted(end, key=int)
    ]


def append_ledger_rows(conf: LedgerConf, app_id: str, batch_id: int, rows: list[Any], *, read_at: int) -> int:
    """Append batch ``batch_id``'s ledger rows, only if the ledger is still at version ``read_at`` and
    its app transaction for ``app_id`` is below ``batch_id``: otherwise another run recorded a batch
    since this one read the ledger, and appending would overwrite its end offsets (losing what lies
    between). Raises LedgerJobStopped, nothing written.

    The check and the append are two steps: a blind append racing in between is not caught (Delta
    does not conflict blind appends); run one instance of the job per pipeline.
    """
    from recovery.delta.ledger import append_rows
    from recovery.errors import PlanOutdated

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


def recover_crashed_batch(conf: LedgerConf, data_table: str, topic: str) -> int | None:
    """Complete a run that died between its data append and its ledger append: write that batch's
    ledger rows from the range its data commit recorded. Returns the batch id, None if none was
    pending. Runs before the gate, so a repair never takes the crashed batch's id or re-reads its
    range."""
    from recovery.delta.ledger import read_ledger

    app_id = conf.pipeline or conf.table
    state = read_ledger(conf)
    data_txn = _txn_version(data_table, app_id)
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
    recorded = _recorded_batch(data_table, app_id, data_txn)
    assert recorded is not None  # data_txn >= batch id
    rows = _ledger_rows(conf, data_txn, topic, recorded["start"], recorded["end"])
    append_ledger_rows(conf, app_id, data_txn, rows, read_at=state.version)
    return data_txn


def prepare(
    *,
    kafka: KafkaConfig,
    topic: str,
    data_table: str,
    conf: LedgerConf,
    gate: str = "fail",
    policy: Policy | None = None,
) -> int | None:
    """Before any Spark work: create the ledger, complete a crashed batch, then run the gate (in that
    order: the gate must judge, and a clamp must number, the ledger as the data table has it).
    Returns the recovered batch id."""
    from recovery.delta.api import ledger_gate
    from recovery.delta.ledger import create_ledger

    create_ledger(conf.table, conf.storage_options)
    recovered = recover_crashed_batch(conf, data_table, topic)
    if gate != "off":
        ledger_gate(conf, kafka, mode=gate, policy=policy)
    return recovered


def ingest(
    spark: SparkSession,
    *,
    kafka: KafkaConfig,
    topic: str,
    data_table: str,
    conf: LedgerConf,
    gate: str = "fail",
    policy: Policy | None = None,
    stop_after_data: bool = False,
) -> IngestResult:
    """One run: recover, gate, read [ledger offsets, high watermark), append the data, append the
    ledger rows.

    ``gate="off"`` skips the gate (to see what Spark does on its own); ``stop_after_data`` stops
    between the two appends, as a crash would (failure drills and tests).
    """
    from recovery.delta.api import kafka_view
    from recovery.delta.ledger import read_ledger

    recovered = prepare(kafka=kafka, topic=topic, data_table=data_table, conf=conf, gate=gate, policy=policy)
    state = read_ledger(conf)
    app_id = conf.pipeline or conf.table
    batch_id = state.next_batch_id

    cluster = kafka_view([topic], state.positions, kafka)
    ranges = {tp: r for tp, r in cluster.partitions.items() if tp.topic == topic}
    # A partition the ledger does not know yet starts at its log start (the first run, or added).
    start = {tp: state.positions.get(tp, r.start) for tp, r in ranges.items()}
    end = {tp: r.end for tp, r in ranges.items()}
    if all(start[tp] >= end[tp] for tp in ranges):
        return IngestResult(None, 0, start, end, recovered_batch=recovered)

    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("assign", json.dumps({topic: sorted(tp.partition for tp in ranges)}))
        .option("startingOffsets", _offsets_json(topic, start))
        .option("endingOffsets", _offsets_json(topic, end))
        .load()
        .selectExpr(
            "topic",
            "partition",
            "offset",
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
            "timestamp",
        )
    )
    record = {
        META_KEY: {
            "app_id": app_id,
            "batch_id": batch_id,
            "start": {str(tp.partition): o for tp, o in start.items()},
            "end": {str(tp.partition): o for tp, o in end.items()},
        }
    }
    (
        frame.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .option("userMetadata", json.dumps(record))
        .save(data_table)
    )
    # Delta skips a txnVersion it already holds without a word: if another run wrote batch k first,
    # this run's records are not in the table, and the ledger must record that run's range, not ours.
    written = _recorded_batch(data_table, app_id, batch_id)
    if written is None or (written["start"], written["end"]) != (
        record[META_KEY]["start"],
        record[META_KEY]["end"],
    ):
        raise LedgerJobStopped(
            f"{data_table}: batch {batch_id} of {app_id} was written by another run, so Delta skipped this "
            "run's records (txnVersion); the ledger was not written. Run the job again"
        )
    records = sum(end[tp] - start[tp] for tp in ranges)
    if stop_after_data:
        return IngestResult(batch_id, records, start, end, recovered_batch=recovered)
    rows = _ledger_rows(conf, batch_id, topic, record[META_KEY]["start"], record[META_KEY]["end"])
    append_ledger_rows(conf, app_id, batch_id, rows, read_at=state.version)
    return IngestResult(batch_id, records, start, end, recovered_batch=recovered)


@click.command()
@kafka_options
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--table", required=True, help="Delta table path to append the records to.")
@click.option("--ledger", required=True, help="Delta offset ledger table (created if missing).")
@click.option("--pipeline", required=True, help="This job's name in the ledger (and its txnAppId).")
@click.option("--gate", type=click.Choice(["fail", "clamp", "warn"]), default="fail", show_default=True)
@click.option("--max-loss-records", type=click.IntRange(min=0), help="clamp: refuse to lose more.")
@click.option("--local-rig", is_flag=True, help="Use the project's local SparkSession (recovery.local).")
def ledger_ingest(
    kafka: Any,
    topic: str,
    table: str,
    ledger: str,
    pipeline: str,
    gate: str,
    max_loss_records: int | None,
    local_rig: bool,
) -> None:
    """Append what TOPIC holds past the ledger's offsets to TABLE, then record the new offsets."""
    from recovery.delta.ledger import make_conf
    from recovery.model import Policy

    conf = make_conf({"table": ledger, "pipeline": pipeline, "data_table": table})
    policy = Policy(max_loss_records=max_loss_records)
    # Crash recovery and the gate run before a SparkSession exists: a run whose offsets aged out fails
    # in seconds.
    recovered = prepare(kafka=kafka, topic=topic, data_table=table, conf=conf, gate=gate, policy=policy)
    if recovered is not None:
        click.echo(f"% batch {recovered}: ledger rows written from the data commit (a run died)", err=True)
    if local_rig:
        from recovery.local.spark import local_spark

        spark = local_spark("ledger-ingest")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"ledger-ingest {pipeline}").getOrCreate()
    result = ingest(
        spark,
        kafka=kafka,
        topic=topic,
        data_table=table,
        conf=conf,
        gate="off",  # passed in prepare() above
    )
    if result.batch_id is None:
        click.echo(f"% {topic}: nothing new past the ledger's offsets", err=True)
    else:
        click.echo(f"% batch {result.batch_id}: {result.records} records appended to {table}", err=True)


if __name__ == "__main__":
    run(ledger_ingest)
