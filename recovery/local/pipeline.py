"""The rig's smoke pipeline: a Structured Streaming query from Kafka to a Delta table.

It is the shape of job this toolkit recovers: ``format("kafka")`` source, a checkpoint, a Delta sink.
``run_once`` processes what is available now (``Trigger.AvailableNow``) and stops, so a test or the
demo can stop the job, break Kafka under it, and restart it from the same checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")


class InjectedCrash(RuntimeError):
    """Raised inside a batch by ``crash_on_batch``: offsets/N is written, the sink and commits/N are not."""


def start_kafka_to_delta(
    spark: SparkSession,
    *,
    bootstrap: str,
    topic: str | Sequence[str],
    table: str,
    checkpoint: str,
    options: Mapping[str, str] | None = None,
    query_name: str | None = None,
    crash_on_batch: int | None = None,
    processing_time: str | None = None,
    source_names: Sequence[str] | None = None,
    writer_options: Mapping[str, str] | None = None,
) -> StreamingQuery:
    """Start the pipeline. Several topics give several Kafka sources (one per topic, unioned), so
    the checkpoint's offsets files carry one line per source.

    ``crash_on_batch`` fails that batch before anything reaches the table, as a crash between
    Spark's write-ahead ``offsets/N`` and ``commits/N`` does; the sink is then a ``foreachBatch``
    that appends to the same Delta table idempotently (txnAppId per checkpoint, txnVersion = batch id).

    ``processing_time`` (e.g. ``"1 hour"``) runs the query continuously with that trigger instead of
    ``availableNow``: the first batch starts at once, and the query keeps running until stopped.

    ``source_names`` names the sources, one per topic (``DataStreamReader.name``, Spark 4.2: the
    checkpoint keeps them as ``sources/<name>/``); ``writer_options`` go to the stream writer
    (``asyncProgressTrackingEnabled``, say).
    """
    topics = [topic] if isinstance(topic, str) else list(topic)
    frames = []
    for i, name in enumerate(topics):
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
        )
        for key, value in (options or {}).items():
            reader = reader.option(key, value)
        if source_names:
            reader = reader.name(source_names[i])
        frames.append(
            reader.load().selectExpr(
                "topic",
                "partition",
                "offset",
                "CAST(key AS STRING) AS key",
                "CAST(value AS STRING) AS value",
                "timestamp",
            )
        )
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    writer = rows.writeStream.option("checkpointLocation", checkpoint)
    for key, value in (writer_options or {}).items():
        writer = writer.option(key, value)
    writer = (
        writer.trigger(processingTime=processing_time)
        if processing_time
        else writer.trigger(availableNow=True)
    )
    if query_name:
        writer = writer.queryName(query_name)
    if crash_on_batch is None:
        return writer.format("delta").start(table)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if batch_id == crash_on_batch:
            raise InjectedCrash(f"injected crash in batch {batch_id}")
        (
            batch.write.format("delta")
            .mode("append")
            .option("txnAppId", f"stream-recovery-rig:{checkpoint}")
            .option("txnVersion", batch_id)
            .save(table)
        )

    return writer.foreachBatch(write_batch).start()


def run_once(spark: SparkSession, **kwargs: object) -> StreamingQuery:
    """Start the pipeline, process everything available now, and wait for it to stop.

    Raises pyspark's ``StreamingQueryException`` if the query fails (e.g. Kafka data loss).
    """
    query = start_kafka_to_delta(spark, **kwargs)  # type: ignore[arg-type]
    query.awaitTermination()
    return query
