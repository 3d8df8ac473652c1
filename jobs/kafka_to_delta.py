"""A Kafka -> Delta streaming job with the pre-start gate in front of ``query.start()``.

The gate checks the checkpoint against the live cluster before Spark starts (before a SparkSession
even exists), so a job whose offsets aged out fails fast with a readable report instead of a
``KAFKA_DATA_LOSS`` stack trace, or is repaired within a loss budget:

    python jobs/kafka_to_delta.py -b kafka:9092 --topic orders --table /lake/orders \\
        --checkpoint /chk/orders --gate clamp --max-loss-records 10000

``--gate fail`` (default) exits 1 with the report; ``clamp`` repairs follower-style within
``--max-loss-records`` (refusing beyond it, exit 1) and starts; ``warn`` prints the report and starts.
On a cluster, run it with spark-submit and the Kafka connector and Delta on the classpath;
``--local-rig`` builds the project's local SparkSession instead (demo and tests). The gate reads
Kafka with ``--command-config``/``-X`` (librdkafka settings); Spark's source needs the same security
settings under their Java names: ``--spark-kafka-option security.protocol=SASL_SSL`` and so on.
"""

from __future__ import annotations

import click
from _options import kafka_options, run_job

from recovery.gate import prestart_gate
from recovery.model import GateMode, Policy


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@kafka_options
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--table", required=True, help="Delta table path to append to (the query's sink).")
@click.option("--checkpoint", required=True, help="Checkpoint location of the query.")
@click.option(
    "--gate",
    type=click.Choice([mode.value for mode in GateMode]),
    default=GateMode.FAIL.value,
    show_default=True,
    help="When the checkpoint would not restart cleanly: fail, repair within the budget (clamp), or warn.",
)
@click.option(
    "--max-loss-records", type=click.IntRange(min=0), help="clamp (required with it): refuse to lose more."
)
@click.option(
    "--spark-kafka-option",
    "spark_kafka_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Kafka client setting for Spark's source, Java name (security.protocol=SASL_SSL, ...); repeatable.",
)
@click.option("--available-now", is_flag=True, help="Process what is there now, then stop.")
@click.option("--local-rig", is_flag=True, help="Use the project's local SparkSession (recovery.local).")
def kafka_to_delta(
    kafka: object,
    topic: str,
    table: str,
    checkpoint: str,
    gate: str,
    max_loss_records: int | None,
    spark_kafka_options: tuple[str, ...],
    available_now: bool,
    local_rig: bool,
) -> None:
    """Stream TOPIC into the Delta table TABLE, after the pre-start gate has passed."""
    if gate == GateMode.CLAMP and max_loss_records is None:
        raise click.UsageError("--gate clamp needs --max-loss-records: the most records it may give up")
    source_options = {}
    for item in spark_kafka_options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--spark-kafka-option")
        source_options[f"kafka.{key}"] = value

    # The sink is this job's Delta table: in clamp mode the gate refuses a repair it would skip.
    report = prestart_gate(
        checkpoint,
        kafka,  # type: ignore[arg-type]
        mode=GateMode(gate),
        policy=Policy(max_loss_records=max_loss_records),
        sink=table,
    )
    click.echo(f"% gate passed: {'new query' if report is None else 'checkpoint checked'}", err=True)

    if local_rig:
        from recovery.local.spark import local_spark

        spark = local_spark("kafka-to-delta")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("kafka-to-delta").getOrCreate()
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)  # type: ignore[attr-defined]
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
    writer.start(table).awaitTermination()


if __name__ == "__main__":
    run_job(kafka_to_delta, prog_name="kafka_to_delta.py")
