"""Consumer-group offsets on the real broker (``recovery.kafka.groups``, ``stream-recovery group``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from boundary import boundary
from click.testing import CliRunner, Result
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

from recovery.cli import cli
from recovery.core.model import TopicPartition
from recovery.errors import GroupActive, GroupNotOurs, InvalidInput, OffsetOutsideLog
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import (
    expired_offsets,
    group_offsets,
    read_offsets_file,
    set_group_offsets,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
from chk_builder import write_checkpoint  # tests/checkpoint: a checkpoint as Spark writes it

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def invoke(*args: str) -> Result:
    """``stream-recovery ARGS`` as an operator runs it: stdout, stderr and the exit code."""
    return CliRunner().invoke(boundary, list(args))


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


# -- whose group it is: the marker, refusals, backups (issue 10 part 6) ------------------------------


def foreign_commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """Commit ``offsets`` to ``group`` as an ordinary consumer does (empty commit metadata), then
    leave: the group is Empty, with someone else's offsets."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0}
    )
    try:
        consumer.commit(
            offsets=[KafkaTP(tp.topic, tp.partition, o) for tp, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def run_lag_export(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run(
        [sys.executable, str(JOBS / "lag_export.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_commits_carry_the_marker_and_the_toolkits_group_is_rewritten_without_force(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, topic_name: str
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 10, partitions=2)
    group = f"{topic_name}-g"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    set_group_offsets(kafka, group, {tp0: 1, tp1: 2}, written_by="lag_export")
    first = group_offsets(kafka, group)
    again = set_group_offsets(kafka, group, {tp0: 3, tp1: 4})  # ours: no --force needed

    assert dict(first.metadata) == {tp0: "stream-recovery:1:lag_export", tp1: "stream-recovery:1:lag_export"}
    assert first.foreign == ()
    assert (again.executed, again.backup) == (True, None)
    assert dict(group_offsets(kafka, group).metadata) == {
        tp0: "stream-recovery:1:group set",
        tp1: "stream-recovery:1:group set",
    }


def test_a_foreign_group_is_refused_then_forced_with_a_backup_that_restores_it(
    bootstrap: str,
    new_topic: Callable[..., str],
    produce,
    topic_name: str,
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 20, partitions=2)
    group = f"{topic_name}-g"
    kafka = KafkaConfig(bootstrap, timeout_s=20)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    foreign_commit(bootstrap, group, {tp0: 7, tp1: 9})
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,1\n{topic},1,2\n")
    backups = tmp_path / "backups"
    base = ["group", "set", group, "-b", bootstrap, "--from-file", str(plan), "--backup-dir", str(backups)]

    refused = invoke(*base, "--execute")
    dry = invoke(*base, "--force")
    after_refusals = dict(group_offsets(kafka, group).offsets)
    forced = invoke(*base, "--execute", "--force")
    (backup,) = backups.iterdir()
    overwritten = dict(group_offsets(kafka, group).offsets)
    restored = invoke(
        "group", "set", group, "-b", bootstrap, "--from-file", str(backup), "--execute", "--force"
    )

    assert refused.exit_code == 1, refused.output
    assert refused.stderr.startswith(
        f"Error: group {group} has committed offsets stream-recovery did not write"
    )
    assert "add --force" in refused.stderr
    assert dry.exit_code == 1 and "--execute first saves the group's current offsets" in dry.stderr
    assert after_refusals == {tp0: 7, tp1: 9}  # nothing written, no backup either
    assert forced.exit_code == 0, forced.output
    assert f"the group's previous offsets are saved in {backup}" in forced.stderr
    assert backup.read_text() == f"{topic},0,7\n{topic},1,9\n"
    assert overwritten == {tp0: 1, tp1: 2}
    assert restored.exit_code == 0, restored.output
    assert dict(group_offsets(kafka, group).offsets) == {tp0: 7, tp1: 9}
    assert len(list(backups.iterdir())) == 1  # the restore overwrote our own commits: no backup


def test_a_group_with_a_member_is_refused_even_with_force(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, topic_name: str, member, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)
    group = f"{topic_name}-g"
    member(group, topic)

    with pytest.raises(GroupActive, match=r"1 active member\(s\).*Nothing was written"):
        set_group_offsets(kafka, group, {TopicPartition(topic, 0): 2}, force=True, backup_dir=str(tmp_path))

    assert list(tmp_path.iterdir()) == []


def test_group_set_refuses_a_partition_the_cluster_lacks_as_bad_input(
    bootstrap: str, new_topic: Callable[..., str], produce, topic_name: str, tmp_path: Path
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)
    group = f"{topic_name}-g"
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,1\n{topic},3,1\n")
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},0,1\n{topic},0,2\n")

    unknown = invoke("group", "set", group, "-b", bootstrap, "--from-file", str(plan), "--execute")
    duplicate = invoke("group", "set", group, "-b", bootstrap, "--from-file", str(bad), "--execute")

    assert unknown.exit_code == 2, unknown.output
    assert unknown.stderr == (
        f"Error: no such partition on the cluster: {topic} [3] (PARTITION_GONE). Nothing was written.\n"
    )
    assert duplicate.exit_code == 2, duplicate.output
    assert (
        duplicate.stderr
        == f"Error: --from-file {bad}:2: {topic} [0] is also on line 1 (one offset per partition)\n"
    )
    assert dict(group_offsets(KafkaConfig(bootstrap), group).offsets) == {}
    with pytest.raises(InvalidInput):
        set_group_offsets(KafkaConfig(bootstrap), group, {TopicPartition(f"{topic}-nosuch", 0): 0})


def test_lag_export_refuses_someone_elses_group_and_backs_it_up_with_force(
    bootstrap: str, new_topic: Callable[..., str], produce, topic_name: str, tmp_path: Path
) -> None:
    """The issue's case: lag_export --group billing on an idle group holding 120/115/100."""
    topic = new_topic(partitions=3)
    produce(topic, 390, partitions=3)  # 130 a partition
    checkpoint = write_checkpoint(tmp_path / "chk", topic=topic, partitions=3)  # resumes at 30 each
    group = f"{topic_name}-billing"
    kafka = KafkaConfig(bootstrap, timeout_s=20)
    tps = [TopicPartition(topic, p) for p in range(3)]
    theirs = dict(zip(tps, (120, 115, 100), strict=True))
    foreign_commit(bootstrap, group, theirs)
    state = tmp_path / "state"
    args = (str(checkpoint), "-b", bootstrap, "--group", group)

    refused = run_lag_export(*args, state=state)
    unchanged = dict(group_offsets(kafka, group).offsets)
    forced = run_lag_export(*args, "--force", state=state)
    backups = state / "stream-recovery" / "group-backups"
    (backup,) = backups.iterdir()
    written = group_offsets(kafka, group)
    again = run_lag_export(*args, state=state)  # now the toolkit's group: no --force, no new backup

    assert refused.returncode == 1, refused.stderr
    assert f"Error: group {group} has committed offsets stream-recovery did not write" in refused.stderr
    assert unchanged == theirs
    assert forced.returncode == 0, forced.stderr
    assert f"% the group's previous offsets are saved in {backup}" in forced.stderr
    assert read_offsets_file(backup.read_bytes().splitlines(), str(backup)) == theirs
    assert dict(written.offsets) == dict.fromkeys(tps, 30)
    assert set(written.metadata.values()) == {"stream-recovery:1:lag_export"}
    assert again.returncode == 0, again.stderr
    assert list(backups.iterdir()) == [backup]
    foreign_commit(bootstrap, group, theirs)
    with pytest.raises(GroupNotOurs):  # a library caller gets the same refusal
        set_group_offsets(kafka, group, dict.fromkeys(tps, 1))
