"""The rig's smoke pipeline: a Structured Streaming query from Kafka to a Delta table.

It is the shape of job this toolkit recovers: ``format("kafka")`` source, a checkpoint, a Delta sink.
``run_once`` processes what is available now (``Trigger.AvailableNow``) and stops, so a test or the
demo can stop the job, break Kafka under it, and restart it from the same checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")


def start_kafka_to_delta(
    spark: SparkSession,
    *,
    bootstrap: str,
    topic: str,
    table: str,
    checkpoint: str,
    options: Mapping[str, str] | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    rows = reader.load().selectExpr(
        "topic",
        "partition",
        "offset",
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "timestamp",
    )
    writer = (
        rows.writeStream.format("delta").option("checkpointLocation", checkpoint).trigger(availableNow=True)
    )
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start(table)


def run_once(spark: SparkSession, **kwargs: object) -> StreamingQuery:
    """Start the pipeline, process everything available now, and wait for it to stop.

    Raises pyspark's ``StreamingQueryException`` if the query fails (e.g. Kafka data loss).
    """
    query = start_kafka_to_delta(spark, **kwargs)  # type: ignore[arg-type]
    query.awaitTermination()
    return query
