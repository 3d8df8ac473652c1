"""A read-to-end shared with helper processes (``recovery.kafka.read_helper``) reads what one process
reads, on the real broker: transactions, gaps and records deleted under a helper included; a
helper's error is the parent's; a helper ends with its parent; no secret reaches its argv."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from recovery.core.model import Isolation, OffsetRange, TopicPartition
from recovery.errors import KafkaError, KafkaUnavailable
from recovery.kafka import LogReader
from recovery.kafka._retry import Deadline
from recovery.kafka._shared_read import OFFSETS_PER_PROCESS, Helper, ReadState, groups, worth, worth_sharing
from recovery.kafka.config import KafkaConfig
from recovery.local import topics


def tps(topic: str, n: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


def waiting_helper(config: KafkaConfig, topic: str, deadline: Deadline) -> Helper:
    """A helper reading [0] of an empty ``topic`` up to an end of 5, which never comes."""
    waiting = [ReadState(TopicPartition(topic, 0), 0, 5, 0)]
    return Helper.start(config, Isolation.READ_UNCOMMITTED, waiting, deadline, progress=False)


# -- the split (pure) -----------------------------------------------------------------------------


def test_groups_balance_offsets_and_the_heaviest_group_comes_first() -> None:
    a, b, c, d = tps("t", 4)
    assert groups({a: 500, b: 300, c: 300, d: 10}, 2) == [[b, c], [a, d]]
    assert groups({a: 5, b: 5, c: 5}, 3) == [[a], [b], [c]]
    assert groups({a: 5}, 3) == [[a]]  # no empty group
    assert groups({a: 5, b: 1}, 1) == [[a, b]]


def test_a_read_is_shared_only_when_it_is_worth_an_interpreter_start() -> None:
    a, b, c = tps("t", 3)
    assert worth({a: OFFSETS_PER_PROCESS, b: OFFSETS_PER_PROCESS // 2}) == 1
    assert worth({a: 10**9}) == 1  # one partition: one process
    many = worth({a: 10 * OFFSETS_PER_PROCESS, b: 10 * OFFSETS_PER_PROCESS, c: 10 * OFFSETS_PER_PROCESS})
    assert many == min(3, len(os.sched_getaffinity(0)))


def test_a_group_too_small_for_a_helper_is_read_by_the_parent() -> None:
    a, b, c = tps("t", 3)
    big = 4 * OFFSETS_PER_PROCESS
    assert worth_sharing({a: big, b: OFFSETS_PER_PROCESS // 10}) == [[a, b]]
    shares = worth_sharing({a: big, b: big, c: 10})
    assert sorted(tp for group in shares for tp in group) == [a, b, c]
    assert all(c not in group for group in shares[1:])


def test_overlapping_reads_put_the_collector_threshold_back_and_never_switch_it_on() -> None:
    from recovery.kafka.read import _fewer_collections

    before = gc.get_threshold()
    try:
        first, second = _fewer_collections(), _fewer_collections()
        first.__enter__()
        raised = gc.get_threshold()
        second.__enter__()
        first.__exit__(None, None, None)  # the first read ends while the second still runs
        assert gc.get_threshold() == raised and raised[0] > before[0]
        second.__exit__(None, None, None)
        assert gc.get_threshold() == before
        gc.set_threshold(0)  # automatic collection off: a read leaves it off
        with _fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


# -- on the broker ---------------------------------------------------------------------------------


def test_a_shared_read_agrees_with_a_read_in_one_process(
    kafka: KafkaConfig,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    transactional: Callable[..., Producer],
) -> None:
    topic = new_topic(partitions=4)  # [3] stays empty
    produce(topic, 300, partitions=3, timestamp_ms=int(time.time() * 1000))
    producer = transactional(f"{topic}-txn")  # a committed and an aborted transaction in [0]
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    # [0]: 100 records, 1 committed + marker, 1 aborted + marker. Both reads must see one log: a
    # marker written between them would end the second read one offset further.
    topics.wait_for_markers(kafka.bootstrap_servers, topic, 0, 104)
    starts: dict[TopicPartition, int | None] = {tp: None for tp in tps(topic, 4)}
    starts[TopicPartition(topic, 1)] = 40

    for isolation in Isolation:
        alone = LogReader(kafka, starts, isolation, deadline_s=30, processes=1).run()
        shared = LogReader(kafka, starts, isolation, deadline_s=30, processes=3)
        result = shared.run()

        assert result == alone, isolation
        assert [(read.start, read.end) for read in result.reads] == [(0, 104), (40, 100), (0, 100), (0, 0)]
        assert len(shared._helpers) == 2 and all(h.process.returncode == 0 for h in shared._helpers)
        assert sum(read.records for read in result.reads) == 300 - 40 + (
            1 if isolation is Isolation.READ_COMMITTED else 2
        )


def test_gaps_and_records_deleted_before_a_helper_reads_them(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    """The snapshot's gap (a start below the log start) travels to the helper and back; records
    deleted after the snapshot, before the helper fetched them, are skipped and reported there."""
    topic = new_topic(partitions=2)
    produce(topic, 200, partitions=2)  # 100 per partition
    topics.delete_records(bootstrap, topic, {0: 10, 1: 10})
    deleted: list[bool] = []

    def delete_once(_covered: int, _total: int) -> None:
        if not deleted:  # the first report comes after the snapshot, before any helper starts
            topics.delete_records(bootstrap, topic, {0: 30, 1: 30})
            deleted.append(True)

    starts: dict[TopicPartition, int | None] = {tp: 5 for tp in tps(topic, 2)}
    reader = LogReader(kafka, starts, deadline_s=30, processes=2, progress=delete_once)
    result = reader.run()

    assert len(reader._helpers) == 1
    for read in result.reads:
        assert (read.start, read.end, read.records) == (10, 100, 70), read
        assert read.gaps == (OffsetRange(5, 10), OffsetRange(10, 30)), read


def test_a_helpers_error_is_raised_by_the_parent_as_the_same_error(
    kafka: KafkaConfig, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)  # empty: an end of 5 is never reached
    helper = waiting_helper(kafka, topic, Deadline(1.0))
    try:
        with pytest.raises(KafkaUnavailable, match=r"did not reach the end within 1s: .* at 0 of 5"):
            helper.finish(Deadline(20), lambda: None)
    finally:
        helper.stop()
    assert helper.process.returncode == 0


def test_a_helper_ends_when_its_parent_goes_and_no_secret_is_in_its_argv_or_environment(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    secret = "hunter2-not-in-argv"
    config = KafkaConfig(bootstrap, {"ssl.key.password": secret}, timeout_s=20)
    helper = waiting_helper(config, topic, Deadline(60.0))
    try:
        proc = Path(f"/proc/{helper.process.pid}")
        assert secret.encode() not in (proc / "cmdline").read_bytes()
        assert secret.encode() not in (proc / "environ").read_bytes()
        assert helper.process.poll() is None  # waiting for records that never come
        assert helper.process.stdin is not None
        helper.process.stdin.close()  # as when the parent dies: the pipe's end
        assert helper.process.wait(10) == 0
    finally:
        helper.stop()


def test_a_helper_that_dies_without_answering_is_an_error_and_the_progress_adds_up(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    topic = new_topic(partitions=1)  # empty: the helper waits for records that never come
    helper = waiting_helper(kafka, topic, Deadline(60.0))
    try:
        helper.process.kill()
        with pytest.raises(KafkaError, match="ended without an answer"):
            helper.finish(Deadline(20), lambda: None)
    finally:
        helper.stop()

    busy = new_topic(partitions=3, suffix="-busy")
    produce(busy, 90, partitions=3)
    reports: list[tuple[int, int]] = []
    reader = LogReader(
        kafka, dict.fromkeys(tps(busy, 3)), deadline_s=30, processes=3, progress=lambda *r: reports.append(r)
    )
    assert sum(read.records for read in reader.run().reads) == 90
    assert len(reader._helpers) == 2
    assert reports[-1] == (90, 90)


def test_a_read_goes_on_in_one_process_when_no_helper_can_start(
    kafka: KafkaConfig,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = new_topic(partitions=3)
    produce(topic, 30, partitions=3)
    monkeypatch.setattr("sys.executable", "")
    reader = LogReader(kafka, dict.fromkeys(tps(topic, 3)), deadline_s=30, processes=3)
    assert [read.records for read in reader.run().reads] == [10, 10, 10]
    assert reader._helpers == []
