"""Retention hold and release on the real broker: what is raised, what is recorded, what is put back
(the topic's own value, or none of its own), a value changed since left alone, the caps, a kill at
every point of both writing commands, and the records retention would have deleted kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from example_rig import RIG

from recovery.checkpoint.store import FAULT_AT_ENV, FAULT_LOG_ENV
from recovery.cli import cli
from recovery.core.hold import HOLD_MARK, HoldAction, ReleaseAction
from recovery.hold import hold_retention, read_holds, release_retention
from recovery.kafka.config import KafkaConfig
from recovery.kafka.topic_config import TopicValue, alter_topic_values, topic_values
from recovery.local import topics
from recovery.local.broker import RETENTION_TESTABLE

HOUR_MS = 3_600_000
DAY_S = 86_400
MIB = 1024 * 1024
CHECK_INTERVAL_S = int(RETENTION_TESTABLE["log.retention.check.interval.ms"]) / 1000


def checkpoint(root: Path, topic: str, *batches: list[int]) -> str:
    """A stopped query's checkpoint whose committed batches ended at ``batches`` (one offset per
    partition each); files already there are overwritten, ``_recovery/`` is kept."""
    for rel, data in RIG.checkpoint_files(topic, batches).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return str(root)


def aged_topic(
    bootstrap: str, new_topic: Callable[..., str], config: dict[str, str], age_ms: int, suffix: str = ""
) -> str:
    """A topic of 2 partitions holding offsets 0-9 each, the records ``age_ms`` old."""
    topic = new_topic(2, config, suffix=suffix)
    stamp = int(time.time() * 1000) - age_ms
    topics.produce(bootstrap, topic, topics.keyed_records(20, partitions=2, timestamp_ms=stamp))
    return topic


def values(bootstrap: str, topic: str) -> dict[str, TopicValue]:
    answer = topic_values(KafkaConfig(bootstrap), [topic], ("retention.ms", "retention.bytes"))[topic]
    assert not isinstance(answer, str), answer
    return answer


def test_a_hold_raises_records_the_originals_and_a_release_puts_them_back(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    kafka = KafkaConfig(bootstrap)
    own = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    chk = checkpoint(tmp_path / "chk", own, [3, 10])  # partition 1 has read everything

    plan = hold_retention(chk, kafka, keep_s=2 * DAY_S)
    (hold,) = plan.topics
    assert hold.action is HoldAction.RAISE and plan.exit_code == 1
    assert hold.retention_ms == 3 * HOUR_MS
    # the record at offset 3 is 2 h old: kept 2 d more needs 2 d 2 h, rounded up to a minute
    assert 50 * HOUR_MS <= hold.new_retention_ms <= 50 * HOUR_MS + 120_000
    assert 0 < hold.runway_ms <= HOUR_MS and dict(hold.protect_until) == {0: 10, 1: 10}
    assert values(bootstrap, own)["retention.ms"] == TopicValue(str(3 * HOUR_MS), own=True)  # dry run
    assert read_holds(chk) == {}

    done = hold_retention(chk, kafka, keep_s=2 * DAY_S, execute=True, why="INC-42")
    assert done.exit_code == 0 and done.executed
    assert values(bootstrap, own)["retention.ms"] == TopicValue(str(hold.new_retention_ms), own=True)
    record = read_holds(chk)[own]
    assert record.values["retention.ms"].original == str(3 * HOUR_MS)
    assert record.values["retention.ms"].held == str(hold.new_retention_ms)
    assert record.why == "INC-42" and dict(record.protect_until) == {0: 10, 1: 10}

    # Again: enough now; the record still holds the original, never the raised value.
    again = hold_retention(chk, kafka, keep_s=2 * DAY_S, execute=True)
    assert again.topics[0].action is HoldAction.ENOUGH and again.exit_code == 0
    assert read_holds(chk)[own].values["retention.ms"].original == str(3 * HOUR_MS)

    kept = release_retention(chk, kafka, execute=True)
    assert kept.topics[0].action is ReleaseAction.KEEP and kept.exit_code == 1
    assert "partition 0 is at 3, below 10" in kept.topics[0].reason
    assert values(bootstrap, own)["retention.ms"].value == str(hold.new_retention_ms)

    checkpoint(tmp_path / "chk", own, [3, 10], [10, 10])  # the query ran again and caught up
    released = release_retention(chk, kafka, execute=True)
    assert [t.action for t in released.topics] == [ReleaseAction.RESTORE] and released.exit_code == 0
    assert values(bootstrap, own)["retention.ms"] == TopicValue(str(3 * HOUR_MS), own=True)
    assert read_holds(chk) == {} and not (tmp_path / "chk/_recovery/retention-hold.json").exists()


def test_a_topic_without_its_own_value_gets_none_back_and_a_changed_value_is_left(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    kafka = KafkaConfig(bootstrap)
    inherits = aged_topic(bootstrap, new_topic, {}, HOUR_MS)  # the broker's default: 7 days
    changed = aged_topic(bootstrap, new_topic, {"retention.ms": str(7 * DAY_S * 1000)}, HOUR_MS, "-own")
    assert values(bootstrap, inherits)["retention.ms"].own is False
    rows = {}
    for topic in (inherits, changed):
        chk = checkpoint(tmp_path / topic, topic, [0, 0])
        plan = hold_retention(chk, kafka, keep_s=8 * DAY_S, execute=True)
        assert [t.action for t in plan.topics] == [HoldAction.RAISE]
        if topic == changed:  # an operator sets a value of their own meanwhile
            assert alter_topic_values(kafka, {topic: {"retention.ms": str(20 * DAY_S * 1000)}}) == {
                topic: None
            }
        else:
            assert read_holds(chk)[topic].values["retention.ms"].original is None
        result = CliRunner().invoke(
            cli, ["retention", "release", chk, "-b", bootstrap, "--now", "--execute", "--output", "json"]
        )
        assert result.exit_code == 0, result.output
        (rows[topic],) = json.loads(result.stdout)
        assert read_holds(chk) == {}
    assert rows[inherits]["action"] == "RESTORED" and rows[inherits]["changes"] == {"retention.ms": None}
    assert rows[changed]["action"] == "CHANGED" and "left as it is" in rows[changed]["reason"]
    assert values(bootstrap, inherits)["retention.ms"] == TopicValue("604800000", own=False)
    assert values(bootstrap, changed)["retention.ms"] == TopicValue(str(20 * DAY_S * 1000), own=True)


def test_a_size_limited_topic_gets_retention_bytes_and_the_caps_refuse(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    kafka = KafkaConfig(bootstrap)
    topic = new_topic(1, {"retention.ms": "-1", "retention.bytes": str(2 * MIB)})
    stamp = int(time.time() * 1000) - 600_000  # written over the last 10 minutes, as far as a rate goes
    value = "x" * 1000
    topics.produce(
        bootstrap, topic, [topics.Record(f"k{i}", value, 0, stamp + i) for i in range(1000)]
    )  # ~1 MB: under the limit
    chk = Path(checkpoint(tmp_path / "chk", topic, [0]))

    plan = hold_retention(str(chk), kafka, keep_s=DAY_S)
    (hold,) = plan.topics
    assert hold.action is HoldAction.RAISE and hold.new_retention_ms is None
    # ~1 MB unread + a day at ~1 MB per 10 minutes: ~145 MB, in whole MiB
    assert hold.new_retention_bytes is not None and hold.new_retention_bytes % MIB == HOLD_MARK
    assert 130 * MIB < hold.new_retention_bytes < 160 * MIB, hold
    assert set(hold.extra_bytes) == {1} and 0 < hold.extra_bytes[1] <= hold.new_retention_bytes

    capped = hold_retention(str(chk), kafka, keep_s=DAY_S, max_extra_bytes=MIB, execute=True)
    assert capped.topics[0].action is HoldAction.REFUSED and "max_extra_bytes" in capped.topics[0].reason
    floor = hold_retention(str(chk), kafka, keep_s=DAY_S, min_free_ratio=0.999, execute=True)
    assert floor.topics[0].action is HoldAction.REFUSED and "under the floor" in floor.topics[0].reason
    assert capped.exit_code == floor.exit_code == 1
    assert values(bootstrap, topic)["retention.bytes"] == TopicValue(str(2 * MIB), own=True)
    assert read_holds(str(chk)) == {}

    done = hold_retention(str(chk), kafka, keep_s=DAY_S, execute=True)
    assert done.exit_code == 0
    held = int(values(bootstrap, topic)["retention.bytes"].value or 0)
    assert held == done.topics[0].new_retention_bytes


def test_over_the_retention_cap_is_refused_in_one_line_of_reason(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    chk = checkpoint(tmp_path / "chk", topic, [0, 0])
    result = CliRunner().invoke(
        cli, ["retention", "hold", chk, "-b", bootstrap, "--keep", "40d", "--execute"]
    )
    assert result.exit_code == 1, result.output
    assert "REFUSED" in result.stdout and "above the cap --max-retention (30d)" in result.stdout
    assert "% refused topics were not changed" in result.stderr
    assert values(bootstrap, topic)["retention.ms"].value == str(3 * HOUR_MS)


def _run(args: list[str], *, fault_at: int | None = None, log: Path | None = None) -> int:
    env = dict(os.environ)
    env.pop(FAULT_AT_ENV, None)
    if fault_at is not None:
        env[FAULT_AT_ENV] = str(fault_at)
    if log is not None:
        env[FAULT_LOG_ENV] = str(log)
    done = subprocess.run(
        [sys.executable, "-m", "recovery", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def test_hold_and_release_killed_at_every_point_finish_when_run_again(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """kill -9 at each file operation of ``hold --execute`` (and just before the change), then the
    same command again: the topic ends held, the record holds the original. Then the same for
    ``release --execute``: the original is back and the record gone."""
    topic = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    original = TopicValue(str(3 * HOUR_MS), own=True)
    counting = tmp_path / "count"
    points = {}
    for command in ("hold", "release"):
        chk = checkpoint(tmp_path / f"count-{command}", topic, [0, 0])
        if command == "release":
            assert _run(["retention", "hold", chk, "-b", bootstrap, "--keep", "2d", "--execute"]) == 0
        log = counting / f"{command}.log"
        counting.mkdir(exist_ok=True)
        extra = ["--keep", "2d"] if command == "hold" else ["--now"]
        assert _run(["retention", command, chk, "-b", bootstrap, *extra, "--execute"], log=log) == 0
        points[command] = len(log.read_text().splitlines())
        assert "IncrementalAlterConfigs" in log.read_text()
        alter_topic_values(KafkaConfig(bootstrap), {topic: {"retention.ms": original.value}})
    # hold: the record, then the change; release: the change, then the record
    assert points == {"hold": 2, "release": 2}, points

    for at in range(1, points["hold"] + 1):
        chk = checkpoint(tmp_path / f"hold-{at}", topic, [0, 0])
        args = ["retention", "hold", chk, "-b", bootstrap, "--keep", "2d", "--execute"]
        assert _run(args, fault_at=at) == -9, at
        assert _run(args) == 0, at
        record = read_holds(chk)[topic].values["retention.ms"]
        assert record.original == original.value, at
        assert values(bootstrap, topic)["retention.ms"] == TopicValue(record.held, own=True), at
        assert release_retention(chk, KafkaConfig(bootstrap), now=True, execute=True).exit_code == 0
        assert values(bootstrap, topic)["retention.ms"] == original, at

    for at in range(1, points["release"] + 1):
        chk = checkpoint(tmp_path / f"release-{at}", topic, [0, 0])
        assert _run(["retention", "hold", chk, "-b", bootstrap, "--keep", "2d", "--execute"]) == 0
        args = ["retention", "release", chk, "-b", bootstrap, "--now", "--execute"]
        assert _run(args, fault_at=at) == -9, at
        assert _run(args) == 0, at
        assert values(bootstrap, topic)["retention.ms"] == original, at
        assert read_holds(chk) == {}, at
        assert not list(Path(chk, "_recovery").glob("*.tmp*")), at


@pytest.mark.parametrize("held", [False, True], ids=["without-a-hold", "with-a-hold"])
def test_retention_deletes_unread_records_only_without_a_hold(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, held: bool
) -> None:
    """Records 20 s of retention would delete: gone within the predicted runway and a check without
    a hold; with one (kept 2 minutes), still there well after, and the original back on release."""
    retention_ms = 20_000
    topic = new_topic(1, {"retention.ms": str(retention_ms), "segment.ms": "2000"})
    topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1))
    chk = checkpoint(tmp_path / "chk", topic, [0])
    kafka = KafkaConfig(bootstrap)
    plan = hold_retention(chk, kafka, keep_s=120, execute=held)
    (hold,) = plan.topics
    assert hold.action is HoldAction.RAISE and hold.runway_ms is not None and hold.runway_ms <= retention_ms
    deadline = time.monotonic() + (hold.runway_ms / 1000) + 10 * CHECK_INTERVAL_S + 5
    while time.monotonic() < deadline and topics.offset_range(bootstrap, topic, 0)[0] == 0:
        time.sleep(0.5)
    start = topics.offset_range(bootstrap, topic, 0)[0]
    if not held:
        assert start == 10, "retention never deleted the unread records"
        return
    assert start == 0, "the hold did not keep the unread records"
    assert values(bootstrap, topic)["retention.ms"].value == str(hold.new_retention_ms)
    assert release_retention(chk, kafka, now=True, execute=True).exit_code == 0
    assert values(bootstrap, topic)["retention.ms"] == TopicValue(str(retention_ms), own=True)


@pytest.mark.parametrize("held", [False, True], ids=["without-a-hold", "with-a-hold"])
def test_size_retention_deletes_unread_records_only_without_a_hold(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, held: bool
) -> None:
    """retention.bytes=3 MiB with 1 MiB segments: writing 5 MiB more deletes the unread first
    segment without a hold; with one (a day's writes at the rate the records' times say), the log
    keeps every record, and the release puts the 3 MiB back."""
    limit, segment = 3 * MIB, MIB  # the smallest segment.bytes Kafka 4 takes
    topic = new_topic(1, {"retention.ms": "-1", "retention.bytes": str(limit), "segment.bytes": str(segment)})
    stamp = int(time.time() * 1000) - 3_600_000  # an hour of writes so far, as the rate goes

    def write(count: int, start: int) -> None:
        records = [topics.Record(f"k{i}", "x" * 1000, 0, stamp + i) for i in range(start, start + count)]
        topics.produce(bootstrap, topic, records)

    write(2000, 0)  # ~2 MiB, none of it read
    chk = checkpoint(tmp_path / "chk", topic, [0])
    kafka = KafkaConfig(bootstrap)
    plan = hold_retention(chk, kafka, keep_s=DAY_S, execute=held)
    (hold,) = plan.topics
    assert hold.action is HoldAction.RAISE and hold.new_retention_ms is None
    # ~2 MB unread + a day at ~2 MB an hour
    assert hold.new_retention_bytes is not None and 40 * MIB < hold.new_retention_bytes < 60 * MIB, hold
    for n in range(10):
        write(500, 2000 + 500 * n)  # 5 MB more, in steps the retention check sees
        time.sleep(CHECK_INTERVAL_S + 0.2)
    start = topics.offset_range(bootstrap, topic, 0)[0]
    if not held:
        assert start > 0, "size retention never deleted the unread first segment"
        return
    assert start == 0, "the hold did not keep the unread records"
    assert release_retention(chk, kafka, now=True, execute=True).exit_code == 0
    assert values(bootstrap, topic)["retention.bytes"] == TopicValue(str(limit), own=True)


def test_two_queries_holding_one_topic_put_it_back_in_any_order(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two checkpoints read one topic and each holds it, the second further: released in the order
    they were held, the first waits for the second (its value carries a hold's mark), and the topic
    ends at its own original value, not at the first hold's."""
    kafka = KafkaConfig(bootstrap)
    topic = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    first = checkpoint(tmp_path / "first", topic, [3, 10])
    second = checkpoint(tmp_path / "second", topic, [0, 0])

    assert hold_retention(first, kafka, keep_s=2 * DAY_S, execute=True).exit_code == 0
    held_first = values(bootstrap, topic)["retention.ms"].value
    assert hold_retention(second, kafka, keep_s=3 * DAY_S, execute=True).exit_code == 0
    held_second = values(bootstrap, topic)["retention.ms"].value
    assert read_holds(second)[topic].values["retention.ms"].original == held_first
    assert int(held_second or 0) > int(held_first or 0)

    waits = release_retention(first, kafka, now=True, execute=True)
    assert waits.topics[0].action is ReleaseAction.KEEP and waits.exit_code == 1
    assert "raised further by another retention hold" in waits.topics[0].reason
    assert values(bootstrap, topic)["retention.ms"].value == held_second and read_holds(first)

    assert release_retention(second, kafka, now=True, execute=True).exit_code == 0
    assert values(bootstrap, topic)["retention.ms"].value == held_first
    assert release_retention(first, kafka, now=True, execute=True).exit_code == 0
    assert values(bootstrap, topic)["retention.ms"] == TopicValue(str(3 * HOUR_MS), own=True)
    assert read_holds(first) == read_holds(second) == {}


def test_fleet_hold_holds_only_the_jobs_that_opted_in_and_fleet_release_puts_them_back(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    held = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    plain = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS, "-plain")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "fleet.toml").write_text(
        f'[cluster.main]\nbootstrap_servers = "{bootstrap}"\n\n'
        f'[job.held]\ncluster = "main"\ncheckpoint = "{checkpoint(tmp_path / "a", held, [0, 0])}"\n'
        'hold = "2d"\n\n'
        f'[job.plain]\ncluster = "main"\ncheckpoint = "{checkpoint(tmp_path / "b", plain, [0, 0])}"\n'
    )

    planned = CliRunner().invoke(cli, ["fleet", "hold", str(conf)])
    assert planned.exit_code == 1, planned.output  # a dry run with a raise pending
    assert values(bootstrap, held)["retention.ms"].value == str(3 * HOUR_MS)

    done = CliRunner().invoke(cli, ["fleet", "hold", str(conf), "--execute", "--output", "json"])
    assert done.exit_code == 0, done.output
    rows = {r["job"]: r for r in json.loads(done.stdout)}
    assert rows["held"]["action"] == "RAISED" and rows["held"]["topic"] == held
    assert rows["plain"]["action"] == "SKIPPED" and rows["plain"]["reason"] == "no hold key: not opted in"
    assert "1 job(s) without a hold key: not held" in done.stderr
    assert values(bootstrap, held)["retention.ms"].value == str(rows["held"]["new_retention_ms"])
    assert values(bootstrap, plain)["retention.ms"].value == str(3 * HOUR_MS)

    released = CliRunner().invoke(cli, ["fleet", "release", str(conf), "--now", "--execute"])
    assert released.exit_code == 0, released.output
    lines = [line.split() for line in released.stdout.splitlines()]
    assert lines[0][:3] == ["JOB", "TOPIC", "ACTION"] and lines[1][:3] == ["held", held, "RESTORED"]
    assert values(bootstrap, held)["retention.ms"] == TopicValue(str(3 * HOUR_MS), own=True)


def test_a_hold_killed_before_its_change_is_undone_by_a_release_and_a_killed_second_hold_too(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """kill -9 after the record, before the change (the second of hold's two points), then a release
    instead of a rerun: nothing is left raised. Then a first hold done and a second, further one
    killed there: the release still knows the first one's value as its own and puts the original back."""
    topic = aged_topic(bootstrap, new_topic, {"retention.ms": str(3 * HOUR_MS)}, 2 * HOUR_MS)
    original = TopicValue(str(3 * HOUR_MS), own=True)
    release = ["--now", "--execute"]

    chk = checkpoint(tmp_path / "killed", topic, [0, 0])
    assert _run(["retention", "hold", chk, "-b", bootstrap, "--keep", "2d", "--execute"], fault_at=2) == -9
    assert read_holds(chk) and values(bootstrap, topic)["retention.ms"] == original
    assert _run(["retention", "release", chk, "-b", bootstrap, *release]) == 0
    assert values(bootstrap, topic)["retention.ms"] == original and read_holds(chk) == {}

    chk = checkpoint(tmp_path / "second", topic, [0, 0])
    assert _run(["retention", "hold", chk, "-b", bootstrap, "--keep", "2d", "--execute"]) == 0
    first = values(bootstrap, topic)["retention.ms"].value
    assert _run(["retention", "hold", chk, "-b", bootstrap, "--keep", "3d", "--execute"], fault_at=2) == -9
    held = read_holds(chk)[topic].values["retention.ms"]
    assert held.earlier == (first,) and held.held != first and held.original == original.value
    assert values(bootstrap, topic)["retention.ms"].value == first  # the second never got there
    assert _run(["retention", "release", chk, "-b", bootstrap, *release]) == 0
    assert values(bootstrap, topic)["retention.ms"] == original and read_holds(chk) == {}
