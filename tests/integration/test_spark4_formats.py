"""Issue 25: checkpoints in the formats Spark 4.2 added, written by real Spark on the rig, then broken
under it: offset log v2 with named sources (``DataStreamReader.name``, ``sources/<name>/0``) and the
non-contiguous logs of async progress tracking. The prediction equals what Spark does on restart,
and after ``repair --execute`` the sink holds every record produced minus those lost, once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession
from streaming_job import NOW, Job, offsets, predicted, verdicts

from recovery.checkpoint import open_checkpoint
from recovery.core.model import CheckpointFile
from recovery.local import topics
from recovery.local.pipeline import start_kafka_to_delta

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


def test_named_sources_on_offset_log_v2_are_predicted_and_repaired(
    job, new_topic, produce, bootstrap, spark
) -> None:
    orders, payments = new_topic(2, suffix="-orders"), new_topic(2, suffix="-payments")
    produce(orders, 40, partitions=2, timestamp_ms=NOW)  # 20 per partition
    produce(payments, 20, partitions=2, timestamp_ms=NOW)
    j: Job = job([orders, payments])
    j.start = {"source_names": ["orders_src", "pay_src"]}
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


def test_async_progress_tracking_logs_are_read_as_spark_reads_them(
    job, new_topic, produce, bootstrap, spark, tmp_path: Path
) -> None:
    """Offsets and commits written every interval leave gaps; Spark restarts from the previous batch on
    disk. The toolkit no longer refuses such a checkpoint: it plans from that batch."""
    topic = new_topic(2)
    j: Job = job(topic)
    options = {
        "asyncProgressTrackingEnabled": "true",
        "asyncProgressTrackingCheckpointIntervalMs": "10000",
        "_asyncProgressTrackingOverrideSinkSupportCheck": "true",  # the Delta sink, as the rig's
    }
    query = start_kafka_to_delta(
        spark,
        bootstrap=bootstrap,
        topic=topic,
        table=str(j.table),
        checkpoint=str(j.checkpoint),
        processing_time="200 milliseconds",
        writer_options=options,
    )
    try:
        sent = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # batches until the log has a gap
            produce(topic, 4, partitions=2, start=sent, timestamp_ms=NOW)
            sent += 4
            time.sleep(0.3)
            ids = sorted(int(p.name) for p in (j.checkpoint / "offsets").glob("[0-9]*"))
            if len(ids) >= 3 and set(range(ids[0], ids[-1] + 1)) != set(ids):
                break
    finally:
        query.stop()
    chk = open_checkpoint(str(j.checkpoint))
    state = chk.restart_state()
    ids = chk.offset_batch_ids
    assert state.asynchronous and set(range(ids[0], ids[-1] + 1)) != set(ids)
    assert state.previous == max(i for i in ids if i < ids[-1])
    if state.start is not None:
        assert state.start in (CheckpointFile.offsets(ids[-1]), CheckpointFile.offsets(state.previous))
    report = j.validate(expect=0)  # read, not refused: every partition in range
    assert {r["verdict"] for r in report["partitions"]} == {"OK"}
    assert all(i["level"] != "error" for i in report["issues"])
    assert any("async progress tracking" in i["message"] for i in report["issues"])


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
