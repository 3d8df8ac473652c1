"""Topic and record helpers for the demo and the tests, on the real broker (confluent-kafka).

Records are keyed and may carry a chosen CreateTime timestamp, so tests can place data in time
(retention by time, offset-for-timestamp lookups).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from recovery.errors import RigError


@dataclass(frozen=True)
class Record:
    key: str
    value: str
    partition: int | None = None
    timestamp_ms: int | None = None  # CreateTime; None lets the producer stamp it


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


_Key = TypeVar("_Key")  # what each future is for: a topic name, a config resource, a partition


def _wait(futures: Mapping[_Key, Future[object]], what: str, timeout: float = 30.0) -> None:
    for key, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise RigError(f"{what} {key}: {exc}") from exc


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    config: Mapping[str, str] | None = None,
    *,
    replication_factor: int = 1,
) -> None:
    new = NewTopic(
        topic, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {})
    )
    client = admin(bootstrap)  # keep a reference: a collected client cancels its futures
    _wait(client.create_topics([new], operation_timeout=30), "create topic")
    # Under KRaft the metadata a client sees can lag CreateTopics' answer by a moment.
    _wait_listed(client, topic, present=True)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the broker no longer lists it (deletion is asynchronous)."""
    client = admin(bootstrap)
    _wait(client.delete_topics([topic], operation_timeout=30), "delete topic")
    _wait_listed(client, topic, present=False)


def _wait_listed(client: AdminClient, topic: str, *, present: bool, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while (topic in client.list_topics(timeout=10).topics) != present:
        if time.monotonic() > deadline:
            state, event = ("not listed", "created") if present else ("still listed", "deleted")
            raise RigError(f"topic {topic} was {state} {seconds:.0f} s after it was {event}")
        time.sleep(0.1)


def alter_topic_config(bootstrap: str, topic: str, config: Mapping[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    client = admin(bootstrap)
    _wait(client.incremental_alter_configs([resource]), "alter topic config")


def produce(bootstrap: str, topic: str, records: Iterable[Record]) -> int:
    """Produce ``records`` synchronously (idempotent producer, acks=all); return how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for rec in records:
        producer.produce(
            topic,
            key=rec.key,
            value=rec.value,
            # librdkafka's "unassigned" partition (-1: the partitioner picks) and "now" timestamp (0).
            partition=-1 if rec.partition is None else rec.partition,
            timestamp=rec.timestamp_ms or 0,
            on_delivery=on_delivery,
        )
        producer.poll(0)
        count += 1
    remaining = producer.flush(30)
    if errors or remaining:
        raise RigError(f"producing to {topic}: {remaining} undelivered, errors: {errors[:3]}")
    return count


def keyed_records(
    count: int,
    *,
    partitions: int,
    start: int = 0,
    timestamp_ms: int | None = None,
    prefix: str = "k",
) -> list[Record]:
    """``count`` records ``k<i>`` -> ``v<i>``, spread round-robin over ``partitions`` partitions."""
    return [
        Record(f"{prefix}{i}", f"v{i}", partition=i % partitions, timestamp_ms=timestamp_ms)
        for i in range(start, start + count)
    ]


def offset_range(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(log start offset, high watermark) of one partition, as a consumer sees them."""
    from confluent_kafka import Consumer

    # librdkafka's default is read_committed, which would answer the last stable offset
    settings = {"bootstrap.servers": bootstrap, "group.id": "stream-recovery-rig"}
    consumer = Consumer({**settings, "isolation.level": "read_uncommitted"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def wait_for_markers(bootstrap: str, topic: str, partition: int, end: int, seconds: float = 30.0) -> None:
    """Wait until ``topic [partition]`` ends at ``end`` with no transaction open in it: last stable
    offset = high watermark = ``end``.

    ``commit_transaction()`` and ``abort_transaction()`` return once the transaction coordinator has
    logged the outcome; it writes the markers to the partitions after answering
    (``TransactionCoordinator.endTransaction``: "respond to the client immediately and continue to
    write the txn markers"). Until a marker is in, another producer's record can take its offset,
    and a read sees a shorter log. Raises :class:`RigError` as soon as the log goes past ``end``,
    or if it does not end there ``seconds`` after the call.

    Example::

        producer.commit_transaction(30)  # records 0..29, commit marker at 30
        wait_for_markers(bootstrap, "orders", 0, 31)
    """
    tp = TopicPartition(topic, partition)
    client = admin(bootstrap)
    deadline = time.monotonic() + seconds
    while True:
        # The last stable offset first: it never passes the high watermark, and neither goes back,
        # so if the high watermark read after it is also ``end``, both were ``end`` at once.
        last_stable = _latest(client, tp, IsolationLevel.READ_COMMITTED)
        high_watermark = _latest(client, tp, IsolationLevel.READ_UNCOMMITTED)
        seen = f"high watermark {high_watermark}, last stable offset {last_stable}"
        if high_watermark > end:
            raise RigError(
                f"{topic} [{partition}]: {seen}: the log went past {end}, its end with the markers"
            )
        if last_stable == high_watermark == end:
            return
        if time.monotonic() > deadline:
            raise RigError(
                f"{topic} [{partition}]: the transaction markers never came: {seconds:.0f} s on, "
                f"{seen}, not both {end}"
            )
        time.sleep(0.01)


def _latest(client: AdminClient, tp: TopicPartition, isolation: IsolationLevel) -> int:
    """ListOffsets "latest": the high watermark, or under read_committed the last stable offset."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # its factories are untyped
    futures = client.list_offsets({tp: latest}, isolation_level=isolation, request_timeout=10)
    try:
        return int(futures[tp].result(timeout=30).offset)
    except KafkaException as exc:
        raise RigError(f"list offsets {tp.topic} [{tp.partition}]: {exc}") from exc


def delete_records(bootstrap: str, topic: str, before: Mapping[int, int]) -> None:
    """Advance the log start offset of each partition to ``before[partition]`` (DeleteRecords)."""
    tps = [TopicPartition(topic, p, o) for p, o in sorted(before.items())]
    client = admin(bootstrap)
    _wait(client.delete_records(tps, operation_timeout=30), "delete records")


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    """Grow ``topic`` to ``total`` partitions."""
    from confluent_kafka.admin import NewPartitions

    client = admin(bootstrap)
    _wait(client.create_partitions([NewPartitions(topic, total)], operation_timeout=30), "add partitions")


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    """A producer ready for ``begin_transaction()``: ``commit_transaction()`` or leave it open."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer
