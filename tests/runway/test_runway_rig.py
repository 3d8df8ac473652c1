"""Retention runway against the real broker: the predicted earliest delete time of the record at a
checkpoint's position vs the moment the broker's retention moves the log start past it, and what
validate, the gate, lag and repair --from-file say (one Kafka broker; checkpoints written as files).

The rig's broker checks retention every second (recovery.local.broker.RETENTION_TESTABLE)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from boundary import boundary
from click.testing import CliRunner, Result
from example_rig import RIG

from recovery.api import checkpoint_lag, validate_checkpoint
from recovery.core.model import GateMode, Runway, TopicPartition, Verdict
from recovery.core.runway import RecordStamp
from recovery.gate import prestart_gate
from recovery.kafka import runway_facts as runway_module
from recovery.kafka.config import KafkaConfig
from recovery.kafka.runway_facts import RunwayReader, runway_facts
from recovery.local import topics
from recovery.local.broker import RETENTION_TESTABLE

CHECK_INTERVAL_MS = int(RETENTION_TESTABLE["log.retention.check.interval.ms"])
RETENTION_MS = 20_000
DAY_S = 86_400


def checkpoint(root: Path, topic: str, positions: list[int]) -> Path:
    """A checkpoint whose one committed batch ended at ``positions`` (one per partition)."""
    RIG.write_local(root, RIG.checkpoint_files(topic, [positions]))
    return root


def invoke(*args: str) -> Result:
    """``stream-recovery ...`` behind its real error boundary."""
    return CliRunner().invoke(boundary, list(args))


def now_ms() -> int:
    return int(time.time() * 1000)


def test_the_broker_deletes_unread_records_no_earlier_than_predicted(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(1, {"retention.ms": str(RETENTION_MS), "segment.ms": "2000"})
    written_at = now_ms() - 10_000  # CreateTime 10 s ago: retention may delete them 10 s from now
    topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1, timestamp_ms=written_at))
    # Stamped now, so they land in a new segment (the first is older than segment.ms) that outlives it.
    topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1, start=10))
    chk = checkpoint(tmp_path / "chk", topic, [5])

    report = validate_checkpoint(str(chk), KafkaConfig(bootstrap), runway_warn_s=60)

    (finding,) = report.findings
    assert finding.verdict is Verdict.AT_RISK and report.exit_code == 1
    predicted = written_at + RETENTION_MS
    assert finding.runway == Runway(predicted, written_at, f"retention.ms={RETENTION_MS}")
    assert topics.offset_range(bootstrap, topic, 0)[0] == 0  # not deleted yet

    observed = None
    while now_ms() < predicted + 60_000:
        if topics.offset_range(bootstrap, topic, 0)[0] > 5:
            observed = now_ms()
            break
        time.sleep(0.05)
    assert observed is not None, "retention never deleted the first segment"
    # The segment's newest record is as old as the one at the position (no roll slack), so the
    # broker deletes it at the first retention check after the predicted time.
    assert predicted <= observed <= predicted + CHECK_INTERVAL_MS + 3_000, (predicted, observed)
    assert topics.offset_range(bootstrap, topic, 0)[0] == 10  # the second segment is still there
    after = validate_checkpoint(str(chk), KafkaConfig(bootstrap), runway_warn_s=60)
    assert after.findings[0].verdict is Verdict.BELOW_LOG_START and after.findings[0].records_lost == 5


def test_size_retention_deletes_unread_records_no_sooner_than_the_estimate_says(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """retention.bytes: validate estimates the bytes still to go from the partition's size
    (DescribeLogDirs) and calls the partition AT_RISK; the broker then deletes the unread records only
    after at least that many more bytes were written."""
    from recovery.core.model import TopicPartition
    from recovery.kafka.logdirs import partition_sizes

    limit, segment = 3 * 1024 * 1024, 1024 * 1024  # the smallest segment.bytes Kafka 4 takes
    topic = new_topic(1, {"retention.ms": "-1", "retention.bytes": str(limit), "segment.bytes": str(segment)})
    kafka, tp = KafkaConfig(bootstrap), TopicPartition(topic, 0)

    def write(count: int, start: int) -> None:
        topics.produce(
            bootstrap, topic, [topics.Record(f"k{i}", "x" * 1000, 0) for i in range(start, start + count)]
        )

    write(1000, 0)  # ~1 MiB, none of it read
    size = partition_sizes(kafka, [tp])[tp]
    assert isinstance(size, int) and 1_000_000 < size < segment + 100_000
    report = validate_checkpoint(str(checkpoint(tmp_path / "chk", topic, [0])), kafka, runway_warn_s=3600)

    (finding,) = report.findings
    assert finding.verdict is Verdict.AT_RISK and report.exit_code == 1
    assert finding.runway is not None and finding.runway.earliest_delete_ms is not None
    assert f"retention.ms=-1; retention.bytes={limit}: ~" in finding.runway.reason, finding.runway.reason
    assert "(estimate)" in finding.runway.reason
    to_go = limit - size  # all of the partition is unread: the estimate's bytes to go

    written = 0
    while topics.offset_range(bootstrap, topic, 0)[0] == 0:
        assert written < 6 * segment, "size retention never deleted the first segment"
        write(250, 1000 + written // 1000)
        written += 250 * 1000
        time.sleep(CHECK_INTERVAL_MS / 1000 + 0.2)
    # The first segment (all unread) went only once the bytes after it reached the limit: at least
    # the estimated bytes to go had been written (counting values only: on disk a record takes a
    # little more), so the estimate did not come too late.
    assert written >= to_go, (written, to_go)
    assert topics.offset_range(bootstrap, topic, 0)[0] > 0


def test_compacted_infinite_size_limited_and_caught_up_partitions_say_so(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    kafka = KafkaConfig(bootstrap)
    cases = {
        "compact": ({"cleanup.policy": "compact"}, "compacted (cleanup.policy=compact): not deleted by time"),
        "infinite": ({"retention.ms": "-1"}, "infinite retention (retention.ms=-1)"),
        "bytes": (
            {"retention.ms": "86400000", "retention.bytes": "1048576"},
            "retention.ms=86400000; retention.bytes=1048576: ~",  # estimated from the size on disk
        ),
    }
    for suffix, (config, reason) in cases.items():
        topic = new_topic(2, config, suffix=f"-{suffix}")
        topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=2))
        chk = checkpoint(tmp_path / suffix, topic, [2, 5])  # partition 1 has read all it holds

        report = validate_checkpoint(str(chk), kafka, runway_warn_s=3600)

        reading, caught_up = report.findings
        assert reading.runway is not None and reading.runway.reason.startswith(reason), suffix
        assert reading.runway.oldest_unread_ms is not None and reading.verdict is Verdict.OK
        assert caught_up.runway == Runway(None, None, "nothing unread")
        assert report.exit_code == 0


def test_validate_shows_the_runway_and_exits_1_when_at_risk(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(2)  # the broker's default retention.ms: 7 days
    topics.produce(bootstrap, topic, topics.keyed_records(20, partitions=2))
    chk = str(checkpoint(tmp_path / "chk", topic, [3, 10]))

    at_risk = invoke("validate", chk, "-b", bootstrap, "--runway-warn", "8d")
    healthy = invoke("validate", chk, "-b", bootstrap, "--runway-warn", "PT6H", "--output", "json")
    skipped = invoke("validate", chk, "-b", bootstrap, "--no-runway", "--output", "json")
    plain = invoke("validate", chk, "-b", bootstrap)  # no threshold: the runway is shown, no verdict
    typo = invoke("validate", chk, "-b", bootstrap, "--runway-warn", "6 hours")

    assert at_risk.exit_code == 1, at_risk.output
    header, first, second = at_risk.stdout.splitlines()
    assert header.split()[-3:] == ["SPARK-ON-RESTART", "RUNWAY", "OLDEST-UNREAD"]
    assert first.split()[3] == "AT_RISK" and first.split()[-3] == "runs"
    assert first.split()[-2].startswith("6d2") and first.split()[-1].endswith("s")  # seconds old
    assert second.split()[3] == "OK" and second.split()[-1] == "-"  # read all it holds: no age either
    assert "% action needed: start the query before retention deletes what it has not read" in at_risk.stderr
    assert f"% {topic} [0]: retention may delete unread records in 6d2" in at_risk.stderr

    assert healthy.exit_code == 0, healthy.output
    body = json.loads(healthy.stdout)
    row = body["partitions"][0]
    assert row["verdict"] == "OK" and 6 * DAY_S < row["runway_s"] <= 7 * DAY_S
    assert row["runway_reason"] == "retention.ms=604800000" and 0 <= row["oldest_unread_age_s"] < 600
    assert body["runway_warn_s"] == 6 * 3600
    assert plain.exit_code == 0, plain.output
    assert f"% shortest runway: {topic} [0]: retention may delete unread records in 6d2" in plain.stderr
    assert "(no --runway-warn threshold); retention.ms=604800000" in plain.stderr

    assert skipped.exit_code == 0 and json.loads(skipped.stdout)["partitions"][0]["runway_s"] is None
    assert typo.exit_code == 2 and "--runway-warn" in typo.stderr


def test_the_gate_only_warns_on_a_short_runway(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(1)
    topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1))
    chk = checkpoint(tmp_path / "chk", topic, [4])
    kafka = KafkaConfig(bootstrap)

    with caplog.at_level(logging.WARNING, logger="recovery.gate"):
        report = prestart_gate(str(chk), kafka, mode=GateMode.FAIL, runway_warn_s=8 * DAY_S)

    assert report is not None and [f.verdict for f in report.findings] == [Verdict.AT_RISK]
    assert not report.needs_repair  # starting the job is the cure: no GateFailed
    assert f"retention may delete records the query has not read yet:\n{topic} [0]: " in caplog.text
    assert (chk / "_recovery/topic-ids.json").exists()  # passed as healthy

    (lag,) = checkpoint_lag(str(chk), kafka)
    assert lag.lag == 6 and lag.runway_s is not None and 6 * DAY_S < lag.runway_s <= 7 * DAY_S


def test_from_file_rows_the_checkpoint_does_not_read_exit_2(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(2)
    topics.produce(bootstrap, topic, topics.keyed_records(20, partitions=2))
    chk = checkpoint(tmp_path / "chk", topic, [3, 3])
    before = {p.name: p.read_bytes() for p in (chk / "offsets").iterdir()}
    typo = topic[:-1]  # one letter short
    rows = tmp_path / "positions.csv"
    rows.write_text(f"{topic},0,5\n{typo},0,5\n{topic},9,1\n")

    result = invoke("repair", str(chk), "-b", bootstrap, "--from-file", str(rows), "--execute", "--force")

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"Error: --from-file: the checkpoint does not read {typo} [0], {topic} [9] (closest: {topic}); "
        f"{topic} has partitions 0, 1 (it reads {topic}). Nothing was written.\n"
    )
    assert {p.name: p.read_bytes() for p in (chk / "offsets").iterdir()} == before


def test_a_long_table_shows_what_needs_action_first_and_json_shows_all(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(60)
    topics.produce(bootstrap, topic, topics.keyed_records(120, partitions=60))  # 2 per partition
    topics.delete_records(bootstrap, topic, {57: 2, 58: 2, 59: 2})
    chk = str(checkpoint(tmp_path / "chk", topic, [1] * 60))

    table = invoke("validate", chk, "-b", bootstrap)
    body = invoke("validate", chk, "-b", bootstrap, "--output", "json")

    assert table.exit_code == body.exit_code == 1, table.output
    rows = [line.split() for line in table.stdout.splitlines()[1:]]
    assert len(rows) == 50
    assert [(r[2], r[3]) for r in rows[:3]] == [(str(p), "BELOW_LOG_START") for p in (57, 58, 59)]
    assert "% 10 more partitions OK (not shown)" in table.stderr
    assert "% 10 of 60 partitions not shown: --output json shows all" in table.stderr
    assert len(json.loads(body.stdout)["partitions"]) == 60


def test_the_runway_read_ahead_keeps_the_records_it_found_and_reads_the_log_end_again(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    kafka = KafkaConfig(bootstrap)
    topic = new_topic(2)
    topics.produce(bootstrap, topic, topics.keyed_records(20, partitions=2))
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    reader = RunwayReader(kafka)
    reader.start({(p0, 3), (p0, 10), (p1, 2)})  # p0 at 10: its log end when read ahead
    try:
        reader.wait()  # every guessed position answered
        topics.produce(bootstrap, topic, topics.keyed_records(2, partitions=2, start=20))
        topics.delete_records(bootstrap, topic, {0: 5})  # what the read ahead found at 3 goes
        wanted = {(p0, 3), (p0, 10), (p1, 7)}  # (p1, 7) was not guessed

        ahead = reader.facts(wanted)
    finally:
        reader.close()
    after = runway_facts(kafka, wanted)

    offsets = {k: s.offset if isinstance(s, RecordStamp) else s for k, s in ahead.stamps.items()}
    assert {k: offsets[k] for k in wanted} == {
        (p0, 3): 3,  # found ahead, kept (read now, it is gone)
        (p0, 10): 10,  # at the log end when read ahead, appended since: read again
        (p1, 7): 7,  # not guessed: read
    }
    assert after.stamps[(p0, 3)] == "deleted while being read"
    assert {k: ahead.stamps[k] for k in wanted - {(p0, 3)}} == {
        k: after.stamps[k] for k in wanted - {(p0, 3)}
    }
    assert ahead.retention == after.retention


def test_a_runway_read_ahead_ends_once_the_wanted_positions_are_read_or_when_closed(
    bootstrap: str, new_topic: Callable[..., str]
) -> None:
    # A guessed partition that does not exist never answers: without an end the read would wait
    # out the whole timeout, and its position would say so.
    kafka = KafkaConfig(bootstrap, timeout_s=120)
    topic = new_topic(1)
    topics.produce(bootstrap, topic, topics.keyed_records(5, partitions=1))
    real, never = TopicPartition(topic, 0), TopicPartition(topic, 7)

    reader = RunwayReader(kafka)
    reader.start({(real, 1), (never, 0)})
    facts = reader.facts({(real, 1)})
    reader.close()

    read = facts.stamps[(real, 1)]
    assert isinstance(read, RecordStamp) and read.offset == 1
    assert str(facts.stamps[(never, 0)]).startswith("not read (the read ended before it")

    closed = RunwayReader(kafka)
    closed.start({(never, 0)})
    assert closed.reading
    closed.close()  # the caller failed before asking for the facts
    assert not closed.reading
    assert str(closed.facts(set()).stamps[(never, 0)]).startswith("not read (the read ended before it")
    with pytest.raises(RuntimeError, match="reads once"):
        closed.start({(real, 1)})


@pytest.mark.integration
def test_validate_reads_ahead_in_a_topic_that_does_not_exist_without_creating_it(tmp_path: Path) -> None:
    # The runway's read ahead starts before the cluster is described, so it is assigned the
    # checkpoint's positions in a topic that no longer exists too: on a broker that creates topics
    # on demand (Kafka's default, not the rig's), that must not create it, nor hold up the read of
    # the topic that does exist.
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    from recovery.local.broker import LocalKafkaBroker

    with LocalKafkaBroker(config={"auto.create.topics.enable": "true"}) as eager:
        bootstrap = eager.bootstrap_servers
        topics.create_topic(bootstrap, "orders", 2)
        topics.produce(bootstrap, "orders", topics.keyed_records(6, partitions=2))
        # One committed batch that read orders up to 1 in each partition, and a topic since deleted.
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}}
        ends = {"orders": {"0": 1, "1": 1}, "deleted-orders": {"0": 5, "1": 5}}
        files = {
            "metadata": json.dumps({"id": "5b1c2a4e-0d55-4b8e-9a51-3f3b9d3c1e27"}),
            "offsets/0": f"v1\n{json.dumps(meta)}\n{json.dumps(ends)}",
            "commits/0": 'v1\n{"nextBatchWatermarkMs":0}',
            "sources/0/0": "\x00v1\n" + json.dumps({t: dict.fromkeys(p, 0) for t, p in ends.items()}),
        }
        for rel, text in files.items():
            (tmp_path / "chk" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "chk" / rel).write_text(text)
        started = time.monotonic()
        report = validate_checkpoint(str(tmp_path / "chk"), KafkaConfig(bootstrap, timeout_s=60))
        took = time.monotonic() - started
        # The broker does create on demand: a producer's metadata request (which allows it) does.
        Producer({"bootstrap.servers": bootstrap}).list_topics("made-on-demand", timeout=30)
        listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)

    assert [(f.tp.topic, f.tp.partition, f.verdict) for f in report.findings] == [
        ("deleted-orders", 0, Verdict.TOPIC_GONE),
        ("deleted-orders", 1, Verdict.TOPIC_GONE),
        ("orders", 0, Verdict.OK),
        ("orders", 1, Verdict.OK),
    ]
    for ok in report.findings[2:]:  # the record at 1 was read: its age is known
        assert ok.runway is not None and ok.runway.oldest_unread_ms is not None, ok.runway
    assert "made-on-demand" in listed.topics and "deleted-orders" not in listed.topics
    assert took < 30  # the read did not wait for the gone topic's positions until the timeout


def test_a_large_guess_is_not_read_ahead_and_the_wanted_positions_are_read_after(
    bootstrap: str, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runway_module, "READ_AHEAD_MAX", 1)
    topic = new_topic(1)
    topics.produce(bootstrap, topic, topics.keyed_records(5, partitions=1))
    p0 = TopicPartition(topic, 0)
    reader = RunwayReader(KafkaConfig(bootstrap))

    reader.start({(p0, 1), (p0, 2)})  # two positions: more than the read ahead takes

    assert not reader.reading
    facts = reader.facts({(p0, 2)})
    read = facts.stamps[(p0, 2)]
    assert isinstance(read, RecordStamp) and read.offset == 2 and (p0, 1) not in facts.stamps


def test_a_stamp_cache_spares_the_fetch_and_is_not_used_once_the_topic_is_recreated(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """What ``fleet serve`` keeps across checks: the record stamp at a position does not change while
    its topic lives; a topic recreated since (a new id) is read again, never judged by the old one's."""
    kafka = KafkaConfig(bootstrap)
    topic = new_topic(2)
    topics.produce(bootstrap, topic, topics.keyed_records(40, partitions=2))
    chk = checkpoint(tmp_path / "chk", topic, [10, 10])
    cache = runway_module.StampCache()

    def ages_s() -> dict[int, float]:
        report = validate_checkpoint(str(chk), kafka, stamp_cache=cache)
        at_ms = report.runway_at_ms
        assert at_ms is not None and {f.verdict for f in report.findings} == {Verdict.OK}
        return {f.tp.partition: (f.runway.age_ms(at_ms) or 0) / 1000 for f in report.findings if f.runway}

    assert max(ages_s().values()) < 600  # the records read, written just now
    assert len(cache) == 2
    # The cache is what the next check uses: a stamp planted for partition 0 (a record of 1970).
    ids = validate_checkpoint(str(chk), kafka, runway=False).topic_ids
    cache.keep({(TopicPartition(topic, 0), 10): RecordStamp(10, 1_000)}, ids)
    ages = ages_s()
    assert ages[0] > 50 * 365 * DAY_S and ages[1] < 600

    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2)
    topics.produce(bootstrap, topic, topics.keyed_records(40, partitions=2))
    chk = checkpoint(tmp_path / "chk2", topic, [10, 10])  # a batch after the new records
    assert validate_checkpoint(str(chk), kafka, runway=False).topic_ids[topic] != ids[topic]
    assert max(ages_s().values()) < 600  # read again: the planted stamp was the old topic's
