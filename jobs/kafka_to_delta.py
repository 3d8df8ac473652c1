"""A Kafka -> Delta streaming job with the pre-start gate in front of ``query.start()`` and the
toolkit's listener on the running query.

The gate checks the checkpoint against the live cluster before Spark starts (before a SparkSession
even exists), so a job whose offsets aged out fails fast with a readable report instead of a
``KAFKA_DATA_LOSS`` stack trace, or is repaired within a loss budget:

    python jobs/kafka_to_delta.py -b kafka:9092 --topic orders --table /lake/orders \\
        --checkpoint /chk/orders --gate clamp --max-loss-records 10000 \\
        --monitor-group spark-orders-monitor --metrics-port 9108

``--gate fail`` (default) exits 1 with the report; ``clamp`` repairs follower-style within
``--max-loss-records`` (refusing beyond it, exit 1) and starts; ``warn`` prints the report and starts.

While the query runs, :class:`recovery.listener.QueryMonitor` keeps the checkpoint's heartbeat (the
repair commands use it to know the query is alive), logs one line per batch, and with
``--monitor-group`` commits each batch's end offsets to that monitor-only consumer group, so
kafka-consumer-groups shows the job's lag; ``--metrics-port`` serves the lag and rows/s as Prometheus
metrics. SIGTERM or Ctrl-C stops the query between batches and exits 0 (under spark-submit, signal
this Python process, not spark-submit's JVM: the JVM holds the SparkContext and would stop at once).

On a cluster, run it with spark-submit and the Kafka connector and Delta on the classpath
(jobs/README.md, ``make cluster``); ``--local-rig`` builds the project's local SparkSession instead
(demo and tests). The gate reads Kafka with ``--command-config``/``-X`` (librdkafka settings); Spark's
source needs the same security settings under their Java names: ``--spark-kafka-option
security.protocol=SASL_SSL`` and so on.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import click
from _options import gate_options, kafka_options, run_job

from recovery.core.model import GateMode, Isolation, Policy
from recovery.gate import prestart_gate
from recovery.kafka.config import KafkaConfig


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@kafka_options
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--table", required=True, help="Delta table path to append to (the query's sink).")
@click.option("--checkpoint", required=True, help="Checkpoint location of the query.")
@gate_options
@click.option(
    "--spark-kafka-option",
    "spark_kafka_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Kafka client setting for Spark's source, Java name (security.protocol=SASL_SSL, ...); repeatable.",
)
@click.option(
    "--monitor-group",
    metavar="NAME",
    help="Commit each batch's end offsets to this monitor-only consumer group (never one with members).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    metavar="PORT",
    help="Serve lag and rows/s as Prometheus metrics on http://0.0.0.0:PORT/metrics.",
)
@click.option(
    "--heartbeat-interval",
    type=click.FloatRange(min=1.0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Least time between two heartbeat writes to the checkpoint's _recovery/.",
)
@click.option(
    "--trigger-interval",
    metavar="DURATION",
    help="Start a micro-batch at most every DURATION ('30 seconds'); default: as soon as the last one ends.",
)
@click.option("--available-now", is_flag=True, help="Process what is there now, then stop.")
@click.option("--local-rig", is_flag=True, help="Use the project's local SparkSession (recovery.local).")
def kafka_to_delta(
    kafka: KafkaConfig,
    topic: str,
    table: str,
    checkpoint: str,
    gate: GateMode,
    policy: Policy,
    spark_kafka_options: tuple[str, ...],
    monitor_group: str | None,
    metrics_port: int | None,
    heartbeat_interval: float,
    trigger_interval: str | None,
    available_now: bool,
    local_rig: bool,
) -> None:
    """Stream TOPIC into the Delta table TABLE, after the pre-start gate has passed."""
    if trigger_interval and available_now:
        raise click.UsageError("--trigger-interval and --available-now exclude each other")
    source_options = {}
    for item in spark_kafka_options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--spark-kafka-option")
        source_options[f"kafka.{key}"] = value
    level = source_options.get("kafka.isolation.level", Isolation.READ_UNCOMMITTED.value)
    if level not in {i.value for i in Isolation}:
        raise click.BadParameter(
            f"isolation.level={level}: expected read_committed or read_uncommitted",
            param_hint="--spark-kafka-option",
        )

    # The sink is this job's Delta table: in clamp mode the gate refuses a repair it would skip.
    import pyspark  # its version only: spark-submit's pyspark.zip has no package metadata to ask

    report = prestart_gate(
        checkpoint, kafka, mode=gate, policy=policy, sink=table, spark_version=pyspark.__version__
    )
    click.echo(f"% gate passed: {'new query' if report is None else 'checkpoint checked'}", err=True)

    if local_rig:
        from recovery.local.spark import local_spark

        spark = local_spark("kafka-to-delta")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("kafka-to-delta").getOrCreate()

    from recovery.listener import QueryMonitor

    logging.getLogger("recovery.listener").setLevel(logging.INFO)  # its line per batch
    monitor = QueryMonitor.attach(
        spark,
        checkpoint,
        kafka,
        group=monitor_group,
        isolation=Isolation(level),
        interval_s=heartbeat_interval,
        metrics_port=metrics_port,
    )
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**source_options)
        .load()
        .selectExpr(
            "topic", "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
        )
    )
    writer = rows.writeStream.format("delta").option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_interval:
        writer = writer.trigger(processingTime=trigger_interval)

    stop = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        click.echo(f"% {signal.Signals(signum).name}: stopping the query after its current batch", err=True)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, request_stop)
    try:
        query = writer.start(table)
        # A short wait in a loop, not one blocking awaitTermination(): the signal handler runs
        # between calls, and query.stop() ends the query cleanly (offsets and commits consistent).
        while not query.awaitTermination(2):
            if stop.is_set():
                query.stop()
    finally:
        monitor.close()


if __name__ == "__main__":
    run_job(kafka_to_delta, prog_name="kafka_to_delta.py")
