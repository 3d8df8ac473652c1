"""Offset ranges, timestamp lookups and topic identity on the real broker (``recovery.kafka.offsets``,
``recovery.kafka.admin``) and the ``offsets`` command."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from recovery.cli import cli
from recovery.core.model import Isolation, NoMatch, OffsetRange, TopicPartition
from recovery.core.specs import TimeKind, TimeSpec, iso_utc, parse_topic_partitions, topic_regex
from recovery.errors import KafkaUnavailable, NoOffsetForTime, TopicNotFound
from recovery.kafka import (
    KafkaAdmin,
    MissingPartition,
    MissingReason,
    OffsetRow,
    PartitionOffsets,
    TimeLookup,
    admin_for,
    offset_ranges,
    offset_table,
    offsets_for_time,
    topic_ids,
)
from recovery.kafka.config import KafkaConfig
from recovery.kafka.values import ListedTopic
from recovery.local import topics
from recovery.local.broker import LocalKafkaBroker
from recovery.local.topics import Record

# Recent timestamps: records older than retention.ms (7 days) are deleted by the rig's fast retention.
T0 = (int(time.time() * 1000) // 1000) * 1000 - 3_600_000


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


def produce_at(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    records = [Record(f"k{i}", f"v{i}", partition, ts) for i, ts in enumerate(timestamps)]
    topics.produce(bootstrap, topic, records)


def test_offset_ranges_of_each_partition(kafka: KafkaConfig, new_topic: Callable[..., str], produce) -> None:
    topic = new_topic(partitions=3)
    produce(topic, 10, partitions=2)  # 5 records each in [0] and [1]; [2] stays empty

    ranges = offset_ranges(kafka, [tp(topic, 0), tp(topic, 1), tp(topic, 2)])

    topic_id = topic_ids(kafka, [topic])[topic]
    assert topic_id is not None and len(topic_id) == 22
    assert set(topic_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert ranges == {
        tp(topic, 0): PartitionOffsets(tp(topic, 0), 0, 5, None, topic_id),
        tp(topic, 1): PartitionOffsets(tp(topic, 1), 0, 5, None, topic_id),
        tp(topic, 2): PartitionOffsets(tp(topic, 2), 0, 0, None, topic_id),
    }
    assert ranges[tp(topic, 0)].range == OffsetRange(0, 5)  # type: ignore[union-attr]


def test_each_time_spec(kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    produce_at(bootstrap, topic, 0, [T0 + 0, T0 + 1000, T0 + 2000, T0 + 3000])
    tps = [tp(topic)]

    def lookup(spec: TimeSpec) -> TimeLookup:
        result = offsets_for_time(kafka, tps, spec)[tp(topic)]
        assert isinstance(result, TimeLookup)
        return result

    assert lookup(TimeSpec(TimeKind.EARLIEST)).offset == 0
    assert lookup(TimeSpec(TimeKind.LATEST)).offset == 4
    assert lookup(TimeSpec(TimeKind.MAX_TIMESTAMP)) == TimeLookup(
        tp(topic), TimeSpec(TimeKind.MAX_TIMESTAMP), 3, T0 + 3000
    )
    # KIP-79: the first offset whose timestamp is >= T, between records and exactly on one.
    assert lookup(TimeSpec(TimeKind.TIMESTAMP, T0 + 1500)) == TimeLookup(
        tp(topic), TimeSpec(TimeKind.TIMESTAMP, T0 + 1500), 2, T0 + 2000
    )
    assert lookup(TimeSpec(TimeKind.TIMESTAMP, T0 + 1000)).offset == 1
    assert lookup(TimeSpec(TimeKind.TIMESTAMP, 0)).offset == 0


def test_create_time_out_of_order(kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]) -> None:
    """CreateTime is set by producers: the first offset with timestamp >= T may follow a larger one."""
    topic = new_topic(partitions=1)
    produce_at(bootstrap, topic, 0, [T0 + 5000, T0 + 1000, T0 + 3000, T0 + 2000, T0 + 4000])

    at_2500 = offsets_for_time(kafka, [tp(topic)], T0 + 2500)[tp(topic)]
    at_4500 = offsets_for_time(kafka, [tp(topic)], T0 + 4500)[tp(topic)]
    max_ts = offsets_for_time(kafka, [tp(topic)], TimeSpec(TimeKind.MAX_TIMESTAMP))[tp(topic)]

    # Offset 0 (T0+5000) is the first record with a timestamp >= T0+2500 and >= T0+4500.
    assert at_2500 == TimeLookup(tp(topic), TimeSpec(TimeKind.TIMESTAMP, T0 + 2500), 0, T0 + 5000)
    assert at_4500 == TimeLookup(tp(topic), TimeSpec(TimeKind.TIMESTAMP, T0 + 4500), 0, T0 + 5000)
    # max-timestamp is not the last offset (KIP-734).
    assert max_ts == TimeLookup(tp(topic), TimeSpec(TimeKind.MAX_TIMESTAMP), 0, T0 + 5000)


def test_timestamp_later_than_every_record_follows_the_no_match_policy(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce_at(bootstrap, topic, 0, [T0, T0 + 1000])  # [1] stays empty
    topics.delete_records(bootstrap, topic, {0: 1})
    tps = [tp(topic, 0), tp(topic, 1)]
    later = T0 + 60_000
    spec = TimeSpec(TimeKind.TIMESTAMP, later)

    latest = offsets_for_time(kafka, tps, later, no_match=NoMatch.LATEST)
    earliest = offsets_for_time(kafka, tps, later, no_match=NoMatch.EARLIEST)
    with pytest.raises(NoOffsetForTime) as failed:
        offsets_for_time(kafka, tps, later, no_match=NoMatch.FAIL)

    assert latest == {
        tp(topic, 0): TimeLookup(tp(topic, 0), spec, 2, None, NoMatch.LATEST),
        tp(topic, 1): TimeLookup(tp(topic, 1), spec, 0, None, NoMatch.LATEST),
    }
    assert earliest == {
        tp(topic, 0): TimeLookup(tp(topic, 0), spec, 1, None, NoMatch.EARLIEST),
        tp(topic, 1): TimeLookup(tp(topic, 1), spec, 0, None, NoMatch.EARLIEST),
    }
    assert failed.value.partitions == (tp(topic, 0), tp(topic, 1))
    assert str(failed.value).startswith(
        f"no_match 'fail': no record at or after {later} ({iso_utc(later)}) in {topic} [0], {topic} [1];"
    )


def test_transactions_last_stable_offset_below_high_watermark(
    kafka: KafkaConfig, new_topic: Callable[..., str], transactional: Callable[..., Producer]
) -> None:
    topic = new_topic(partitions=1)
    committer = transactional(f"{topic}-a")
    committer.begin_transaction()
    for i in range(3):
        committer.produce(topic, key=b"c", value=b"committed-%d" % i, partition=0)
    committer.commit_transaction(30)  # offsets 0-2, commit marker at 3
    committer.begin_transaction()
    for i in range(2):
        committer.produce(topic, key=b"a", value=b"aborted-%d" % i, partition=0)
    committer.flush(30)  # on the broker before the abort, so they take offsets 4-5
    committer.abort_transaction(30)  # abort marker at 6
    # Another producer's record could otherwise take offset 6, before the abort marker.
    topics.wait_for_markers(kafka.bootstrap_servers, topic, 0, 7)
    opener = transactional(f"{topic}-open")
    opener.begin_transaction()
    opener.produce(topic, key=b"o", value=b"open", partition=0)
    opener.flush(30)  # offset 7, in a transaction still open

    committed = offset_ranges(kafka, [tp(topic)], Isolation.READ_COMMITTED)[tp(topic)]
    uncommitted = offset_ranges(kafka, [tp(topic)], Isolation.READ_UNCOMMITTED)[tp(topic)]
    opener.abort_transaction(30)

    assert isinstance(committed, PartitionOffsets) and isinstance(uncommitted, PartitionOffsets)
    assert (committed.log_start, committed.last_stable, committed.high_watermark) == (0, 7, 8)
    assert committed.range == OffsetRange(0, 7)
    assert uncommitted.last_stable is None
    assert uncommitted.range == OffsetRange(0, 8)


def test_deleted_records_move_the_log_start(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], produce
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 20, partitions=2, timestamp_ms=T0)
    topics.delete_records(bootstrap, topic, {0: 4, 1: 10})

    spec = TimeSpec(TimeKind.TIMESTAMP, T0)
    table = offset_table(kafka, [tp(topic, 0), tp(topic, 1)], spec, no_match=NoMatch.LATEST)

    assert table.exit_code == 0
    assert [(r.offsets.range, r.lookup.offset) for r in table.rows.values() if isinstance(r, OffsetRow)] == [
        (OffsetRange(4, 10), 4),
        (OffsetRange(10, 10), 10),  # every record deleted: no match, latest
    ]


def test_missing_topics_and_partitions_are_reported_not_omitted(
    kafka: KafkaConfig, new_topic: Callable[..., str], topic_name: str
) -> None:
    topic = new_topic(partitions=2)
    gone = topic_name + "-never-created"

    ranges = offset_ranges(kafka, [tp(topic, 1), tp(topic, 2), tp(gone, 0)])

    assert ranges[tp(topic, 2)] == MissingPartition(tp(topic, 2), MissingReason.PARTITION_GONE)
    assert ranges[tp(gone, 0)] == MissingPartition(tp(gone, 0), MissingReason.TOPIC_GONE)
    assert isinstance(ranges[tp(topic, 1)], PartitionOffsets)
    assert list(ranges) == sorted(ranges)
    assert topic_ids(kafka, [gone]) == {gone: None}


def test_selections_by_regex_and_partition_spec(kafka: KafkaConfig, new_topic: Callable[..., str]) -> None:
    first = new_topic(partitions=4, suffix="-a")
    second = new_topic(partitions=2, suffix="-b")
    prefix = first[:-2]
    wait_until_listed(kafka, first, second)

    by_regex = offset_ranges(kafka, topic_regex(prefix + "-.*"))
    by_range = offset_ranges(kafka, parse_topic_partitions(f"{first}:1-3,{second}:-1"))
    by_list = offset_ranges(kafka, parse_topic_partitions(f"{first}:0,3,9"))

    assert list(by_regex) == [tp(first, p) for p in range(4)] + [tp(second, 0), tp(second, 1)]
    # A regex selection's topics are described beside its ListOffsets: the same ids as by name.
    ids = topic_ids(kafka, [first, second])
    assert {r.tp: r.topic_id for r in by_regex.values() if isinstance(r, PartitionOffsets)} == {
        t: ids[t.topic] for t in by_regex
    }
    assert None not in ids.values()
    assert list(by_range) == [tp(first, 1), tp(first, 2), tp(second, 0)]
    assert list(by_list) == [tp(first, 0), tp(first, 3), tp(first, 9)]
    assert by_list[tp(first, 9)] == MissingPartition(tp(first, 9), MissingReason.PARTITION_GONE)
    with pytest.raises(TopicNotFound, match="matches"):
        offset_ranges(kafka, topic_regex(prefix + "-zzz.*"))


def test_a_listed_topic_gone_before_it_is_described_is_left_out_and_a_named_one_reported(
    kafka: KafkaConfig, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    gone = topic + "-deleted-after-listing"
    asked = [tp(topic, 0), tp(gone, 0)]
    admin = admin_for(kafka)
    listed = {topic: ListedTopic(topic, 1, False), gone: ListedTopic(gone, 1, False)}

    by_listing = admin.offset_ranges(asked, topics=listed)  # as a regex selection resolved them
    by_name = admin.offset_ranges(asked)

    assert list(by_listing) == [tp(topic, 0)] and isinstance(by_listing[tp(topic, 0)], PartitionOffsets)
    assert by_name[tp(gone, 0)] == MissingPartition(tp(gone, 0), MissingReason.TOPIC_GONE)


def test_recreated_topic_has_a_new_topic_id(
    kafka: KafkaConfig, bootstrap: str, new_topic: Callable[..., str], produce
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 5, partitions=1)
    before = offset_ranges(kafka, [tp(topic)])[tp(topic)]

    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 1)
    after = offset_ranges(kafka, [tp(topic)])[tp(topic)]

    assert isinstance(before, PartitionOffsets) and isinstance(after, PartitionOffsets)
    assert before.topic_id != after.topic_id
    assert (before.high_watermark, after.high_watermark) == (5, 0)
    assert topic_ids(kafka, [topic]) == {topic: after.topic_id}


def wait_until_listed(kafka: KafkaConfig, *names: str) -> None:
    """A new topic reaches the broker's metadata a moment after CreateTopics returns (KRaft)."""
    deadline = time.monotonic() + 10
    while not set(names) <= set(admin_for(kafka).topic_names()):
        assert time.monotonic() < deadline, f"{names} not listed after 10 s"
        time.sleep(0.1)


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_table(runner: CliRunner, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    produce_at(bootstrap, topic, 0, [T0, T0 + 1000])
    at = T0 + 500

    result = runner.invoke(
        cli,
        ["offsets", "-b", bootstrap, "--topic", topic, "--time", str(at), "--no-match", "latest"],
    )

    assert result.exit_code == 0, result.output
    header, row0, row1 = result.output.splitlines()
    assert header.split() == [
        "TOPIC", "PARTITION", "LOG-START", "HIGH-WATERMARK", "LAST-STABLE", "OFFSET", "TIMESTAMP", "NOTE"
    ]  # fmt: skip
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((T0 + 1000) // 1000)) + ".000Z"
    # LAST-STABLE is empty: asked for only under read_committed.
    assert row0.split() == [topic, "0", "0", "2", "1", iso]
    assert row1.split()[:5] == [topic, "1", "0", "0", "0"]
    assert row1.endswith(f"no record at or after {iso_utc(at)}: latest")


def test_cli_json_keys_and_values(runner: CliRunner, bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    produce_at(bootstrap, topic, 0, [T0, T0 + 1000, T0 + 2000])
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((T0 + 1000) // 1000)) + "Z"

    result = runner.invoke(
        cli,
        ["offsets", "-b", bootstrap, "--topic-partitions", f"{topic}:0,4", "--time", iso, "--output", "json"],
    )

    assert result.exit_code == 1, result.output  # partition 4 does not exist
    topic_id = topic_ids(KafkaConfig(bootstrap), [topic])[topic]
    assert json.loads(result.output) == [
        {
            "topic": topic,
            "partition": 0,
            "topic_id": topic_id,
            "status": "OK",
            "log_start_offset": 0,
            "high_watermark": 3,
            "last_stable_offset": None,  # asked for only under read_committed
            "time": str(T0 + 1000),
            "offset": 1,
            "timestamp": T0 + 1000,
            "no_match": None,
        },
        {
            "topic": topic,
            "partition": 4,
            "topic_id": None,
            "status": "PARTITION_GONE",
            "log_start_offset": None,
            "high_watermark": None,
            "last_stable_offset": None,
            "time": None,
            "offset": None,
            "timestamp": None,
            "no_match": None,
        },
    ]


def test_cli_csv(runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], produce) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 4, partitions=2)

    result = runner.invoke(
        cli, ["offsets", "-b", bootstrap, "--topic", topic, "--time", "earliest", "--output", "csv"]
    )

    assert result.exit_code == 0, result.output
    topic_id = topic_ids(KafkaConfig(bootstrap), [topic])[topic]
    assert result.output == (
        "topic,partition,topic_id,status,log_start_offset,high_watermark,last_stable_offset,time,offset,"
        "timestamp,no_match\n"
        f"{topic},0,{topic_id},OK,0,2,,earliest,0,,\n"
        f"{topic},1,{topic_id},OK,0,2,,earliest,0,,\n"
    )


def test_cli_no_match_fail_prints_nothing_on_stdout(
    bootstrap: str, new_topic: Callable[..., str], capfd: pytest.CaptureFixture[str]
) -> None:
    from recovery.cli import main

    topic = new_topic(partitions=1)
    produce_at(bootstrap, topic, 0, [T0])

    with pytest.raises(SystemExit) as exited:
        main(["offsets", "-b", bootstrap, "--topic", topic, "--time", str(T0 + 1), "--no-match", "fail"])

    out, err = capfd.readouterr()
    assert (exited.value.code, out) == (1, "")
    assert err == (
        f"Error: --no-match 'fail': no record at or after {T0 + 1} ({iso_utc(T0 + 1)}) in {topic} [0]; "
        "'latest' or 'earliest' would use the log end or the log start there instead\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--time", "yesterday"], "expected earliest, latest, max-timestamp"),
        (["--time", "-4"], "only -1 (latest), -2 (earliest) and -3"),
        (["--topic-partitions", "x:5-2"], "is empty"),
    ],
    ids=["bad-time", "unsupported-special", "empty-range"],
)
def test_cli_bad_input_is_exit_2(args: list[str], message: str) -> None:
    from recovery.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["offsets", "-b", "127.0.0.1:1", *(["--topic", "x"] if "--time" in args else []), *args])
    assert exited.value.code == 2


def test_paused_broker_is_a_clear_error_with_exit_3_and_no_output(
    broker: LocalKafkaBroker,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    capfd: pytest.CaptureFixture[str],
) -> None:
    from recovery.cli import main

    topic = new_topic(partitions=2)
    produce(topic, 4, partitions=2)
    capfd.readouterr()  # the rig's producer logs on stderr
    started = time.monotonic()
    broker.pause()
    try:
        with pytest.raises(SystemExit) as exited:
            main(["offsets", "-b", bootstrap, "--topic", topic, "--timeout", "4"])
        with pytest.raises(KafkaUnavailable, match="no answer from the Kafka cluster"):
            offset_ranges(KafkaConfig(bootstrap, timeout_s=3), [tp(topic)])
    finally:
        broker.resume()
    out, err = capfd.readouterr()
    assert exited.value.code == 3
    assert out == ""
    assert err.startswith("Error: ") and "no answer from the Kafka cluster at" in err
    assert err.count("\n") == 1
    assert time.monotonic() - started < 60
    # The broker works again for the tests that follow.
    assert isinstance(offset_ranges(KafkaConfig(bootstrap), [tp(topic)])[tp(topic)], PartitionOffsets)


def test_a_broker_that_answers_again_within_the_deadline_is_retried(
    broker: LocalKafkaBroker, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    """Timeouts are transient: retried with backoff until the deadline, then the full answer."""
    import threading

    topic = new_topic(partitions=2)
    produce(topic, 4, partitions=2)
    config = KafkaConfig(bootstrap, timeout_s=30)
    admin = KafkaAdmin(config)
    admin.topic_names()  # connected before the pause, as a long-running caller would be
    broker.pause()
    resumer = threading.Timer(4.0, broker.resume)
    resumer.start()
    try:
        started = time.monotonic()
        ranges = admin.offset_ranges([tp(topic, 0), tp(topic, 1)])
        waited = time.monotonic() - started
    finally:
        resumer.cancel()
        broker.resume()

    assert waited >= 3.5
    assert [r.range for r in ranges.values() if isinstance(r, PartitionOffsets)] == [
        OffsetRange(0, 2),
        OffsetRange(0, 2),
    ]


def test_cli_latest_under_read_committed_is_the_last_stable_offset(
    runner: CliRunner, bootstrap: str, new_topic: Callable[..., str], transactional: Callable[..., Producer]
) -> None:
    topic = new_topic(partitions=1)
    producer = transactional(f"{topic}-open")
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush(30)  # offset 0, in a transaction still open

    args = ["offsets", "-b", bootstrap, "--topic", topic, "--output", "csv"]
    committed = runner.invoke(cli, [*args, "--isolation", "read_committed"])
    uncommitted = runner.invoke(cli, args)

    topic_id = topic_ids(KafkaConfig(bootstrap), [topic])[topic]
    assert committed.stdout.splitlines()[1] == f"{topic},0,{topic_id},OK,0,1,0,latest,0,,"
    # read_uncommitted does not ask for the last stable offset (one request per broker fewer).
    assert uncommitted.stdout.splitlines()[1] == f"{topic},0,{topic_id},OK,0,1,,latest,1,,"


def test_cli_topic_is_repeatable_and_takes_partition_specs(
    runner: CliRunner, kafka: KafkaConfig, new_topic: Callable[..., str]
) -> None:
    """One grammar: ``--topic orders`` is the topic, ``-t orders:1`` a partition; items add up."""
    first = new_topic(partitions=3, suffix="-a")
    second = new_topic(partitions=2, suffix="-b")
    wait_until_listed(kafka, first, second)

    result = runner.invoke(
        cli,
        ["offsets", "-b", kafka.bootstrap_servers, "-t", f"{first}:1", "--topic", second,
         "--exclude-internal-topics", "--output", "csv"],
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert [line.split(",")[:2] for line in result.stdout.splitlines()[1:]] == [
        [first, "1"],
        [second, "0"],
        [second, "1"],
    ]


def test_without_the_c_entry_point_the_public_list_offsets_gives_the_same_answers(
    kafka: KafkaConfig, new_topic: Callable[..., str], produce, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin sends ListOffsets through confluent_kafka's C entry point (one future per call);
    a confluent_kafka without it falls back to the public per-partition futures."""
    import confluent_kafka.cimpl

    topic = new_topic(partitions=2)
    produce(topic, 6, partitions=2)
    wanted = [tp(topic, 0), tp(topic, 1), tp(topic, 5)]
    direct = offset_ranges(kafka, wanted, Isolation.READ_COMMITTED)

    class NoEntryPoint:
        pass

    monkeypatch.setattr(confluent_kafka.cimpl, "_AdminClientImpl", NoEntryPoint)
    public = offset_ranges(kafka, wanted, Isolation.READ_COMMITTED)

    assert public == direct
    assert [r.range for r in public.values() if isinstance(r, PartitionOffsets)] == [
        OffsetRange(0, 3),
        OffsetRange(0, 3),
    ]
    assert public[tp(topic, 5)] == MissingPartition(tp(topic, 5), MissingReason.PARTITION_GONE)


# -- topic ids in Kafka's text form (fast: no broker) ----------------------------------------------


def test_topic_ids_are_kafkas_url_safe_base64_without_padding() -> None:
    """Kafka's Uuid.toString (what kafka-topics.sh prints) is URL-safe base64 of the 16 bytes,
    unpadded; confluent_kafka's str(Uuid) uses '+' and '/'."""
    from confluent_kafka import Uuid

    from recovery.kafka.values import kafka_topic_id

    uuid = Uuid(-0x0410_0000_0000_0001, 0x7BEF_FFFF_FFFF_FFFE)
    raw = (-0x0410_0000_0000_0001 & (2**64 - 1)).to_bytes(8, "big") + (0x7BEF_FFFF_FFFF_FFFE).to_bytes(
        8, "big"
    )
    kafka_form = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert {"+", "/"} & set(str(uuid))  # the case this is about
    assert kafka_topic_id(str(uuid)) == kafka_form
    assert kafka_topic_id(kafka_form) == kafka_form  # already Kafka's form: unchanged
    assert kafka_topic_id(base64.b64encode(raw).decode()) == kafka_form  # padded standard form


def test_topic_ids_recorded_in_the_old_form_read_as_kafkas_form(tmp_path: Path) -> None:
    """A _recovery/topic-ids.json written before ids were printed Kafka's way still matches the
    cluster's id (no false 'topic id changed')."""
    from recovery.checkpoint import open_checkpoint
    from recovery.topic_ids import read_topic_ids, record_topic_ids

    root = tmp_path / "chk"
    (root / "offsets").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"6f1c2a4e-0d55-4b8e-9a51-3f3b9d3c1e27"}')
    (root / "offsets/0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"t":{"0":5}}')
    (root / "_recovery").mkdir()
    (root / "_recovery/topic-ids.json").write_text('{"topic_ids": {"t": "+/8AAAAAAAAAAAAAAAAAAA=="}}')
    chk = open_checkpoint(str(root))
    assert read_topic_ids(chk) == ({"t": "-_8AAAAAAAAAAAAAAAAAAA"}, ())
    record_topic_ids(chk, {"u": "AQIDBAUGBwgJCgsMDQ4PEA"}, "test")
    written = json.loads((root / "_recovery/topic-ids.json").read_text())["topic_ids"]
    assert written == {"t": "-_8AAAAAAAAAAAAAAAAAAA", "u": "AQIDBAUGBwgJCgsMDQ4PEA"}
