"""Tiered storage (KIP-405) on a broker of the rig with Kafka's own ``LocalTieredStorage``: a topic
whose old segments are in remote storage only, read by real Spark, predicted, lost to retention and
repaired. Spark reads remote segments as local ones (the broker serves them), so the log start the
toolkit judges with is the whole log's (ListOffsets earliest), not the brokers' local one (-4), and
the runway counts remote segments under ``retention.ms``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka_tools import get_offsets
from pyspark.sql import SparkSession
from streaming_job import Job, offsets, predicted, verdicts
from waiting import wait_until

from recovery.cli import cli
from recovery.local import topics
from recovery.local.broker import LocalKafkaBroker

pytestmark = pytest.mark.kafka  # a Kafka edge: run on every broker of the Kafka version matrix

HOUR_MS = 3_600_000
TIERED = {
    "remote.storage.enable": "true",
    "segment.ms": "500",  # a segment rolls at the first write 0.5 s after it began
    "local.retention.ms": "500",  # copied segments leave the broker's disk 0.5 s later
    "retention.ms": "-1",
}


@pytest.fixture(scope="module")
def tiered() -> Iterator[LocalKafkaBroker]:
    with LocalKafkaBroker(tiered_storage=True) as broker:
        yield broker


def local_log_start(broker: LocalKafkaBroker, topic: str) -> int | None:
    """The first offset of partition 0 still on the broker's disk (its oldest segment's base offset)."""
    segments = (broker.log_path.parent / "data" / f"{topic}-0").glob("*.log")
    return min((int(p.stem) for p in segments), default=None)


def wave(bootstrap: str, topic: str, start: int, *, timestamp_ms: int | None = None) -> None:
    """20 records at offsets ``start``..``start + 19`` of partition 0; a new segment (see TIERED)."""
    topics.produce(
        bootstrap, topic, topics.keyed_records(20, partitions=1, start=start, timestamp_ms=timestamp_ms)
    )


def test_spark_reads_remote_only_segments_and_a_remote_retention_loss_is_predicted_and_repaired(
    tiered: LocalKafkaBroker, spark: SparkSession, topic_name: str, tmp_path: Path
) -> None:
    bootstrap, topic = tiered.bootstrap_servers, topic_name
    topics.create_topic(bootstrap, topic, 1, TIERED)
    old = int(time.time() * 1000) - 2 * HOUR_MS
    wave(bootstrap, topic, 0, timestamp_ms=old)
    j = Job(spark, bootstrap, topic, tmp_path, {})
    j.run()  # the checkpoint resumes at 20
    wave(bootstrap, topic, 20, timestamp_ms=old)
    for start in (40, 60, 80, 100):  # the last wave rolls the segment of 80..99
        time.sleep(0.6)
        wave(bootstrap, topic, start)
    # (the broker rolls the last segment too once it is older than local.retention.ms: all may go)
    wait_until(lambda: (local_log_start(tiered, topic) or 0) >= 100, "offsets 0..99 only in remote storage")
    assert get_offsets(bootstrap, topic, "-4")[0] >= 100  # Kafka's own word: the local log starts there

    # Remote segments are the log: `offsets` starts it at 0, Spark resumes at 20 and loses nothing.
    done = CliRunner().invoke(cli, ["offsets", "-b", bootstrap, "--topic", topic, "--output", "json"])
    assert done.exit_code == 0, done.output
    [listed] = json.loads(done.stdout)
    assert (listed["log_start_offset"], listed["high_watermark"]) == (0, 120), listed
    report = j.validate(expect=0)
    assert verdicts(report) == {(topic, 0): ("OK", None, 0)}
    [row] = report["partitions"]
    assert row["log_start_offset"] == 0, row
    assert "tiered storage: the whole log counts" in row["runway_reason"], row
    assert row["runway_s"] is None, row  # retention.ms=-1
    whole = j.copy("whole")
    whole.run()
    assert whole.rows() == offsets(topic, {0: range(120)})

    # Under retention.ms, the runway counts the remote segments: the record at 20, written 2 h ago,
    # may go 3 h after it was written.
    topics.alter_topic_config(bootstrap, topic, {"retention.ms": str(3 * HOUR_MS)})
    wait_until(lambda: j.validate(expect=0)["partitions"][0]["runway_s"] is not None, "retention.ms=3h")
    [row] = j.validate(expect=0)["partitions"]
    assert row["runway_reason"].startswith(f"retention.ms={3 * HOUR_MS}; tiered storage: "), row
    expected_s = (old + 3 * HOUR_MS) / 1000 - time.time()  # about an hour
    assert abs(row["runway_s"] - expected_s) < 60, (row, expected_s)

    # Retention deletes the two old segments from remote storage: 20..39 are lost to the checkpoint.
    topics.alter_topic_config(bootstrap, topic, {"retention.ms": str(HOUR_MS)})
    wait_until(lambda: topics.offset_range(bootstrap, topic, 0) == (40, 120), "the log start at 40")
    report = j.validate(expect=1)
    [(verdict, error, lost)] = verdicts(report).values()
    assert (verdict, lost) == ("BELOW_LOG_START", 20) and error, report
    assert j.copy("unrepaired").restart_conditions() <= predicted(report) != set()

    plan = j.repair()
    assert plan["totals"] == {"lost": 20, "skipped": 0, "replayed": 0}
    assert [(c["partition"], c["old"], c["new"]) for c in plan["changes"]] == [(0, 20, 40)]
    j.validate(expect=0)
    j.run()
    assert j.rows() == offsets(topic, {0: [*range(20), *range(40, 120)]})
