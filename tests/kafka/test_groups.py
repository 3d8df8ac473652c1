"""Consumer-group offsets on the real broker (``recovery.kafka.groups``, ``stream-recovery group``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from recovery.cli import cli
from recovery.errors import GroupActive, OffsetOutsideLog
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import (
    expired_offsets,
    group_offsets,
    read_offsets_file,
    set_group_offsets,
)
from recovery.model import TopicPartition


@pytest.fixture
def member(bootstrap: str) -> Iterator[Callable[[str, str], Consumer]]:
    """``member(group, topic)``: a consumer that has joined ``group`` and holds an assignment."""
    consumers: list[Consumer] = []

    def join(group: str, topic: str) -> Consumer:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0}
        )
        consumers.append(consumer)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer got no assignment within 30 s"
            consumer.poll(0.2)
        return consumer

    yield join
    for consumer in consumers:
        consumer.close()


def test_set_and_read_group_offsets(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, topic_name: str
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 10, partitions=2)
    group = f"{topic_name}-g"
    wanted = {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 5}

    change = set_group_offsets(kafka, group, wanted)
    after = group_offsets(kafka, group)

    before = change.before
    assert (change.executed, change.exit_code, dict(change.offsets)) == (True, 0, wanted)
    assert (before.state, before.members, dict(before.offsets)) == ("Dead", 0, {})
    assert (after.state, after.members, dict(after.offsets)) == ("Empty", 0, wanted)
    assert after.retention_minutes == 10080  # the broker default (KIP-186)


def test_set_is_refused_while_a_member_is_active(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, topic_name: str, member
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)
    group = f"{topic_name}-g"
    set_group_offsets(kafka, group, {TopicPartition(topic, 0): 1})
    member(group, topic)

    with pytest.raises(GroupActive, match=r"is Stable with 1 active member\(s\).*Nothing was written"):
        set_group_offsets(kafka, group, {TopicPartition(topic, 0): 4})

    assert dict(group_offsets(kafka, group).offsets) == {TopicPartition(topic, 0): 1}


def test_cli_set_refused_while_member_active_exit_1(
    bootstrap: str, new_topic: Callable[..., str], produce, topic_name: str, member, tmp_path: Path, capfd
) -> None:
    from recovery.cli import main

    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)
    group = f"{topic_name}-g"
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,2\n")
    member(group, topic)
    capfd.readouterr()

    with pytest.raises(SystemExit) as exited:
        main(["group", "set", group, "-b", bootstrap, "--from-file", str(plan), "--execute"])

    out, err = capfd.readouterr()
    assert (exited.value.code, out) == (1, "")
    assert err.startswith(f"Error: group {group} is Stable with 1 active member(s)")
    assert dict(group_offsets(KafkaConfig(bootstrap), group).offsets) == {}


def test_offsets_outside_the_log_are_refused(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, topic_name: str
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)

    with pytest.raises(OffsetOutsideLog, match=r"\[0\] offset 9 is outside the log \[0, 5\]"):
        set_group_offsets(kafka, f"{topic_name}-g", {TopicPartition(topic, 0): 9})


def test_expired_offsets_are_reported(
    runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], produce, topic_name: str, tmp_path: Path
) -> None:
    """An export taken earlier names the offsets a group lost (here: the group was deleted)."""
    topic = new_topic(partitions=2)
    produce(topic, 10, partitions=2)
    group = f"{topic_name}-g"
    kafka = KafkaConfig(bootstrap)
    set_group_offsets(kafka, group, {TopicPartition(topic, 0): 2, TopicPartition(topic, 1): 4})
    export = runner.invoke(cli, ["group", "show", group, "-b", bootstrap, "--output", "csv"])
    assert export.exit_code == 0, export.output
    saved = tmp_path / "export.csv"
    saved.write_text(export.stdout)
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    client.delete_consumer_groups([group], request_timeout=10)[group].result(10)

    before = read_offsets_file(saved.read_text().splitlines(), str(saved))
    result = runner.invoke(cli, ["group", "show", group, "-b", bootstrap, "--compare", str(saved)])

    assert export.stdout == (
        "topic,partition,committed_offset,log_start_offset,high_watermark,lag,status\n"
        f"{topic},0,2,0,5,3,OK\n"
        f"{topic},1,4,0,5,1,OK\n"
    )
    assert expired_offsets(before, group_offsets(kafka, group)) == (
        TopicPartition(topic, 0),
        TopicPartition(topic, 1),
    )
    assert result.exit_code == 1
    assert [line.split() for line in result.stdout.splitlines()] == [
        ["TOPIC", "PARTITION", "COMMITTED", "LOG-START", "HIGH-WATERMARK", "LAG", "STATUS"],
        [topic, "0", "0", "5", "EXPIRED"],
        [topic, "1", "0", "5", "EXPIRED"],
    ]
    assert "2 offset(s) of the earlier export are gone from the group" in result.stderr


def test_cli_set_dry_run_then_execute(
    runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], produce, topic_name: str, tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 10, partitions=2)
    group = f"{topic_name}-g"
    plan = tmp_path / "plan.csv"
    plan.write_text(f"topic,partition,offset\n{topic},0,1\n{topic},1,5\n")

    dry = runner.invoke(
        cli, ["group", "set", group, "-b", bootstrap, "--from-file", str(plan), "--output", "csv"]
    )
    unchanged = group_offsets(KafkaConfig(bootstrap), group)
    done = runner.invoke(cli, ["group", "set", group, "-b", bootstrap, "--from-file", str(plan), "--execute"])

    assert dry.exit_code == 1, dry.output  # a dry run with changes pending, as every dry run
    assert dry.stdout == f"topic,partition,current_offset,new_offset\n{topic},0,,1\n{topic},1,,5\n"
    assert "dry run: nothing was written" in dry.stderr
    assert dict(unchanged.offsets) == {}
    assert done.exit_code == 0, done.output
    assert dict(group_offsets(KafkaConfig(bootstrap), group).offsets) == {
        TopicPartition(topic, 0): 1,
        TopicPartition(topic, 1): 5,
    }
    again = runner.invoke(cli, ["group", "set", group, "-b", bootstrap, "--from-file", str(plan)])
    assert again.exit_code == 0, again.output  # nothing would change
