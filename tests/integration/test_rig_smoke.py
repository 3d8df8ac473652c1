"""The rig is real: a Kafka -> Delta streaming query on the embedded broker and real Spark, and the
data-loss failures that this toolkit exists to prevent, caused the ways they happen in production.

Each restart test records what real Spark raised; later issues predict these outcomes.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from recovery.local import topics
from recovery.local.jars import PRIMARY_KAFKA_VERSION, PRIMARY_SPARK_LINE, installed_spark_line, versions
from recovery.local.pipeline import run_once
from recovery.local.spark import error_conditions, failure_conditions, jvm_versions

pytestmark = pytest.mark.fidelity  # run on every Spark line by `make test-matrix`

# CreateTime of the records: recent, or the broker's default 7-day retention deletes them at once.
BASE_TS = int(time.time()) * 1000
PARTITIONS = 3

NewTopic = Callable[..., str]  # the fixtures of tests/conftest.py
Produce = Callable[..., int]
Pipeline = Callable[[str], dict[str, str]]


def expected_rows(spark: SparkSession, topic: str, count: int, ts_ms: int, start: int = 0) -> DataFrame:
    """Rows the pipeline must write for keyed_records(count, partitions=3, start=start)."""
    ts = dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.UTC).replace(tzinfo=None)
    rows = [
        (topic, i % PARTITIONS, i // PARTITIONS, f"k{i}", f"v{i}", ts) for i in range(start, start + count)
    ]
    return spark.createDataFrame(
        rows, "topic string, partition int, offset long, key string, value string, timestamp timestamp"
    )


def checkpoint_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """Kafka offsets recorded in the newest offsets/N file (read directly, as an operator would)."""
    import json

    newest = max(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    source_line = newest.read_text().split("\n")[2]
    return {int(p): o for p, o in json.loads(source_line)[topic].items()}


def restart_failure(spark: SparkSession, **kwargs: object) -> list[tuple[str, str | None, str]]:
    with pytest.raises(StreamingQueryException) as failure:
        run_once(spark, **kwargs)
    return error_conditions(failure.value)


@pytest.fixture
def pipeline(spark: SparkSession, bootstrap: str, tmp_path: Path) -> Pipeline:
    def args(topic: str) -> dict[str, str]:
        return {
            "bootstrap": bootstrap,
            "topic": topic,
            "table": str(tmp_path / "table"),
            "checkpoint": str(tmp_path / "checkpoint"),
        }

    return args


def test_versions_are_the_pinned_ones(spark: SparkSession) -> None:
    used = versions()
    loaded = jvm_versions(spark)
    assert used["pyspark"] == loaded["Spark (JVM)"] == used["spark-sql-kafka-0-10"]
    if installed_spark_line() == PRIMARY_SPARK_LINE:
        assert used["pyspark"] == "4.2.0"
    assert loaded["kafka-clients (loaded by Spark)"] == used["kafka-clients (Spark)"]
    assert loaded["Delta (loaded by Spark)"] == used["delta-spark (JVM)"] == used["delta-spark (Python)"]
    # the primary broker, or the one KAFKA_VERSION asks for (`make test-kafka-matrix`)
    assert used["Kafka broker"] == (os.environ.get("KAFKA_VERSION") or PRIMARY_KAFKA_VERSION)


def test_kafka_to_delta_writes_exactly_the_produced_records(
    spark: SparkSession, new_topic: NewTopic, produce: Produce, pipeline: Pipeline
) -> None:
    topic = new_topic(PARTITIONS)
    produce(topic, 1000, timestamp_ms=BASE_TS)

    run_once(spark, **pipeline(topic))

    table = spark.read.format("delta").load(pipeline(topic)["table"])
    assert_df_equality(
        table, expected_rows(spark, topic, 1000, BASE_TS), ignore_row_order=True, ignore_nullable=True
    )
    assert checkpoint_offsets(Path(pipeline(topic)["checkpoint"]), topic) == {0: 334, 1: 333, 2: 333}


def test_delete_records_past_the_checkpoint_makes_spark_fail_with_data_loss(
    spark: SparkSession, bootstrap: str, new_topic: NewTopic, produce: Produce, pipeline: Pipeline
) -> None:
    topic = new_topic(PARTITIONS)
    produce(topic, 1000, timestamp_ms=BASE_TS)
    run_once(spark, **pipeline(topic))

    # While the job is down: 100 more records arrive, then the log start offset of partitions 0 and 1
    # moves past the checkpoint (334 and 333), as DeleteRecords or retention would do.
    produce(topic, 100, start=1000, timestamp_ms=BASE_TS)
    topics.delete_records(bootstrap, topic, {0: 350, 1: 350})
    assert [topics.offset_range(bootstrap, topic, p) for p in range(PARTITIONS)] == [
        (350, 367),
        (350, 367),
        (0, 366),
    ]

    chain = restart_failure(spark, **pipeline(topic))

    assert "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE" in failure_conditions(chain), chain
    messages = " ".join(message for _, _, message in chain)
    assert "Some data may have been lost because they are not available in Kafka any more" in messages
    # Nothing past the checkpoint was written: the failed batch is not committed.
    assert spark.read.format("delta").load(pipeline(topic)["table"]).count() == 1000


def test_time_retention_deleting_segments_makes_spark_fail_with_data_loss(
    spark: SparkSession, bootstrap: str, new_topic: NewTopic, produce: Produce, pipeline: Pipeline
) -> None:
    """Real retention: the broker deletes whole expired segments and the log start offset moves."""
    old = int(time.time() * 1000) - 2 * 24 * 3600 * 1000
    # A segment rolls when a record's CreateTime is segment.ms past the first record of the segment.
    topic = new_topic(PARTITIONS, {"segment.ms": "1000", "retention.ms": "-1"})
    produce(topic, 1000, timestamp_ms=old)  # segment 1, two days old
    run_once(spark, **pipeline(topic))

    produce(topic, 100, start=1000, timestamp_ms=old + 10_000)  # segment 2, unread, two days old
    produce(topic, 30, start=1100, timestamp_ms=int(time.time() * 1000))  # segment 3, current
    starts = {p: topics.offset_range(bootstrap, topic, p)[1] - 10 for p in range(PARTITIONS)}
    topics.alter_topic_config(bootstrap, topic, {"retention.ms": str(3600 * 1000)})

    deadline = time.monotonic() + 30
    while [topics.offset_range(bootstrap, topic, p)[0] for p in range(PARTITIONS)] != list(starts.values()):
        assert time.monotonic() < deadline, "retention did not delete the expired segments within 30 s"
        time.sleep(0.5)
    assert all(start > 333 for start in starts.values())  # past the checkpoint: data really lost

    chain = restart_failure(spark, **pipeline(topic))

    assert "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE" in failure_conditions(chain), chain


def test_recreated_topic_with_fewer_records_makes_spark_fail_with_offset_changed(
    spark: SparkSession, bootstrap: str, new_topic: NewTopic, produce: Produce, pipeline: Pipeline
) -> None:
    topic = new_topic(PARTITIONS)
    produce(topic, 1000, timestamp_ms=BASE_TS)
    run_once(spark, **pipeline(topic))

    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, PARTITIONS)
    produce(topic, 30, start=5000, timestamp_ms=BASE_TS)  # 10 per partition, far below 333

    chain = restart_failure(spark, **pipeline(topic))

    assert "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED" in failure_conditions(chain), chain
    # Spark names the first partition it checks; every partition went from 333 or 334 down to 10.
    # (Spark 3.5 says "Partition t-0's offset was changed from 333 to 10, some data ...".)
    changed = r"Partition \S+-[012](?:'s)? offset was changed from 33[34] to 10[.,]"
    assert re.search(changed, " ".join(message for _, _, message in chain)), chain
