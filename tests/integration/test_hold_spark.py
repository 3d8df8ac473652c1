"""Issue 29's proof against real Spark: a stopped job whose unread records retention is about to
delete. Without a hold they go, as predicted, and Spark's restart fails as predicted; with
``retention hold`` the job restarts later and its sink holds every record once; after ``retention
release`` the topic's configuration is the original again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner
from pyspark.sql import SparkSession
from streaming_job import Job, offsets, predicted, verdicts

from recovery.cli import cli
from recovery.kafka.config import KafkaConfig
from recovery.kafka.topic_config import TopicValue, alter_topic_values, topic_values
from recovery.local import topics
from recovery.local.broker import RETENTION_TESTABLE

RETENTION_MS = 20_000
CHECK_INTERVAL_S = int(RETENTION_TESTABLE["log.retention.check.interval.ms"]) / 1000


def retention_ms(bootstrap: str, topic: str) -> TopicValue:
    answer = topic_values(KafkaConfig(bootstrap), [topic], ("retention.ms",))[topic]
    assert not isinstance(answer, str), answer
    return answer["retention.ms"]


def test_a_held_job_restarts_with_every_record_and_an_unheld_one_loses_them(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    kafka = KafkaConfig(bootstrap)
    jobs = {}
    for name in ("held", "unheld"):
        # segment.ms: what the job has not read lands in a segment of its own, deleted whole
        topic = new_topic(1, {"retention.ms": "3600000", "segment.ms": "1000"}, suffix=f"-{name}")
        topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1))
        jobs[name] = Job(spark, bootstrap, topic, tmp_path / name, {})
        jobs[name].run()
        assert jobs[name].rows() == offsets(topic, {0: range(10)})
    held, unheld = jobs["held"], jobs["unheld"]
    time.sleep(1.5)  # past segment.ms: the next records roll a new segment
    for j in jobs.values():
        topics.produce(bootstrap, str(j.topic), topics.keyed_records(10, partitions=1, start=10))
    # The job is stopped, and the topics keep 20 s: its unread records have a runway of seconds.
    changed = alter_topic_values(
        kafka, {str(j.topic): {"retention.ms": str(RETENTION_MS)} for j in jobs.values()}
    )
    assert set(changed.values()) == {None}

    result = CliRunner().invoke(
        cli, ["retention", "hold", str(held.checkpoint), "-b", bootstrap, "--keep", "3m", "--execute"]
    )
    assert result.exit_code == 0, result.output
    assert "RAISED" in result.stdout
    before = unheld.validate(expect=0)
    (row,) = before["partitions"]
    assert row["verdict"] == "OK" and 0 < row["runway_s"] <= RETENTION_MS / 1000

    deadline = time.monotonic() + row["runway_s"] + 10 * CHECK_INTERVAL_S + 5
    while time.monotonic() < deadline and topics.offset_range(bootstrap, str(unheld.topic), 0)[0] <= 10:
        time.sleep(0.5)
    assert topics.offset_range(bootstrap, str(unheld.topic), 0)[0] == 20, "retention never deleted them"
    assert topics.offset_range(bootstrap, str(held.topic), 0)[0] == 0, "the hold did not keep them"

    # Without the hold: gone, as predicted, and Spark fails as predicted.
    after = unheld.validate(expect=1)
    assert verdicts(after) == {(unheld.topic, 0): ("BELOW_LOG_START", predicted(after).pop(), 10)}
    assert unheld.copy("restarted").restart_conditions() == predicted(after)

    # With it: the restart reads every record once.
    assert held.validate(expect=0)["partitions"][0]["verdict"] == "OK"
    held.run()
    assert held.rows() == offsets(str(held.topic), {0: range(20)})

    # Caught up: the release puts the topic's own 20 s back, and the record goes.
    released = CliRunner().invoke(
        cli, ["retention", "release", str(held.checkpoint), "-b", bootstrap, "--execute"]
    )
    assert released.exit_code == 0, released.output
    assert retention_ms(bootstrap, str(held.topic)) == TopicValue(str(RETENTION_MS), own=True)
    assert not (held.checkpoint / "_recovery/retention-hold.json").exists()


def test_a_hold_of_retention_bytes_keeps_what_a_stopped_job_has_not_read(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The same by size: 3 MiB of retention.bytes (1 MiB segments), a job stopped after 1 MB, 2 MB
    it has not read, then 5 MB more written: without a hold its unread first segments go; with
    one (a day's writes at the rate the records' times say) it restarts and reads every record."""
    limit, segment = 3 * 1024 * 1024, 1024 * 1024
    stamp = int(time.time() * 1000) - 3_600_000  # an hour of writes so far, as the write rate goes
    value = "x" * 1000

    def write(topic: str, start: int, count: int) -> None:
        records = [topics.Record(f"k{i}", value, 0, stamp + i) for i in range(start, start + count)]
        topics.produce(bootstrap, topic, records)

    jobs = {}
    for name in ("held", "unheld"):
        config = {"retention.ms": "-1", "retention.bytes": str(limit), "segment.bytes": str(segment)}
        topic = new_topic(1, config, suffix=f"-{name}")
        write(topic, 0, 1000)
        jobs[name] = Job(spark, bootstrap, topic, tmp_path / name, {})
        jobs[name].run()
        write(topic, 1000, 2000)  # not read: the job is stopped
    held, unheld = jobs["held"], jobs["unheld"]
    result = CliRunner().invoke(
        cli, ["retention", "hold", str(held.checkpoint), "-b", bootstrap, "--keep", "1d", "--execute"]
    )
    assert result.exit_code == 0 and "RAISED" in result.stdout, result.output
    for start in range(3000, 8000, 500):  # 5 MB more, in steps the retention check sees
        for j in jobs.values():
            write(str(j.topic), start, 500)
        time.sleep(CHECK_INTERVAL_S + 0.2)

    assert topics.offset_range(bootstrap, str(unheld.topic), 0)[0] > 1000, "retention never deleted them"
    assert topics.offset_range(bootstrap, str(held.topic), 0)[0] == 0, "the hold did not keep them"
    after = unheld.validate(expect=1)
    assert unheld.copy("restarted").restart_conditions() == predicted(after)
    held.run()
    assert held.rows() == offsets(str(held.topic), {0: range(8000)})
    released = CliRunner().invoke(
        cli, ["retention", "release", str(held.checkpoint), "-b", bootstrap, "--execute"]
    )
    assert released.exit_code == 0, released.output
    answer = topic_values(KafkaConfig(bootstrap), [str(held.topic)], ("retention.bytes",))[str(held.topic)]
    assert not isinstance(answer, str) and answer["retention.bytes"] == TopicValue(str(limit), own=True)
