"""Issue 26: an unclean leader election cuts a partition's log back under a checkpoint's position,
on a real 3-node cluster (KRaft), with real Spark.

The partition has two replicas. One node dies; the leader goes on alone (ISR of one) and takes ten
more records; Spark reads all twenty. Then the leader dies too, the stale node comes back, and an
unclean election (ElectLeaders UNCLEAN, as ``kafka-leader-election --election-type unclean``) makes
it the leader: its log ends at 10, the checkpoint stands at 20, the topic id is unchanged. That is
predicted (PARTITION_OFFSET_CHANGED, "the log was truncated under it"), real Spark fails with it,
the repair moves the position down to the new end, and Spark then reads the new leader's records
once: the sink holds the twenty records read before and the five written after, nothing twice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from streaming_job import NOW, Job, offsets, predicted, verdicts
from waiting import wait_until

from recovery.local import topics
from recovery.local.cluster import LocalKafkaCluster

pytestmark = pytest.mark.fidelity  # run on every Spark line by `make test-matrix`

TOPIC = "orders-unclean"
# The follower that dies leaves the ISR after this (Kafka's default is 30 s).
LAG_MS = 2000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(3, {"replica.lag.time.max.ms": str(LAG_MS)}) as started:
        yield started


def partition_state(admin: AdminClient) -> tuple[int, list[int]]:
    """(leader, ISR) of the topic's partition 0, as the metadata says (-1: no leader; -2: not in
    the metadata yet, as just after the topic was created)."""
    topic = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    meta = topic.partitions.get(0) if topic is not None and topic.error is None else None
    if meta is None:
        return -2, []
    return int(meta.leader), sorted(int(r) for r in meta.isrs)


def log_range(bootstrap: str) -> tuple[int, int] | None:
    """Partition 0's (log start, log end), or None while its new leader does not answer for it yet
    (NOT_LEADER: the consumer's metadata still names the old one)."""
    try:
        return topics.offset_range(bootstrap, TOPIC, 0)
    except KafkaException:
        return None


def wait_for(admin: AdminClient, want: tuple[int, list[int] | None], timeout_s: float = 60) -> None:
    """Until partition 0 has the leader and ISR of ``want`` (ISR None: any; a partition without a
    leader is reported without its ISR)."""
    deadline = time.monotonic() + timeout_s
    while (state := partition_state(admin)) != want and (want[1] is not None or state[0] != want[0]):
        assert time.monotonic() < deadline, f"partition 0 is {state}, not {want} after {timeout_s:.0f}s"
        time.sleep(0.2)


def test_an_unclean_election_under_the_position_is_predicted_and_repaired(
    cluster: LocalKafkaCluster, spark: SparkSession, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    two_replicas = {"replica_assignment": [[1, 2]], "config": {"min.insync.replicas": "1"}}
    new = NewTopic(TOPIC, num_partitions=1, replication_factor=-1, **two_replicas)
    admin.create_topics([new])[TOPIC].result(30)
    wait_for(admin, (1, [1, 2]))
    topics.produce(bootstrap, TOPIC, [topics.Record("k", "v", 0, NOW) for _ in range(10)])

    cluster.kill(2)  # the follower: it has records 0-9, and leaves the ISR
    wait_for(admin, (1, [1]))
    topics.produce(bootstrap, TOPIC, [topics.Record("k", "v", 0, NOW) for _ in range(10)])  # 10-19 on 1 only
    job = Job(spark, bootstrap, TOPIC, tmp_path, {})
    job.run()
    assert job.rows() == offsets(TOPIC, {0: range(20)})
    assert job.repair()["changes"] == []  # nothing to change; records the topic id

    cluster.kill(1)  # the leader, with the only copy of 10-19
    cluster.restart(2)
    wait_for(admin, (-1, None))  # no leader: the ISR's one replica is down

    # An unclean election needs the stale replica registered again (else no replica is eligible),
    # and goes to the broker the last metadata named controller (any live one, in KRaft): one
    # that is not the dead node 1 (librdkafka would wait for it).
    def ready() -> bool:
        try:
            metadata = admin.list_topics(TOPIC, timeout=10)
        except KafkaException:
            return False  # no metadata this time: ask again
        return (
            2 in metadata.brokers
            and metadata.controller_id in metadata.brokers
            and metadata.controller_id != 1
        )

    wait_until(ready, "node 2 registered, and a live broker named controller")
    elected = admin.elect_leaders(ElectionType.UNCLEAN, [KafkaTP(TOPIC, 0)]).result(30)
    assert all(error is None for error in elected.values()), elected
    wait_for(admin, (2, [2]))
    wait_until(lambda: log_range(bootstrap) is not None, "the new leader answering for its log range")
    assert log_range(bootstrap) == (0, 10)  # the log now ends at 10, under 20

    report = job.validate(expect=1)
    assert verdicts(report) == {(TOPIC, 0): ("BEYOND_LOG_END", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED", 0)}
    (row,) = report["partitions"]
    assert "log was truncated under it, as an unclean leader election does" in row["detail"], row
    assert job.copy("unrepaired").restart_conditions() == predicted(report)

    plan = job.repair()
    assert [(c["old"], c["new"]) for c in plan["changes"]] == [(20, 10)]
    assert plan["totals"]["lost"] == 0  # 10-19 were read before the election
    topics.produce(bootstrap, TOPIC, [topics.Record("k", "v", 0, NOW) for _ in range(5)])  # the new 10-14
    job.run()
    assert job.rows() == offsets(TOPIC, {0: [*range(20), *range(10, 15)]})
