"""Issue 14's failure shapes on the real rig: the predicted condition (or "runs") equals what Spark
4.x does on restart from a copy of the checkpoint; with failOnDataLoss=false Spark skips exactly
``silently_skipped`` records; after ``repair --execute`` and a restart the sink holds every record
produced minus those lost and skipped, with no duplicates.

Spark runs are slow (the machine has 2 cores): each test keeps to a handful.
"""

from __future__ import annotations

import time

from streaming_job import NOW, offsets, predicted, verdicts

from recovery.local import topics

CHANGED = "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED"
DELETED = "KAFKA_DATA_LOSS.PARTITIONS_DELETED"
COULD_NOT_READ = "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"


def skipped(report: dict[str, object]) -> int:
    return sum(r["silently_skipped"] for r in report["partitions"])  # type: ignore[index,union-attr,misc]


def test_recreated_with_fewer_partitions_and_more_records(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 60, timestamp_ms=NOW)  # 20 per partition
    j = job(topic)
    j.run()
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    produce(topic, 80, partitions=2, start=1000, timestamp_ms=NOW)  # 40 per partition
    before = j.rows()

    report = j.validate(expect=1)
    assert verdicts(report) == {
        (topic, 0): ("TOPIC_RECREATED", None, 0),
        (topic, 1): ("TOPIC_RECREATED", None, 0),
        (topic, 2): ("PARTITION_GONE", DELETED, 0),
    }
    assert skipped(report) == 40  # the new topic's records below the old positions
    assert j.copy("unrepaired").restart_conditions() == predicted(report) == {DELETED}
    lenient = j.lenient("lenient")
    lenient.run()
    read = [r for r in lenient.rows() if r not in before]
    assert read == offsets(topic, {0: range(20, 40), 1: range(20, 40)})
    assert 80 - len(read) == skipped(report)

    refused = j.repair("--max-loss-records", "0", expect=1)
    assert "recreated" in refused["refused"]
    plan = j.repair()
    assert sorted((c["partition"], c["old"], c["new"]) for c in plan["changes"]) == [
        (0, 20, 0),
        (1, 20, 0),
        (2, 20, None),
    ]
    assert plan["totals"] == {"lost": 0, "skipped": 0, "replayed": 40, "lost_unknown": True}
    j.run()
    # every record of both topics once (old and new share offsets 0..19: compared as multisets)
    assert j.rows() == sorted(before + offsets(topic, {0: range(40), 1: range(40)}))


def test_a_rerun_batch_the_delta_sink_holds_is_skipped_without_reading(
    job, new_topic, produce, bootstrap
) -> None:
    topic = new_topic(2)
    produce(topic, 200, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()  # batch 0: [0, 100)
    produce(topic, 40, partitions=2, start=200, timestamp_ms=NOW)
    j.run()  # batch 1: [100, 120), in the sink
    j.uncommit(1)  # crashed after the Delta sink committed batch 1, before commits/1
    topics.delete_records(bootstrap, topic, {0: 115})  # inside batch 1's range

    blind = j.validate(expect=1)
    assert verdicts(blind)[(topic, 0)] == ("BELOW_LOG_START", COULD_NOT_READ, 15)
    assert any("depends on the sink" in n for n in blind["partitions"][0]["notes"])
    report = j.validate("--sink", str(j.table), expect=0)
    assert verdicts(report) == {(topic, 0): ("OK", None, 0), (topic, 1): ("OK", None, 0)}
    assert predicted(report) == set()
    assert j.copy("unrepaired").restart_conditions() == set()  # DeltaSink skips batch 1, no read

    # The executor re-plans with the same sink facts: nothing to change, nothing refused.
    plan = j.repair("--sink", str(j.table), expect=0)
    assert plan["changes"] == [] and plan["totals"]["lost"] == 0 and plan["executed"]
    j.run()
    rows = j.rows()
    assert rows == offsets(topic, {0: range(120), 1: range(120)})  # nothing lost, no duplicates
    assert len(rows) == len(set(rows))


def test_a_rerun_after_spark_failed_once_on_a_recreated_topic(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(2)
    produce(topic, 200, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()  # position 100 per partition
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    produce(topic, 20, partitions=2, start=1000, timestamp_ms=NOW)  # 10 per partition
    assert j.restart_conditions() == {CHANGED}  # writes offsets/1 = 10 per partition, fails

    report = j.validate(expect=1)
    assert report["rerun"] is True and report["batch_id"] == 1
    assert {v for v in verdicts(report).values()} == {("BEYOND_LOG_END", CHANGED, 0)}
    assert skipped(report) == 20
    assert j.copy("again").restart_conditions() == predicted(report)
    lenient = j.lenient("lenient")
    before = lenient.rows()
    lenient.run()
    assert 20 - len([r for r in lenient.rows() if r not in before]) == skipped(report)

    plan = j.repair("--on-beyond-end", "earliest")
    assert sorted((c["file"], c["partition"], c["old"], c["new"]) for c in plan["changes"]) == [
        ("offsets/0", 0, 100, 0),
        ("offsets/0", 1, 100, 0),
        ("offsets/1", 0, 10, 0),
        ("offsets/1", 1, 10, 0),
    ]
    j.run()
    rows = j.rows()
    assert rows == offsets(topic, {p: [*range(100), *range(10)] for p in range(2)})


def test_recreated_with_more_records_and_no_recorded_ids_is_told_by_timestamps(
    job, new_topic, produce, bootstrap
) -> None:
    topic = new_topic(2)
    produce(topic, 100, partitions=2, timestamp_ms=NOW)  # 50 per partition, before the batch
    j = job(topic)
    j.run()
    assert not (j.checkpoint / "_recovery").exists()  # no topic id ever recorded
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    # 80 per partition, stamped 20 minutes after the batch: past the clock-skew allowance
    later = int(time.time() * 1000) + 20 * 60 * 1000
    produce(topic, 160, partitions=2, start=1000, timestamp_ms=later)
    before = j.rows()

    report = j.validate(expect=1)
    assert {v for v in verdicts(report).values()} == {("TOPIC_RECREATED", None, 0)}
    assert skipped(report) == 100
    unrepaired = j.copy("unrepaired")
    assert unrepaired.restart_conditions() == set()  # Spark runs ...
    read = [r for r in unrepaired.rows() if r not in before]
    assert 160 - len(read) == skipped(report)  # ... skipping the first 50 of each partition

    # The executor re-plans with the same timestamp evidence, so the plan is not outdated.
    plan = j.repair(expect=0)
    assert sorted((c["partition"], c["old"], c["new"]) for c in plan["changes"]) == [(0, 50, 0), (1, 50, 0)]
    assert plan["totals"] == {"lost": 0, "skipped": 0, "replayed": 100, "lost_unknown": True}
    assert plan["executed"] and plan["backup_id"]
    j.run()
    # All 160 records of the new topic reach the sink; offsets 0-49 were also the old topic's.
    assert len(j.rows()) == len(before) + 160
