"""Issue 25: checkpoints in the formats Spark 4.2 added, written by real Spark on the rig, then broken
under it: offset log v2 with named sources (``DataStreamReader.name``, ``sources/<name>/0``) and the
non-contiguous logs of async progress tracking. The prediction equals what Spark does on restart,
and after ``repair --execute`` the sink holds every record produced minus those lost, once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from streaming_job import NOW, Job, offsets, predicted, tree_digest, verdicts
from waiting import wait_until

from recovery.checkpoint import open_checkpoint
from recovery.core.model import GateMode
from recovery.core.spark_lines import CHECK_REPARTITION
from recovery.errors import GateFailed
from recovery.gate import prestart_gate
from recovery.kafka.config import KafkaConfig
from recovery.local import topics
from recovery.local.jars import installed_spark_line
from recovery.local.spark import error_conditions, failure_conditions

pytestmark = pytest.mark.fidelity  # run on every Spark line by `make test-matrix`

COULD_NOT_READ = "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
V2_NAMED = {
    "spark.sql.streaming.offsetLog.formatVersion": "2",
    "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
}


@contextmanager
def session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Run with ``conf`` set on the shared session, then put it back as it was."""
    before = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


ASYNC = {
    "asyncProgressTrackingEnabled": "true",
    "asyncProgressTrackingCheckpointIntervalMs": "5000",
    "_asyncProgressTrackingOverrideSinkSupportCheck": "true",  # the Delta sink, as the rig's
}


def start_async(j: Job, writer_options: dict[str, str] = ASYNC) -> StreamingQuery:
    """``j``'s query with async progress tracking, a batch every 200 ms until stopped."""
    return j.start(processing_time="200 milliseconds", writer_options=writer_options)


def committed_ends(j: Job) -> dict[int, int] | None:
    """The end offsets (per partition) of the last batch whose offsets and commit are both on disk."""
    done = {int(p.name) for p in (j.checkpoint / "commits").glob("[0-9]*")}
    done &= {int(p.name) for p in (j.checkpoint / "offsets").glob("[0-9]*")}
    if not done:
        return None
    last_line = (j.checkpoint / "offsets" / str(max(done))).read_text().splitlines()[-1]
    return {int(p): int(o) for p, o in json.loads(last_line)[j.topic].items()}


def produce_until_gap(j: Job, produce: Callable[..., int]) -> int:
    """Produce 4 records (2 per partition) every 0.3 s until the offset log has a gap (async progress
    tracking writes it every interval); how many were produced."""
    sent = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        produce(j.topic, 4, partitions=2, start=sent, timestamp_ms=NOW)
        sent += 4
        time.sleep(0.3)
        ids = sorted(int(p.name) for p in (j.checkpoint / "offsets").glob("[0-9]*"))
        if len(ids) >= 3 and set(range(ids[0], ids[-1] + 1)) != set(ids):
            return sent
    raise AssertionError("no gap in the offset log within 120 s")


def run_async(j: Job, *, rows: int | None = None, seconds: float = 120) -> set[str]:
    """Run ``j`` with async progress tracking (the only way such a checkpoint restarts) until the
    table holds ``rows`` rows, or ``seconds`` pass, or the query fails: its condition, if it did."""
    query = start_async(j)
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if query.awaitTermination(1):
                break
            if rows is not None and len(j.rows()) >= rows:
                break
    except StreamingQueryException as exc:
        return {failure_conditions(error_conditions(exc))[-1]}
    finally:
        query.stop()
    return set()


@pytest.mark.spark_since("4.2")  # DataStreamReader.name and offset log v2 came in 4.2
def test_named_sources_on_offset_log_v2_are_predicted_and_repaired(
    job, new_topic, produce, bootstrap, spark
) -> None:
    orders, payments = new_topic(2, suffix="-orders"), new_topic(2, suffix="-payments")
    produce(orders, 40, partitions=2, timestamp_ms=NOW)  # 20 per partition
    produce(payments, 20, partitions=2, timestamp_ms=NOW)
    j: Job = job([orders, payments])
    j.start_args = {"source_names": ["orders_src", "pay_src"]}
    with session_conf(spark, V2_NAMED):
        j.run()
        chk = open_checkpoint(str(j.checkpoint))
        latest = chk.latest_offsets()
        assert latest is not None and latest.version == 2
        assert [s.source_id for s in latest.sources] == ["orders_src", "pay_src"]
        assert (j.checkpoint / "sources" / "orders_src" / "0").is_file()
        produce(orders, 20, partitions=2, start=40, timestamp_ms=NOW)  # 10 more per partition, unread
        topics.delete_records(bootstrap, orders, {0: 25})  # 5 unread records of partition 0 gone
        before = j.rows()

        report = j.validate(expect=1)
        assert verdicts(report)[(orders, 0)] == ("BELOW_LOG_START", COULD_NOT_READ, 5)
        assert verdicts(report)[(orders, 1)] == ("OK", None, 0)
        assert {r["source"] for r in report["partitions"]} == {"orders_src", "pay_src"}
        assert j.copy("unrepaired").restart_conditions() == predicted(report) == {COULD_NOT_READ}

        plan = j.repair()
        assert [(c["source"], c["file"], c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [
            ("orders_src", "offsets/0", 0, 20, 25)
        ]
        assert open_checkpoint(str(j.checkpoint)).latest_offsets().version == 2  # format kept
        j.run()
    assert j.rows() == sorted(before + offsets(orders, {0: range(25, 30), 1: range(20, 30)}))


@pytest.mark.spark_since("4.2")  # offset log v2 and the restart check came in 4.2
def test_an_uncommitted_v2_batch_spark_cannot_restart_is_predicted_with_its_way_out(
    job, new_topic, produce, spark
) -> None:
    """Spark 4.2.0's own failure: an uncommitted batch whose v2 metadata lacks
    spark.sql.shuffle.partitions fails its restart check with None.get (recovery.core.spark_lines).
    The way out the report gives, the check turned off for one restart, runs, and the table then
    holds every record once."""
    topic = new_topic(2)
    produce(topic, 40, partitions=2, timestamp_ms=NOW)
    j: Job = job(topic)
    v2 = {"spark.sql.streaming.offsetLog.formatVersion": "2"}
    with session_conf(spark, v2):
        j.run()  # batch 0, the query's first run: offsets/0 holds no spark.sql.shuffle.partitions
        produce(topic, 20, partitions=2, start=40, timestamp_ms=NOW)
        with pytest.raises(StreamingQueryException, match="injected crash"):
            j.run(crash_on_batch=1)  # offsets/1 written, batch 1 never committed
        report = j.validate(expect=1)
        assert {r["verdict"] for r in report["partitions"]} == {"OK"}
        (error,) = [i["message"] for i in report["issues"] if i["level"] == "error"]
        assert "batch 1 is uncommitted" in error and "offsets/0 has no spark.sql.shuffle.partitions" in error
        assert "None.get" in error and f"{CHECK_REPARTITION}=false" in error
        with pytest.raises(StreamingQueryException, match=r"None\.get"):
            j.copy("unrepaired").run()
        # The gate refuses it in clamp mode too (no repair cures it) and writes nothing; told the
        # session turns the check off, it lets the query start.
        kafka, before = KafkaConfig(j.bootstrap), tree_digest(j.checkpoint)
        with pytest.raises(GateFailed, match="No repair cures this; nothing was written"):
            prestart_gate(str(j.checkpoint), kafka, mode=GateMode.CLAMP, spark_version="4.2.0")
        assert tree_digest(j.checkpoint) == before
        off = {CHECK_REPARTITION: "false"}
        assert prestart_gate(str(j.checkpoint), kafka, spark_version="4.2.0", spark_conf=off) is not None
        with session_conf(spark, {CHECK_REPARTITION: "false"}):
            j.run()  # the way out: batch 1 re-runs from the same offsets
        j.validate(expect=0)
    rows = j.rows()
    assert rows == offsets(topic, {0: range(30), 1: range(30)})


def test_a_loss_under_async_progress_tracking_is_predicted_and_repaired(
    job, new_topic, produce, bootstrap
) -> None:
    """The shapes on a non-contiguous log (offsets and commits written every interval): read as
    Spark reads it, not refused; Spark resumes after the last batch on disk, fails as predicted
    when records past it are deleted, and after the repair reads on from the log start.
    The query's batches are sized by maxOffsetsPerTrigger and minOffsetsPerTrigger meanwhile."""
    topic = new_topic(2)
    j: Job = job(topic, maxOffsetsPerTrigger="6", minOffsetsPerTrigger="2", maxTriggerDelay="2s")
    query = start_async(j)
    try:
        sent = produce_until_gap(j, produce)
        # One more batch once the interval has passed since the last batch written to disk, so the
        # last batch Spark runs is on disk and committed: the Delta sink then holds nothing past the
        # checkpoint. The backlog (batches of at most 6 records) drains first: a batch of it may be
        # written at any time until then, and the next batch within the interval of that would not.
        wait_until(lambda: len(j.rows()) == sent, "the backlog read", 60)
        time.sleep(6)
        produce(topic, 2, partitions=2, start=sent, timestamp_ms=NOW)
        sent += 2
        # Until the batch that read the last records is on disk, offsets and commit: the sink can
        # hold every row while that batch's offsets are still to be written (every interval), and a
        # query stopped then resumes from the batch before (a race this test once lost).
        deadline = time.monotonic() + 60
        while committed_ends(j) != {0: sent // 2, 1: sent // 2} or len(j.rows()) != sent:
            assert time.monotonic() < deadline, f"not on disk within 60 s: {committed_ends(j)}, {sent}"
            time.sleep(0.5)
    finally:
        query.stop()
    chk = open_checkpoint(str(j.checkpoint))
    state, ids = chk.restart_state(), chk.offset_batch_ids
    assert state.asynchronous and set(range(ids[0], ids[-1] + 1)) != set(ids)
    assert state.previous == max(i for i in ids if i < ids[-1])
    assert len(j.rows()) == sent
    healthy = j.validate(expect=0)  # read as Spark reads it, not refused
    assert all(i["level"] != "error" for i in healthy["issues"])
    assert any("async progress tracking" in i["message"] for i in healthy["issues"])
    position = {r["partition"]: r["checkpoint_offset"] for r in healthy["partitions"]}
    assert position == {0: sent // 2, 1: sent // 2}
    produce(topic, 40, partitions=2, start=sent, timestamp_ms=NOW)  # 20 more per partition
    topics.delete_records(bootstrap, topic, {0: position[0] + 5})

    report = j.validate(expect=1)
    assert verdicts(report) == {
        (topic, 0): ("BELOW_LOG_START", COULD_NOT_READ, 5),
        (topic, 1): ("OK", None, 0),
    }
    assert run_async(j.copy("unrepaired"), seconds=60) == predicted(report)

    plan = j.repair()
    assert [(c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [
        (0, position[0], position[0] + 5)
    ]
    assert run_async(j, rows=sent + 35) == set()
    rows = j.rows()
    half = sent // 2
    assert rows == offsets(topic, {0: [*range(half), *range(half + 5, half + 20)], 1: range(half + 20)})


def test_an_unreadable_initial_offsets_file_is_refused_only_if_spark_reads_it(
    job, new_topic, produce, bootstrap
) -> None:
    """sources/0/0 is read by initialOffset() only: a restart whose batch has start offsets for every
    source (here batch 1 from offsets/0) does not read it, and the toolkit does not refuse it."""
    topic = new_topic(2)
    produce(topic, 20, partitions=2, timestamp_ms=NOW)
    j: Job = job(topic)
    j.run()
    initial = j.checkpoint / "sources" / "0" / "0"
    initial.write_bytes(b"\x00v1\n{not json")
    (initial.parent / ".0.crc").unlink(missing_ok=True)  # a missing side file is accepted
    produce(topic, 10, partitions=2, start=20, timestamp_ms=NOW)
    before = j.rows()

    report = j.validate(expect=0)  # said, not refused
    assert {r["verdict"] for r in report["partitions"]} == {"OK"}
    assert j.restart_conditions() == set()  # Spark restarts without reading it
    assert j.rows() == sorted(before + offsets(topic, {0: range(10, 15), 1: range(10, 15)}))


STATE_V2 = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
}


@pytest.mark.spark_since("4.0")  # stateStore.checkpointFormatVersion came in 4.0
def test_a_stateful_query_on_state_checkpoint_v2_keeps_its_state_through_a_repair(
    job, new_topic, produce, bootstrap, spark
) -> None:
    """RocksDB state with checkpoint format v2: commits/N carry the state's unique ids and the
    state files their own JSON checksums. The repair touches neither, and the state loads after it:
    keys seen before the repair are still dropped as duplicates."""
    topic = new_topic(2)
    produce(topic, 40, partitions=2, timestamp_ms=NOW)  # keys k0..k39, 20 per partition
    j: Job = job(topic)

    def run(target: Job) -> set[str]:
        """The stateful query on ``target``'s checkpoint: its failure condition, if it failed."""
        rows = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key")
            .dropDuplicates(["key"])
        )
        query = (
            rows.writeStream.format("delta")
            .option("checkpointLocation", str(target.checkpoint))
            .trigger(availableNow=True)
            .start(str(target.table))
        )
        try:
            query.awaitTermination()
        except StreamingQueryException as exc:
            return {failure_conditions(error_conditions(exc))[-1]}
        return set()

    with session_conf(spark, STATE_V2):
        assert run(j) == set()
        commit = (j.checkpoint / "commits" / "0").read_text()
        assert commit.startswith("v2\n") and "stateUniqueIds" in commit
        state = {p: p.read_bytes() for p in (j.checkpoint / "state").rglob("*") if p.is_file()}
        # Spark's own JSON checksum of each state file (not Hadoop's hidden .N.crc): from 4.1 on
        own_crc = any(p.name.endswith(".crc") and not p.name.startswith(".") for p in state)
        assert own_crc == (installed_spark_line() != "4.0")
        produce(topic, 20, partitions=2, start=0, timestamp_ms=NOW)  # k0..k19 again: offsets 20..29
        produce(topic, 20, partitions=2, start=100, timestamp_ms=NOW)  # k100..k119: offsets 30..39
        topics.delete_records(bootstrap, topic, {0: 25})  # 5 of the repeated keys gone

        report = j.validate(expect=1)
        assert verdicts(report)[(topic, 0)] == ("BELOW_LOG_START", COULD_NOT_READ, 5)
        assert run(j.copy("unrepaired")) == predicted(report)
        plan = j.repair()
        assert [(c["file"], c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [
            ("offsets/0", 0, 20, 25)
        ]
        assert {p: p.read_bytes() for p in (j.checkpoint / "state").rglob("*") if p.is_file()} == state
        assert (j.checkpoint / "commits" / "0").read_text() == commit
        assert run(j) == set()
    keys = [r.key for r in spark.read.format("delta").load(str(j.table)).select("key").collect()]
    assert sorted(keys) == sorted([f"k{i}" for i in range(40)] + [f"k{i}" for i in range(100, 120)])
