"""Real failures, one kind per runbook page, made on the rig the way production makes them.

Each incident runs a real Spark query (Kafka -> Delta, or Delta -> Delta), breaks its source on the
real broker or in the real Delta log, and leaves the query stopped "an hour ago" (file times moved
back, as after an outage: the write path's in-use guess then lets the page's commands write). It
gives the page its placeholder values and its hidden steps (``<!-- runbook-test: ... -->``):

* ``fails CONDITION``: real Spark, restarted from an untouched copy, fails with that condition;
* ``runs``: real Spark, restarted from an untouched copy, runs (a silent skip, or nothing lost yet);
* ``restart``: the query restarts from the checkpoint and runs (then stops again);
* ``save NAME`` / ``use NAME``: keep a copy of the checkpoint as it is now / run the next commands
  against that copy, ``use live`` against the original again (the undo steps apply to a checkpoint
  just repaired, not one Spark ran on since);
* a page's own steps: ``recreate-topic N``, ``recreate-with-2-partitions``, ``abort-open-transaction``,
  ``start-new-checkpoint JSON``.

After the page, each incident checks the rows the restarted query wrote: exactly the records the
page's repair promised (the loss it reported gone, nothing read twice).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource
from pyspark.sql import SparkSession
from streaming_job import NOW, Job, offsets
from transcript import Session

from recovery.local import topics
from recovery.local.spark import error_conditions

AN_HOUR = 3600.0


def stopped_long_ago(path: Path) -> None:
    """Move every file's time back an hour: the query stopped then (an outage, not a running job)."""
    then = time.time() - AN_HOUR
    for item in path.rglob("*"):
        os.utime(item, (then, then))


class Incident:
    """A failure on the rig and the hidden steps a page may ask for."""

    def __init__(self, root: Path, checkpoint: Path, values: dict[str, str]) -> None:
        self.root = root
        self.checkpoint = checkpoint
        self.values = values
        self.saved: dict[str, Path] = {}
        self.aliases: list[tuple[str, str]] = []
        self.asserted: list[str] = []

    def session(self) -> Session:
        hooks: dict[str, Callable[..., None]] = {
            "fails": self.fails,
            "restart": self.restart,
            "save": self.save,
            "use": self.use,
            "runs": self.runs,
        }
        return Session(self.values, hooks, self.aliases)

    # what each kind of query does
    def conditions(self, copy: Path) -> list[str | None]:
        raise NotImplementedError

    def run(self) -> None:
        raise NotImplementedError

    @property
    def home(self) -> Path:
        """The directory holding the checkpoint the page works on now (``live`` or a saved copy)."""
        return self.checkpoint.parent

    def _unrepaired_copy(self) -> Path:
        copy = self.root / f"unrepaired-{uuid.uuid4().hex[:6]}"
        shutil.copytree(self.home, copy)
        return copy

    def fails(self, condition: str) -> None:
        observed = self.conditions(self._unrepaired_copy())
        assert condition in observed, f"Spark failed with {observed}, the page says {condition}"
        self.asserted.append(f"Spark fails with {condition}")

    def runs(self) -> None:
        """Spark, restarted from an untouched copy, runs without an error (it may skip silently)."""
        observed = self.conditions(self._unrepaired_copy())
        assert observed == [], f"Spark failed with {observed}, the page says it runs"
        self.asserted.append("Spark runs")

    def restart(self) -> None:
        self.run()  # raises if Spark fails
        stopped_long_ago(self.checkpoint)
        self.asserted.append("the query restarts and runs")

    def save(self, name: str) -> None:
        self.saved[name] = self.root / f"saved-{name}"
        shutil.copytree(self.home, self.saved[name])

    def use(self, name: str) -> None:
        """Point the placeholders at a saved copy (``live``: the original again); the paths of every
        copy still print as the page's placeholders."""
        live = str(self.root / "live")
        target = live if name == "live" else str(self.saved[name])
        for placeholder, real in list(self.values.items()):
            if real.startswith(str(self.home)):
                self.values[placeholder] = target + real[len(str(self.home)) :]
                self.aliases.append((placeholder, real))
        self.checkpoint = Path(target + str(self.checkpoint)[len(str(self.home)) :])


class KafkaIncident(Incident):
    """The rig's Kafka -> Delta query (recovery.local.pipeline via tests/integration/streaming_job)."""

    def __init__(self, job: Job, values: dict[str, str]) -> None:
        super().__init__(job.root.parent, job.checkpoint, values)
        self.job = job

    def conditions(self, copy: Path) -> list[str | None]:
        twin = Job(self.job.spark, self.job.bootstrap, self.job.topic, copy, self.job.options)
        return sorted(twin.restart_conditions())

    def run(self) -> None:
        self.job = Job(
            self.job.spark, self.job.bootstrap, self.job.topic, self.checkpoint.parent, self.job.options
        )
        self.job.run()


def kafka_job(spark: SparkSession, bootstrap: str, root: Path, topic: str, **options: str) -> Job:
    return Job(spark, bootstrap, topic, root / "live", dict(options))


def kafka_values(job: Job, bootstrap: str, topic: str) -> dict[str, str]:
    return {"/chk/orders": str(job.checkpoint), "kafka:9092": bootstrap, "orders": topic}


# -- one incident per page ---------------------------------------------------------------------


def retention_loss(spark: SparkSession, bootstrap: str, root: Path, topic: str) -> Iterator[Incident]:
    """The job was down while retention (here DeleteRecords) moved the log start past its position."""
    topics.create_topic(bootstrap, topic, 3)
    topics.produce(bootstrap, topic, topics.keyed_records(300, partitions=3, timestamp_ms=NOW))
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()  # position 100 per partition
    topics.produce(bootstrap, topic, topics.keyed_records(60, partitions=3, start=300, timestamp_ms=NOW))
    topics.delete_records(bootstrap, topic, {0: 110, 1: 115})
    stopped_long_ago(job.checkpoint)
    yield KafkaIncident(job, kafka_values(job, bootstrap, topic))
    assert job.rows() == offsets(
        topic, {0: [*range(100), *range(110, 120)], 1: [*range(100), *range(115, 120)], 2: range(120)}
    )


class TopicIncident(KafkaIncident):
    """The topic deleted and created again, with ``recreate-topic N``: N records per partition."""

    def session(self) -> Session:
        session = super().session()
        session.hooks = {**session.hooks, "recreate-topic": self.recreate}
        return session

    def recreate(self, per_partition: str) -> None:
        topic, bootstrap = str(self.job.topic), self.job.bootstrap
        topics.delete_topic(bootstrap, topic)
        topics.create_topic(bootstrap, topic, 3)
        count = 3 * int(per_partition)
        topics.produce(
            bootstrap, topic, topics.keyed_records(count, partitions=3, start=2000, timestamp_ms=NOW)
        )
        stopped_long_ago(self.checkpoint)
        self.asserted.append(f"the topic recreated with {per_partition} records per partition")


def topic_recreated(spark: SparkSession, bootstrap: str, root: Path, topic: str) -> Iterator[Incident]:
    """The topic was deleted and created again; the new one holds fewer records than the position.
    Later (the page's symptom B) it is recreated again, with more records than the position."""
    topics.create_topic(bootstrap, topic, 3)
    topics.produce(bootstrap, topic, topics.keyed_records(300, partitions=3, timestamp_ms=NOW))
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 3)
    topics.produce(bootstrap, topic, topics.keyed_records(30, partitions=3, start=1000, timestamp_ms=NOW))
    stopped_long_ago(job.checkpoint)
    incident = TopicIncident(job, kafka_values(job, bootstrap, topic))
    yield incident
    # the old topic's 100, the first new topic's 10, the second new topic's 150: none skipped
    assert Job(spark, bootstrap, topic, root / "live", {}).rows() == offsets(
        topic, {p: [*range(100), *range(10), *range(150)] for p in range(3)}
    )


class PartitionsIncident(KafkaIncident):
    """The page's second failure: later, the topic is recreated with fewer partitions."""

    def session(self) -> Session:
        session = super().session()
        session.hooks = {**session.hooks, "recreate-with-2-partitions": self.recreate}
        return session

    def recreate(self) -> None:
        topic, bootstrap = str(self.job.topic), self.job.bootstrap
        topics.delete_topic(bootstrap, topic)
        topics.create_topic(bootstrap, topic, 2)
        topics.produce(bootstrap, topic, topics.keyed_records(30, partitions=2, start=1000, timestamp_ms=NOW))
        stopped_long_ago(self.checkpoint)
        self.asserted.append("the topic recreated with 2 partitions")


def partitions_changed(spark: SparkSession, bootstrap: str, root: Path, topic: str) -> Iterator[Incident]:
    """A partition was added, and its first records were deleted before the job saw them; then the
    topic is recreated with fewer partitions."""
    topics.create_topic(bootstrap, topic, 2)
    topics.produce(bootstrap, topic, topics.keyed_records(200, partitions=2, timestamp_ms=NOW))
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()
    topics.add_partitions(bootstrap, topic, 3)
    added = [topics.Record(f"n{i}", "v", partition=2, timestamp_ms=NOW) for i in range(20)]
    topics.produce(bootstrap, topic, added)
    topics.delete_records(bootstrap, topic, {2: 5})
    stopped_long_ago(job.checkpoint)
    incident = PartitionsIncident(job, kafka_values(job, bootstrap, topic))
    yield incident
    assert incident.job.rows() == offsets(
        topic, {0: [*range(100), *range(15)], 1: [*range(100), *range(15)], 2: range(5, 20)}
    )


class TransactionIncident(KafkaIncident):
    """A transaction still open in ``topic [0]``; the page may end it (``abort-open-transaction``),
    after which the partition ends at ``end`` (the abort marker in)."""

    def __init__(self, job: Job, values: dict[str, str], producer: Producer, topic: str, end: int) -> None:
        super().__init__(job, values)
        self.producer = producer
        self.topic = topic
        self.end = end

    def session(self) -> Session:
        session = super().session()
        session.hooks = {**session.hooks, "abort-open-transaction": self.abort}
        return session

    def abort(self) -> None:
        self.producer.abort_transaction(30)
        self.asserted.append("the open transaction aborted")
        # The page's next command judges the checkpoint against the last stable offset, which
        # passes the position only once the abort marker is in the log.
        topics.wait_for_markers(self.job.bootstrap, self.topic, 0, self.end)


def read_committed(spark: SparkSession, bootstrap: str, root: Path, topic: str) -> Iterator[Incident]:
    """A query that ran read_uncommitted, past records of a transaction still open, is restarted
    with read_committed: its position is at the high watermark but past the last stable offset."""
    topics.create_topic(bootstrap, topic, 1)
    committed = topics.transactional_producer(bootstrap, f"{topic}-a")
    committed.begin_transaction()
    for i in range(30):
        committed.produce(topic, key=f"k{i}", value="v", partition=0)
    committed.commit_transaction(30)  # offsets 0..29, commit marker at 30: LSO 31
    # Another producer's records could otherwise take offset 30, before the commit marker.
    topics.wait_for_markers(bootstrap, topic, 0, 31)
    still_open = topics.transactional_producer(bootstrap, f"{topic}-b")
    still_open.begin_transaction()
    for i in range(20):
        still_open.produce(topic, key=f"o{i}", value="v", partition=0)
    still_open.flush(30)  # 31..50 written, not committed: high watermark 51, LSO 31
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()  # read_uncommitted: position 51, the open transaction's records read
    job.options = {"kafka.isolation.level": "read_committed"}  # then restarted read_committed
    stopped_long_ago(job.checkpoint)
    incident = TransactionIncident(job, kafka_values(job, bootstrap, topic), still_open, topic, end=52)
    try:
        yield incident
        # nothing read twice; the aborted records stay where read_uncommitted delivered them
        assert incident.job.rows() == offsets(topic, {0: [*range(30), *range(31, 51)]})
    finally:
        if "the open transaction aborted" not in incident.asserted:
            still_open.abort_transaction(30)


def commit_group(bootstrap: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """The consumer group an older consumer of the topic left behind (plain Kafka commit)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False
        )
    finally:
        consumer.close()


class MoveIncident(KafkaIncident):
    """Start over: a new checkpoint from the answer of ``starting-offsets``."""

    def session(self) -> Session:
        session = super().session()
        session.hooks = {**session.hooks, "start-new-checkpoint": self.start_new}
        return session

    def start_new(self, starting: str) -> None:
        fresh = Job(self.job.spark, self.job.bootstrap, self.job.topic, self.root / "new", {})
        fresh.options = {"startingOffsets": starting}
        fresh.run()
        first = {p: min(o for t, q, o in fresh.rows() if q == p) for _, p, _ in fresh.rows()}
        assert first == {int(p): o for p, o in json.loads(starting)[str(self.job.topic)].items()}, first
        self.asserted.append(f"a new checkpoint starts at {starting}")


def move_to_a_new_checkpoint(
    spark: SparkSession, bootstrap: str, root: Path, topic: str
) -> Iterator[Incident]:
    """An old checkpoint that read 100 records per partition, a group that committed 50, and more
    records since, all produced in the last six hours."""
    topics.create_topic(bootstrap, topic, 3)
    topics.produce(bootstrap, topic, topics.keyed_records(300, partitions=3, timestamp_ms=NOW))
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()
    topics.produce(bootstrap, topic, topics.keyed_records(30, partitions=3, start=300, timestamp_ms=NOW))
    group = f"billing-{uuid.uuid4().hex[:8]}"
    commit_group(bootstrap, group, topic, {0: 50, 1: 50, 2: 50})
    stopped_long_ago(job.checkpoint)
    values = kafka_values(job, bootstrap, topic) | {"billing": group}
    yield MoveIncident(job, values)


def topic_retention_ms(bootstrap: str, topic: str) -> tuple[str, bool]:
    """The topic's ``retention.ms`` as the broker describes it, and whether it is the topic's own."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = topics.admin(bootstrap)  # keep a reference: a collected client cancels its futures
    entry = client.describe_configs([resource])[resource].result(timeout=30)["retention.ms"]
    return entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def retention_runway(spark: SparkSession, bootstrap: str, root: Path, topic: str) -> Iterator[Incident]:
    """Nothing lost yet: a stopped query whose unread records retention (one day) may delete in
    about four hours, as their CreateTime is 20 hours ago. The page's step 2 holds the topic's
    retention for the query as it was then (``save at-risk``), and puts it back after it ran."""
    day_ms, written = 86_400_000, NOW - 20 * 3_600_000
    topics.create_topic(bootstrap, topic, 3, {"retention.ms": str(day_ms)})
    topics.produce(bootstrap, topic, topics.keyed_records(300, partitions=3, timestamp_ms=written))
    job = kafka_job(spark, bootstrap, root, topic)
    job.run()  # position 100 per partition
    topics.produce(bootstrap, topic, topics.keyed_records(60, partitions=3, start=300, timestamp_ms=written))
    stopped_long_ago(job.checkpoint)
    incident = KafkaIncident(job, kafka_values(job, bootstrap, topic))
    yield incident
    assert incident.job.rows() == offsets(topic, {p: range(120) for p in range(3)})  # nothing lost
    # the hold was released: the topic's own value is the one before it, and the record is gone
    assert topic_retention_ms(bootstrap, topic) == (str(day_ms), True)
    assert not (incident.checkpoint / "_recovery" / "retention-hold.json").exists()


# Delta -> Delta (the delta-source page) -----------------------------------------------------------

# Log cleanup keeps nothing older than the latest checkpoint; Spark must not checkpoint or clean up by
# itself in between (checkpointInterval), so deltalake decides what is deleted (as in
# tests/delta/test_delta_source_spark.py).
DELTA_PROPS = (
    "'delta.logRetentionDuration'='interval 0 seconds', 'delta.deletedFileRetentionDuration'="
    "'interval 0 seconds', 'delta.checkpointInterval'='1000'"
)


class DeltaIncident(Incident):
    def __init__(self, spark: SparkSession, root: Path, values: dict[str, str]) -> None:
        live = root / "live"
        super().__init__(root, live / "chk", values)
        self.spark = spark
        self.src = root / "src"

    def stream(self, chk: Path) -> None:
        query = (
            self.spark.readStream.format("delta")
            .load(str(self.src))
            .writeStream.format("delta")
            .option("checkpointLocation", str(chk))
            .trigger(availableNow=True)
            .start(str(chk.parent / "sink"))
        )
        query.awaitTermination()

    def conditions(self, copy: Path) -> list[str | None]:
        try:
            self.stream(copy / "chk")
        except Exception as exc:
            return [c for _, c, _ in error_conditions(exc)]
        return []

    def run(self) -> None:
        self.stream(self.checkpoint)


def _append(spark: SparkSession, table: Path, start: int, count: int = 5) -> None:
    rows = spark.range(start, start + count).selectExpr("id", "CAST(id AS STRING) AS v")
    rows.write.format("delta").mode("append").save(str(table))


def delta_source_log_cleanup(
    spark: SparkSession, bootstrap: str, root: Path, topic: str
) -> Iterator[Incident]:
    """A stream of a Delta table stopped while log cleanup deleted commits it still needs."""
    from deltalake import DeltaTable

    del bootstrap, topic
    incident = DeltaIncident(spark, root, {})
    src, live = incident.src, root / "live"
    spark.sql(f"CREATE TABLE delta.`{src}` (id BIGINT, v STRING) USING delta TBLPROPERTIES ({DELTA_PROPS})")
    _append(spark, src, 0)  # version 1
    incident.run()  # batch 0: the snapshot of version 1
    for start in (5, 10, 15):  # versions 2-4
        _append(spark, src, start)
    incident.run()  # batch 1: versions 2-4
    for start in (20, 25, 30):  # versions 5-7, never read
        _append(spark, src, start)
    table = DeltaTable(str(src))
    table.create_checkpoint()
    table.cleanup_metadata()  # the log now starts at version 7
    stopped_long_ago(live)
    incident.values.update(
        {
            "/chk/orders_copy": str(live / "chk"),
            "/lake/orders": str(src),
            "/lake/orders_copy": str(live / "sink"),
        }
    )
    yield incident
    ids = sorted(r.id for r in spark.read.format("delta").load(str(live / "sink")).select("id").collect())
    assert ids == [*range(20), *range(30, 35)], ids  # versions 5-6 lost, as the plan said


INCIDENTS: dict[str, Callable[[SparkSession, str, Path, str], Iterator[Incident]]] = {
    "retention-loss.md": retention_loss,
    "topic-recreated.md": topic_recreated,
    "partitions-changed.md": partitions_changed,
    "read-committed.md": read_committed,
    "move-to-a-new-checkpoint.md": move_to_a_new_checkpoint,
    "delta-source-log-cleanup.md": delta_source_log_cleanup,
    "retention-runway.md": retention_runway,
}
