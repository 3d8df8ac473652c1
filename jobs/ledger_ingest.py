"""A scheduled batch ingestion job whose Kafka positions live in a Delta offset ledger.

Each run reads ``spark.read.format("kafka")`` from the ledger's latest offsets to the current high
watermark, appends the records to a Delta table, then appends one ledger row per partition:

    python jobs/ledger_ingest.py -b kafka:9092 --topic orders --table /lake/orders \\
        --ledger /lake/ops/kafka_ledger --pipeline orders-hourly --gate clamp --max-loss-records 10000

The protocol that keeps the two tables consistent is the library's (``recovery.delta.ingest``): crash
recovery and the ledger gate run before a SparkSession exists, so a run whose offsets aged out fails
in seconds (``--gate fail``, the default, exits 1 with the findings; ``clamp`` appends correction
rows within ``--max-loss-records``; ``warn`` logs and goes on). This file holds only the Spark part
and the options.

On a cluster, run it with spark-submit and the Kafka connector and Delta on the classpath;
``--local-rig`` builds the project's local SparkSession instead (demo and tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click
from _options import gate_options, kafka_options, run_job

from recovery.core.model import GateMode, Policy, TopicPartition
from recovery.delta.ingest import (
    concurrent_run_stop,
    confirm_written,
    next_batch,
    prepare_run,
    record_batch,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recovery.delta.ledger_conf import LedgerConf
    from recovery.kafka.config import KafkaConfig


@dataclass(frozen=True)
class IngestResult:
    batch_id: int | None  # None: nothing new to read
    records: int
    start: Mapping[TopicPartition, int]
    end: Mapping[TopicPartition, int]
    recovered_batch: int | None = None  # a batch whose ledger rows a previous run did not write


def _offsets_json(topic: str, offsets: Mapping[TopicPartition, int]) -> str:
    """Spark's ``startingOffsets``/``endingOffsets`` JSON for one topic."""
    return json.dumps({topic: {str(tp.partition): o for tp, o in sorted(offsets.items())}})


def run_batch(
    spark: SparkSession,
    *,
    kafka: KafkaConfig,
    topic: str,
    data_table: str,
    conf: LedgerConf,
    recovered: int | None = None,
    stop_after_data: bool = False,
) -> IngestResult:
    """Read [ledger offsets, high watermark) with Spark, append it to ``data_table``, then record the
    batch in the ledger. ``stop_after_data`` stops between the two appends, as a crash would
    (failure drills and tests)."""
    batch = next_batch(conf, kafka, topic)
    if batch.empty:
        return IngestResult(None, 0, batch.start, batch.end, recovered_batch=recovered)
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("assign", json.dumps({topic: sorted(tp.partition for tp in batch.end)}))
        .option("startingOffsets", _offsets_json(topic, batch.start))
        .option("endingOffsets", _offsets_json(topic, batch.end))
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
    try:
        (
            frame.write.format("delta")
            .mode("append")
            .option("txnAppId", batch.app_id)
            .option("txnVersion", batch.batch_id)
            .option("userMetadata", batch.user_metadata())
            .save(data_table)
        )
    except Exception as exc:
        # Another run committed the same batch first: the documented one-line stop, not a Py4J trace.
        stop = concurrent_run_stop(exc, data_table, batch)
        if stop is None:
            raise
        raise stop from None
    confirm_written(data_table, batch, conf.storage_options)
    if not stop_after_data:
        record_batch(conf, batch)
    return IngestResult(batch.batch_id, batch.records, batch.start, batch.end, recovered_batch=recovered)


def ingest(
    spark: SparkSession,
    *,
    kafka: KafkaConfig,
    topic: str,
    data_table: str,
    conf: LedgerConf,
    gate: GateMode | None = GateMode.FAIL,
    policy: Policy | None = None,
    stop_after_data: bool = False,
) -> IngestResult:
    """One run: recover a crashed batch, gate (``None``: none, to see what Spark does on its own),
    then :func:`run_batch`."""
    recovered = prepare_run(conf, kafka, topic=topic, data_table=data_table, gate=gate, policy=policy)
    return run_batch(
        spark,
        kafka=kafka,
        topic=topic,
        data_table=data_table,
        conf=conf,
        recovered=recovered,
        stop_after_data=stop_after_data,
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@kafka_options
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--table", required=True, metavar="TABLE", help="Delta table to append the records to.")
@click.option(
    "--ledger", required=True, metavar="TABLE", help="Delta offset ledger table (created if missing)."
)
@click.option("--pipeline", required=True, help="This job's name in the ledger (and its txnAppId).")
@gate_options
@click.option("--local-rig", is_flag=True, help="Use the project's local SparkSession (recovery.local).")
def ledger_ingest(
    kafka: KafkaConfig,
    topic: str,
    table: str,
    ledger: str,
    pipeline: str,
    gate: GateMode,
    policy: Policy,
    local_rig: bool,
) -> None:
    """Append what TOPIC holds past the ledger's offsets to TABLE, then record the new offsets."""
    from recovery.delta.ledger_conf import make_conf

    conf = make_conf({"table": ledger, "pipeline": pipeline, "data_table": table})
    # Crash recovery and the gate run before a SparkSession exists: a run whose offsets aged out
    # fails in seconds.
    recovered = prepare_run(conf, kafka, topic=topic, data_table=table, gate=gate, policy=policy)
    if recovered is not None:
        click.echo(f"% batch {recovered}: ledger rows written from the data commit (a run died)", err=True)
    if local_rig:
        from recovery.local.spark import local_spark

        spark = local_spark("ledger-ingest")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"ledger-ingest {pipeline}").getOrCreate()
    result = run_batch(spark, kafka=kafka, topic=topic, data_table=table, conf=conf, recovered=recovered)
    if result.batch_id is None:
        click.echo(f"% {topic}: nothing new past the ledger's offsets", err=True)
    else:
        click.echo(f"% batch {result.batch_id}: {result.records} records appended to {table}", err=True)


if __name__ == "__main__":
    run_job(ledger_ingest, prog_name="ledger_ingest.py")
