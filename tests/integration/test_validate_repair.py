"""validate -> restart without repair -> repair --execute -> restart, on real Kafka and real Spark.

Each scenario breaks a real Kafka -> Delta streaming query the way production does, then checks:
the findings and Spark's predicted error; that real Spark, restarted from an untouched copy of the
checkpoint, fails (or silently skips) exactly as predicted; that ``repair --execute`` applies the
plan; and that real Spark then runs and the Delta table holds exactly the expected rows, with no
duplicates and the loss the plan reported.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from pyspark.errors import StreamingQueryException
from streaming_job import NOW, offsets, predicted, tree_digest, verdicts

from recovery.local import topics
from recovery.local.jars import installed_spark_line
from recovery.local.pipeline import InjectedCrash
from recovery.local.spark import failure_conditions

pytestmark = pytest.mark.fidelity  # run on every Spark line by `make test-matrix`

# -- scenarios -----------------------------------------------------------------------------------


def test_retention_loss_after_a_committed_batch(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    produce(topic, 60, start=300, timestamp_ms=NOW)  # offsets 100..119 in each partition
    topics.delete_records(bootstrap, topic, {0: 110, 1: 115})

    report = j.validate(expect=1)
    assert verdicts(report) == {
        (topic, 0): ("BELOW_LOG_START", "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE", 10),
        (topic, 1): ("BELOW_LOG_START", "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE", 15),
        (topic, 2): ("OK", None, 0),
    }
    chain = j.copy("unrepaired").restart_failure()
    assert {failure_conditions(chain)[-1]} <= predicted(report) != set()
    # What the running Spark prints is what `--spark-version` says it prints (3.5: its own words).
    worded = j.validate("--spark-version", installed_spark_line(), expect=1)
    said = {r["spark_says"] for r in worded["partitions"] if r["spark_says"]}
    printed = "\n".join(
        f"{cls.rsplit('.', 1)[-1]}: {message} [{condition}]" for cls, condition, message in chain
    )
    # Spark fails on the first partition it reads, either of the two; "…" stands for the group id.
    assert any(re.search(re.escape(text).replace("…", ".*?"), printed) for text in said), (said, printed)

    plan = j.repair()
    assert plan["totals"] == {"lost": 25, "skipped": 0, "replayed": 0}
    assert [(c["file"], c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [
        ("offsets/0", 0, 100, 110),
        ("offsets/0", 1, 100, 115),
    ]
    j.validate(expect=0)
    j.run()
    assert j.rows() == offsets(
        topic, {0: [*range(100), *range(110, 120)], 1: [*range(100), *range(115, 120)], 2: range(120)}
    )


def test_retention_loss_inside_an_uncommitted_batch(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()  # batch 0: [0, 100) per partition, committed
    produce(topic, 60, start=300, timestamp_ms=NOW)
    with pytest.raises(StreamingQueryException, match="injected crash"):
        j.run(crash_on_batch=1)  # offsets/1 = 120 per partition written, batch 1 never committed
    assert InjectedCrash.__name__  # the crash is ours, raised inside the batch
    assert sorted(p.name for p in (j.checkpoint / "commits").iterdir() if p.name.isdigit()) == ["0"]
    topics.delete_records(bootstrap, topic, {0: 110})

    report = j.validate(expect=1)
    assert report["rerun"] is True and report["batch_id"] == 1
    assert verdicts(report)[(topic, 0)] == (
        "BELOW_LOG_START",
        "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE",
        10,
    )
    assert j.copy("unrepaired").restart_conditions() == predicted(report)

    plan = j.repair()
    assert [(c["file"], c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [
        ("offsets/0", 0, 100, 110)
    ]
    assert plan["totals"]["lost"] == 10
    j.run()
    assert j.rows() == offsets(topic, {0: [*range(100), *range(110, 120)], 1: range(120), 2: range(120)})


def test_topic_recreated_with_fewer_records(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 3)
    produce(topic, 30, start=1000, timestamp_ms=NOW)  # 10 per partition, far below 100

    report = j.validate(expect=1)
    assert {v for v in verdicts(report).values()} == {
        ("BEYOND_LOG_END", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED", 0)
    }
    # failOnDataLoss=false would skip the 10 records now in each partition
    assert {r["silently_skipped"] for r in report["partitions"]} == {10}
    assert j.copy("unrepaired").restart_conditions() == predicted(report)
    lenient = j.lenient("lenient")
    lenient.run()
    assert len(lenient.rows()) == 300  # nothing of the new topic read: 30 skipped

    plan = j.repair("--on-beyond-end", "earliest")
    assert plan["totals"] == {"lost": 0, "skipped": 0, "replayed": 30}
    j.run()
    assert j.rows() == offsets(topic, {p: [*range(100), *range(10)] for p in range(3)})


def test_topic_recreated_and_grown_past_the_checkpoint(job, new_topic, produce, bootstrap) -> None:
    """Spark cannot see this one: it silently skips the new topic's first records. The topic id
    recorded by an earlier `repair --execute` makes it visible."""
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    first = j.repair()  # nothing to change; records the topic id
    assert first["changes"] == []
    assert json.loads((j.checkpoint / "_recovery/topic-ids.json").read_text())["topic_ids"].keys() == {topic}
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 3)
    produce(topic, 450, start=1000, timestamp_ms=NOW)  # 150 per partition, past 100

    report = j.validate(expect=1)
    assert {v for v in verdicts(report).values()} == {("TOPIC_RECREATED", None, 0)}
    assert {r["silently_skipped"] for r in report["partitions"]} == {100}
    unrepaired = j.copy("unrepaired")
    assert unrepaired.restart_conditions() == set()  # Spark runs ...
    new_rows = [r for r in unrepaired.rows() if r not in offsets(topic, {p: range(100) for p in range(3)})]
    assert new_rows == offsets(topic, {p: range(100, 150) for p in range(3)})  # ... skipping 100 each

    plan = j.repair()
    assert {(c["old"], c["new"]) for c in plan["changes"]} == {(100, 0)}
    j.run()
    assert j.rows() == offsets(topic, {p: [*range(100), *range(150)] for p in range(3)})


def test_partition_added_with_a_log_start_past_zero(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(2)
    produce(topic, 200, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    topics.add_partitions(bootstrap, topic, 3)
    topics.produce(
        bootstrap, topic, [topics.Record(f"n{i}", "v", partition=2, timestamp_ms=NOW) for i in range(20)]
    )
    topics.delete_records(bootstrap, topic, {2: 5})

    report = j.validate(expect=1)
    assert verdicts(report)[(topic, 2)] == (
        "NEW_PARTITION",
        "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
        5,
    )
    assert j.copy("unrepaired").restart_conditions() == predicted(report)

    plan = j.repair()
    assert [(c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [(2, None, 5)]
    j.run()
    assert j.rows() == offsets(topic, {0: range(100), 1: range(100), 2: range(5, 20)})


def test_topic_recreated_with_fewer_partitions(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    produce(topic, 30, partitions=2, start=1000, timestamp_ms=NOW)

    report = j.validate(expect=1)
    # Kafka never removes partitions: every partition of a topic that lost some was recreated
    assert verdicts(report) == {
        (topic, 0): ("TOPIC_RECREATED", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED", 0),
        (topic, 1): ("TOPIC_RECREATED", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED", 0),
        (topic, 2): ("PARTITION_GONE", "KAFKA_DATA_LOSS.PARTITIONS_DELETED", 0),
    }
    observed = j.copy("unrepaired").restart_conditions()
    # getOffsetRangesFromResolvedOffsets checks deleted partitions before changed offsets
    assert observed == {"KAFKA_DATA_LOSS.PARTITIONS_DELETED"}

    plan = j.repair("--on-beyond-end", "earliest")
    assert sorted((c["partition"], c["old"], c["new"]) for c in plan["changes"]) == [
        (0, 100, 0),
        (1, 100, 0),
        (2, 100, None),
    ]
    j.run()
    assert j.rows() == offsets(
        topic, {0: [*range(100), *range(15)], 1: [*range(100), *range(15)], 2: range(100)}
    )


def test_read_committed_judges_against_the_last_stable_offset(job, new_topic, bootstrap) -> None:
    topic = new_topic(1)
    committed = topics.transactional_producer(bootstrap, f"{topic}-a")
    committed.begin_transaction()
    for i in range(30):
        committed.produce(topic, key=f"k{i}", value="v", partition=0)
    committed.commit_transaction(30)  # offsets 0..29, commit marker at 30
    # Until the marker is in, the last stable offset is 0 and the query would read nothing.
    topics.wait_for_markers(bootstrap, topic, 0, 31)
    j = job(topic, **{"kafka.isolation.level": "read_committed"})
    j.run()  # position 31 (past the marker)

    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 1)
    again = topics.transactional_producer(bootstrap, f"{topic}-b")
    again.begin_transaction()
    later = int(time.time() * 1000) + 20 * 60 * 1000  # past the clock-skew allowance
    for i in range(20):
        again.produce(topic, key=f"r{i}", value="v", partition=0, timestamp=later)
    again.commit_transaction(30)  # 0..19, marker 20: LSO 21
    # Another producer's records could otherwise take offset 20, before the commit marker.
    topics.wait_for_markers(bootstrap, topic, 0, 21)
    still_open = topics.transactional_producer(bootstrap, f"{topic}-c")
    still_open.begin_transaction()
    for i in range(20):
        still_open.produce(topic, key=f"o{i}", value="v", partition=0)
    still_open.flush(30)  # 21..40 written, not committed: high watermark 41, LSO 21
    try:
        # 31 <= high watermark 41, but records below 31 are newer (by far more than any clock skew)
        # than the batch that read up to 31: the topic was rewritten (no topic id was ever recorded)
        assert j.validate(expect=1)["partitions"][0]["verdict"] == "TOPIC_RECREATED"
        report = j.validate("--isolation", "read_committed", expect=1)
        assert verdicts(report) == {
            (topic, 0): ("TOPIC_RECREATED", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED", 0)
        }
        assert report["partitions"][0]["log_end_offset"] == 21
        assert j.copy("unrepaired").restart_conditions() == predicted(report)

        plan = j.repair("--isolation", "read_committed", "--on-beyond-end", "earliest")
        assert [(c["old"], c["new"]) for c in plan["changes"]] == [(31, 0)]
        j.run()
        assert j.rows() == offsets(topic, {0: [*range(30), *range(20)]})  # the open transaction unread
    finally:
        still_open.abort_transaction(30)


def test_two_kafka_sources_only_the_broken_one_is_touched(job, new_topic, produce, bootstrap) -> None:
    left, right = new_topic(2, suffix="-l"), new_topic(2, suffix="-r")
    produce(left, 100, partitions=2, timestamp_ms=NOW)
    produce(right, 100, partitions=2, timestamp_ms=NOW)
    j = job([left, right])
    j.run()
    produce(right, 40, partitions=2, start=100, timestamp_ms=NOW)  # 50..69 per partition
    topics.delete_records(bootstrap, right, {0: 60})
    before = (j.checkpoint / "offsets/0").read_text().split("\n")

    report = j.validate(expect=1)
    assert {(r["source"], r["topic"], r["partition"], r["verdict"]) for r in report["partitions"]} == {
        ("0", left, 0, "OK"),
        ("0", left, 1, "OK"),
        ("1", right, 0, "BELOW_LOG_START"),
        ("1", right, 1, "OK"),
    }
    assert j.copy("unrepaired").restart_conditions() == predicted(report)

    j.repair()
    after = (j.checkpoint / "offsets/0").read_text().split("\n")
    assert after[:3] == before[:3]  # version, metadata and the healthy source's line: byte-identical
    assert json.loads(after[3]) == {right: {"0": 60, "1": 50}}
    j.run()
    assert j.rows() == sorted(
        offsets(left, {0: range(50), 1: range(50)})
        + offsets(right, {0: [*range(50), *range(60, 70)], 1: range(70)})
    )


def test_reset_to_a_timestamp_skips_exactly_the_older_records(job, new_topic, bootstrap) -> None:
    topic = new_topic(2)
    old = NOW - 3600_000
    topics.produce(bootstrap, topic, topics.keyed_records(40, partitions=2, timestamp_ms=old))
    j = job(topic)
    j.run()  # 20 per partition
    # While the job is down: 30 more per partition, one second apart; reset to the 11th second.
    records = [
        topics.Record(f"t{p}-{s}", "v", partition=p, timestamp_ms=NOW + s * 1000)
        for s in range(30)
        for p in range(2)
    ]
    topics.produce(bootstrap, topic, records)
    target = NOW + 10_000

    plan = j.repair("--to-datetime", str(target))
    assert {(m["old"], m["new"], m["skipped"]) for m in plan["moves"]} == {(20, 30, 10)}
    assert plan["totals"] == {"lost": 0, "skipped": 20, "replayed": 0}
    j.run()
    assert j.rows() == offsets(topic, {p: [*range(20), *range(30, 50)] for p in range(2)})


def test_loss_budget_exceeded_refuses_and_writes_nothing(job, new_topic, produce, bootstrap) -> None:
    topic = new_topic(3)
    produce(topic, 300, timestamp_ms=NOW)
    j = job(topic)
    j.run()
    produce(topic, 60, start=300, timestamp_ms=NOW)
    topics.delete_records(bootstrap, topic, {0: 110, 1: 115})
    before = tree_digest(j.checkpoint)

    plan = j.repair("--max-loss-records", "20", expect=1)

    assert plan["refused"] == "the plan loses 25 records in all, over the budget of 20"
    assert plan["executed"] is False
    assert tree_digest(j.checkpoint) == before
    assert not (j.checkpoint / "_recovery").exists()


@pytest.mark.parametrize("kill_at", [1, 3, 5])
def test_repair_killed_mid_write_is_finished_by_running_it_again(
    job, new_topic, produce, bootstrap, kill_at
) -> None:
    """SIGKILL inside `repair --execute` (the store's test-only hook), then the same command again:
    it rolls the killed run back, applies the plan, and Spark restarts with exactly the expected rows."""
    topic = new_topic(2)
    produce(topic, 200, partitions=2, timestamp_ms=NOW)
    j = job(topic)
    j.run()  # position 100 per partition
    produce(topic, 40, partitions=2, start=200, timestamp_ms=NOW)
    topics.delete_records(bootstrap, topic, {0: 110})
    command = [sys.executable, "-m", "recovery", "repair", str(j.checkpoint), "-b", bootstrap]
    command += ["--execute", "--force"]
    killed = subprocess.run(
        command, env=dict(os.environ, STREAM_RECOVERY_FAULT_AT=str(kill_at)), capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    again = subprocess.run(command, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "% applied; originals backed up as" in again.stderr
    assert not (j.checkpoint / "_recovery" / "intent.json").exists()
    assert j.validate(expect=0)["partitions"][0]["checkpoint_offset"] == 110
    j.run()
    assert j.rows() == offsets(topic, {0: [*range(100), *range(110, 120)], 1: range(120)})
