"""A scheduled batch ingestion job whose Kafka positions live in a Delta offset ledger.

Each run reads ``spark.read.format("kafka")`` from the ledger's latest offsets to the current high
watermark, appends the records to a Delta table, then appends one ledger row per partition:

    python jobs/ledger_ingest.py -b kafka:9092 --topic orders --table /lake/orders \\
        --ledger /lake/ops/kafka_ledger --pipeline orders-hourly --gate clamp --max-loss-records 10000

1. The pre-start gate (``recovery.delta.api.ledger_gate``) checks the ledger against Kafka first:
   ``fail`` (default) exits 1 with the findings when offsets aged out; ``clamp`` appends correction
   rows within ``--max-loss-records`` and goes on; ``warn`` prints and goes on.
2. The data append is idempotent: ``txnAppId`` = the pipeline, ``txnVersion`` = the batch id, and
   ``userMetadata`` records the batch's offset range. The ledger append carries the same app
   transaction. If a run dies between the two appends, the next run finds the data table ahead of
   the ledger and writes the ledger rows of that batch from the recorded range, reading nothing twice.

On a cluster, run it with spark-submit and the Kafka connector and Delta on the classpath;
``--local-rig`` builds the project's local SparkSession instead (demo and tests).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from recovery.cli import run
from recovery.cli.options import kafka_options
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


def _recorded_batch(data_table: str, app_id: str, batch_id: int) -> dict[str, Any] | None:
    """The offset range of ``batch_id`` recorded in the data table's commit, if it was written."""
    from deltalake import DeltaTable

    from recovery.delta.log import app_transaction_version

    try:
        version = app_transaction_version(data_table, app_id)
    except Exception:
        return None  # no data table yet
    if version is None or version < batch_id:
        return None
    for commit in DeltaTable(data_table).history():
        meta = commit.get("userMetadata")
        if not meta:
            continue
        recorded = json.loads(meta).get(META_KEY)
        if recorded and recorded["batch_id"] == batch_id and recorded["app_id"] == app_id:
            return dict(recorded)
    raise RuntimeError(f"{data_table}: txn {app_id} is at {version} but no commit records batch {batch_id}")


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
    """One run: gate, read [ledger offsets, high watermark), append the data, append the ledger rows.

    ``gate="off"`` skips the gate (to see what Spark does on its own); ``stop_after_data`` stops
    between the two appends, as a crash would (failure drills and tests).
    """
    from recovery.delta.api import kafka_view, ledger_gate
    from recovery.delta.ledger import append_rows, create_ledger, read_ledger

    create_ledger(conf.table, conf.storage_options)
    if gate != "off":
        ledger_gate(conf, kafka, mode=gate, policy=policy)
    state = read_ledger(conf)
    app_id = conf.pipeline or conf.table
    batch_id = state.next_batch_id

    recovered = _recorded_batch(data_table, app_id, batch_id)
    if recovered is not None:
        rows = _ledger_rows(conf, batch_id, topic, recovered["start"], recovered["end"])
        append_rows(conf, rows, app_transaction=(app_id, batch_id))
        state = read_ledger(conf)
        batch_id = state.next_batch_id

    cluster = kafka_view([topic], state.positions, kafka)
    ranges = {tp: r for tp, r in cluster.partitions.items() if tp.topic == topic}
    # A partition the ledger does not know yet starts at its log start (the first run, or added).
    start = {tp: state.positions.get(tp, r.start) for tp, r in ranges.items()}
    end = {tp: r.end for tp, r in ranges.items()}
    if all(start[tp] >= end[tp] for tp in ranges):
        return IngestResult(None, 0, start, end, recovered_batch=None if recovered is None else batch_id - 1)

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
    records = sum(end[tp] - start[tp] for tp in ranges)
    if stop_after_data:
        return IngestResult(batch_id, records, start, end)
    rows = _ledger_rows(conf, batch_id, topic, record[META_KEY]["start"], record[META_KEY]["end"])
    append_rows(conf, rows, app_transaction=(app_id, batch_id))
    return IngestResult(batch_id, records, start, end, None if recovered is None else batch_id - 1)


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
    from recovery.delta.api import ledger_gate
    from recovery.delta.ledger import create_ledger, make_conf
    from recovery.model import Policy

    conf = make_conf({"table": ledger, "pipeline": pipeline})
    policy = Policy(max_loss_records=max_loss_records)
    # The gate runs before a SparkSession exists: a run whose offsets aged out fails in seconds.
    create_ledger(conf.table, conf.storage_options)
    ledger_gate(conf, kafka, mode=gate, policy=policy)
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
        gate="off",  # passed above
    )
    if result.batch_id is None:
        click.echo(f"% {topic}: nothing new past the ledger's offsets", err=True)
    else:
        click.echo(f"% batch {result.batch_id}: {result.records} records appended to {table}", err=True)


if __name__ == "__main__":
    run(ledger_ingest)
