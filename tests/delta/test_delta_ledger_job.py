"""jobs/ledger_ingest.py on the real rig: real Kafka, real Spark reading ``format("kafka")`` in batch,
real delta-spark appends, and the ledger in Delta.

Retention deletes records the ledger has not read yet: real Spark fails on its own, the gate stops
the run, ``ledger repair`` reports the loss, and the next run recovers with exactly that loss. A run
that dies between the data append and the ledger append is completed by the next one, without
duplicates.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

from recovery.core.model import TopicPartition
from recovery.delta.ingest import LedgerBatch, concurrent_run_stop
from recovery.delta.ledger_conf import make_conf
from recovery.delta.ledger_table import read_ledger
from recovery.errors import LedgerGateFailed, LedgerJobStopped
from recovery.kafka.config import KafkaConfig
from recovery.local import topics
from recovery.local.spark import error_conditions

pytestmark = pytest.mark.integration

JOB = Path(__file__).resolve().parents[2] / "jobs" / "ledger_ingest.py"


def _job() -> ModuleType:
    if str(JOB.parent) not in sys.path:
        sys.path.insert(0, str(JOB.parent))  # the job imports its sibling _options, as when run
    spec = importlib.util.spec_from_file_location("ledger_ingest", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ledger_ingest"] = module
    spec.loader.exec_module(module)
    return module


def _keys(spark: SparkSession, table: Path) -> list[tuple[int, int]]:
    rows = spark.read.format("delta").load(str(table)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def test_ledger_job_recovers_from_retention_loss_with_exactly_the_reported_loss(
    spark: SparkSession,
    tmp_path: Path,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    cli: Callable[..., Any],
) -> None:
    job = _job()
    kafka = KafkaConfig(bootstrap, timeout_s=20)
    topic = new_topic(partitions=2)
    data, ledger = tmp_path / "data", tmp_path / "ledger"
    conf = make_conf({"table": str(ledger), "pipeline": "orders-hourly"})
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    def ingest(**kw: Any) -> Any:
        return job.ingest(spark, kafka=kafka, topic=topic, data_table=str(data), conf=conf, **kw)

    produce(topic, 40, partitions=2)  # offsets 0-19 in each partition
    first = ingest()
    assert (first.batch_id, first.records) == (0, 40)
    assert read_ledger(conf).positions == {p0: 20, p1: 20}

    produce(topic, 40, partitions=2, start=40)  # offsets 20-39
    topics.delete_records(bootstrap, topic, {0: 30})  # retention took 20-29 of partition 0, unread

    # Real Spark on its own: the batch read from the ledger's offsets fails.
    with pytest.raises(Exception) as failure:
        ingest(gate=None)
    conditions = [c for _, c, _ in error_conditions(failure.value)]
    assert "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE" in conditions, conditions

    with pytest.raises(LedgerGateFailed, match="BELOW_LOG_START"):
        ingest()

    args = ("ledger", "repair", str(ledger), "--pipeline", "orders-hourly", "-b", bootstrap)
    repair = cli(*args, "--execute", "--output", "json")
    assert repair.exit_code == 0, repair.stderr
    reported = json.loads(repair.stdout)["totals"]["lost"]
    assert reported == 10

    second = ingest()
    assert (second.batch_id, second.records) == (2, 30)  # batch 1 is the correction
    lost = {(0, o) for o in range(20, 30)}
    everything = {(p, o) for p in (0, 1) for o in range(40)}
    assert _keys(spark, data) == sorted(everything - lost)
    assert len(everything) - len(_keys(spark, data)) == reported

    # A run that dies between the data append and the ledger append is completed by the next run.
    produce(topic, 10, partitions=2, start=80)  # offsets 40-44
    crashed = ingest(stop_after_data=True)
    assert crashed.batch_id == 3 and read_ledger(conf).next_batch_id == 3
    produce(topic, 10, partitions=2, start=90)  # offsets 45-49
    resumed = ingest()
    assert (resumed.recovered_batch, resumed.batch_id, resumed.records) == (3, 4, 10)
    keys = _keys(spark, data)
    assert len(keys) == len(set(keys))  # nothing twice
    assert set(keys) == ({(p, o) for p in (0, 1) for o in range(50)} - lost)
    assert read_ledger(conf).positions == {p0: 50, p1: 50}


def test_a_crashed_run_is_not_loss_and_overlapping_runs_stop_in_one_line(
    spark: SparkSession,
    tmp_path: Path,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    cli: Callable[..., Any],
) -> None:
    job = _job()
    kafka = KafkaConfig(bootstrap, timeout_s=20)
    topic = new_topic(partitions=1)
    data, ledger = tmp_path / "data", tmp_path / "ledger"
    conf = make_conf({"table": str(ledger), "pipeline": "orders-hourly", "data_table": str(data)})
    p0 = TopicPartition(topic, 0)

    def ingest(**kw: Any) -> Any:
        return job.ingest(spark, kafka=kafka, topic=topic, data_table=str(data), conf=conf, **kw)

    produce(topic, 10, partitions=1)
    assert ingest().batch_id == 0  # [0, 10)
    produce(topic, 20, partitions=1, start=10)
    assert ingest(stop_after_data=True).batch_id == 1  # [10, 30) in the data table; the run dies
    topics.delete_records(bootstrap, topic, {0: 20})  # retention: 10-19 are gone from Kafka

    # The ledger alone says 10 records lost; with the data table, batch 1 is judged as written.
    base = ("ledger", "validate", str(ledger), "--pipeline", "orders-hourly", "-b", bootstrap)
    blind = cli(*base, "--output", "json")
    assert (blind.exit_code, json.loads(blind.stdout)["partitions"][0]["records_lost"]) == (1, 10)
    seen = cli(*base, "--data-table", str(data), "--output", "json")
    assert seen.exit_code == 0, seen.stdout
    assert json.loads(seen.stdout)["partitions"][0]["verdict"] == "OK"

    repair = cli(
        "ledger", "repair", str(ledger), "--pipeline", "orders-hourly", "-b", bootstrap,
        "--data-table", str(data), "--execute", "--output", "json",
    )  # fmt: skip
    assert repair.exit_code == 0, repair.stderr
    assert json.loads(repair.stdout)["totals"] == {"lost": 0, "skipped": 0, "replayed": 0}
    assert read_ledger(conf).positions == {p0: 30}
    keys = _keys(spark, data)
    assert keys == [(0, o) for o in range(30)]  # ledger and data agree: nothing lost, nothing twice

    # Two overlapping runs of the same batch: one records it, the other stops with one line.
    produce(topic, 20, partitions=1, start=30)  # offsets 30-49
    outcomes: list[Any] = []

    def run() -> None:
        try:
            outcomes.append(job.run_batch(spark, kafka=kafka, topic=topic, data_table=str(data), conf=conf))
        except Exception as exc:  # the outcome under test
            outcomes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stopped = [o for o in outcomes if isinstance(o, BaseException)]
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(stopped) == 1 and len(done) == 1, outcomes
    (stop,) = stopped
    assert isinstance(stop, LedgerJobStopped), repr(stop)
    assert "\n" not in str(stop) and "another run" in str(stop)
    assert done[0].batch_id == 2
    keys = _keys(spark, data)
    assert keys == [(0, o) for o in range(50)]  # data safe: every record once
    assert read_ledger(conf).positions == {p0: 50}


def test_a_data_append_that_loses_to_another_runs_commit_is_the_one_line_stop(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Made deterministic: this run's Spark append reads the app transaction, then (while its task
    runs) the other run commits the same batch; Delta rejects this run's commit."""
    data, marker = tmp_path / "data", tmp_path / "task-started"
    app, tp = "orders-hourly", TopicPartition("orders", 0)
    write_deltalake(str(data), pa.table({"offset": pa.array([], pa.int64())}))  # the table exists
    batch = LedgerBatch(app, 1, "orders", {tp: 0}, {tp: 10}, read_at=0)

    def slow(offset: int) -> int:
        Path(marker).touch()  # the write's task runs: Delta has read the app transaction by now
        time.sleep(8)
        return offset

    frame = spark.range(1).select(udf(lambda o: slow(o), "long")("id").alias("offset"))

    def other_run() -> None:
        while not marker.exists():
            time.sleep(0.05)
        write_deltalake(
            str(data),
            pa.table({"offset": pa.array([0], pa.int64())}),
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction(app, 1)]),
        )

    thread = threading.Thread(target=other_run)
    thread.start()
    with pytest.raises(Exception) as lost:
        (
            frame.write.format("delta")
            .mode("append")
            .option("txnAppId", app)
            .option("txnVersion", 1)
            .save(str(data))
        )
    thread.join()
    stop = concurrent_run_stop(lost.value, str(data), batch)
    assert isinstance(stop, LedgerJobStopped), repr(lost.value)[:300]
    assert "\n" not in str(stop)
    assert "another run of orders-hourly committed" in str(stop) and "DELTA_CONCURRENT_TRANSACTION" in str(
        stop
    )
    assert DeltaTable(str(data)).transaction_version(app) == 1  # the other run's commit stands
