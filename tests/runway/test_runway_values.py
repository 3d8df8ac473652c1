"""Retention runway and long tables from values (no broker): the runway of a position from its
record's timestamp and the topic's settings, AT_RISK below the threshold, the validate/repair
tables past a page, and ``--from-file`` rows the checkpoint does not read."""

from __future__ import annotations

import pytest

from recovery.api import _refuse_unknown_scope
from recovery.cli.report.findings import finding_rows, paged, report_notes, runway_cell, validate_table
from recovery.core.model import (
    COULD_NOT_READ,
    Finding,
    Isolation,
    Move,
    OffsetRange,
    Plan,
    Runway,
    Strategy,
    StrategyKind,
    TopicPartition,
    Verdict,
)
from recovery.core.results import PartitionLag, ValidationReport
from recovery.core.runway import (
    RecordStamp,
    TopicRetention,
    apply_runway,
    format_duration_ms,
    parse_runway_warn,
    runway_of,
    size_runway,
    wanted_positions,
)
from recovery.errors import OffsetSpecError
from recovery.kafka.runway_facts import StampCache

NOW = 1_800_000_000_000
HOUR = 3_600_000
WEEK = 7 * 24 * HOUR
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
DELETE = TopicRetention(WEEK)


def ok(tp: TopicPartition = T0, position: int = 100, end: int = 200) -> Finding:
    return Finding("0", tp, Verdict.OK, position, None, OffsetRange(0, end))


@pytest.mark.parametrize(
    ("retention", "stamp", "expected"),
    [
        (DELETE, RecordStamp(100, NOW - HOUR), Runway(NOW - HOUR + WEEK, NOW - HOUR, f"retention.ms={WEEK}")),
        (
            TopicRetention(WEEK, retention_bytes=1 << 30),
            RecordStamp(100, NOW),
            Runway(NOW + WEEK, NOW, f"retention.ms={WEEK}; retention.bytes=1073741824: not estimated"),
        ),
        (
            DELETE,
            RecordStamp(102, NOW),
            Runway(NOW + WEEK, NOW, f"retention.ms={WEEK}; first record at or after 100 is 102"),
        ),
        (
            TopicRetention(WEEK, cleanup_policy=frozenset({"compact"})),
            RecordStamp(100, NOW),
            Runway(None, NOW, "compacted (cleanup.policy=compact): not deleted by time"),
        ),
        (
            TopicRetention(-1),
            RecordStamp(100, NOW),
            Runway(None, NOW, "infinite retention (retention.ms=-1)"),
        ),
        (  # size retention still deletes: not "infinite", and not estimated
            TopicRetention(-1, retention_bytes=1 << 20),
            RecordStamp(100, NOW),
            Runway(None, NOW, "size-limited (retention.ms=-1): retention.bytes=1048576: not estimated"),
        ),
        (
            DELETE,
            "fetch answered TOPIC_AUTHORIZATION_FAILED",
            Runway(None, None, "record at 100 not read: fetch answered TOPIC_AUTHORIZATION_FAILED"),
        ),
        (DELETE, RecordStamp(100, -1), Runway(None, None, "record at 100 has no timestamp")),
        (
            "DescribeConfigs TOPIC_AUTHORIZATION_FAILED",
            RecordStamp(100, NOW),
            Runway(None, NOW, "retention settings not read: DescribeConfigs TOPIC_AUTHORIZATION_FAILED"),
        ),
    ],
    ids=[
        "time",
        "bytes-not-estimated",
        "gap",
        "compacted",
        "infinite",
        "size-limited-only",
        "not-fetched",
        "no-timestamp",
        "no-configs",
    ],
)
def test_runway_of_a_position(
    retention: TopicRetention | str, stamp: RecordStamp | str, expected: Runway
) -> None:
    assert runway_of(100, retention, stamp) == expected


MIB = 1 << 20


def test_size_runway_is_the_bytes_to_go_at_the_rate_written_since_the_oldest_unread_record() -> None:
    # 1,000 records in 10 MiB; 400 unread (~4 MiB), written over the last hour; the limit is 6 MiB:
    # ~2 MiB to go at ~4 MiB an hour is half an hour.
    when, reason = size_runway(600, OffsetRange(0, 1000), 10 * MIB, 6 * MIB, NOW - HOUR, NOW)
    assert when == NOW + HOUR // 2
    assert reason == (
        "retention.bytes=6291456: ~4.0 MiB of the partition's 10.0 MiB unread, ~2.0 MiB to go at "
        "~1.1 KiB/s (estimate)"
    )


def test_size_runway_over_the_limit_is_now_and_without_a_rate_is_unknown() -> None:
    log = OffsetRange(0, 1000)
    assert size_runway(100, log, 10 * MIB, 6 * MIB, NOW - HOUR, NOW)[0] == NOW  # ~9 MiB unread > 6 MiB
    when, reason = size_runway(600, log, 10 * MIB, 6 * MIB, NOW + 5, NOW)  # a record from the future
    assert when is None and "write rate unknown" in reason
    when, reason = size_runway(0, OffsetRange(0, 0), 0, 6 * MIB, NOW - HOUR, NOW)  # nothing to go by
    assert when is None and reason.endswith("not estimated (partition size 0 B, 0 records)")
    # compact,delete: far fewer bytes than offsets, the unread share rounds to no bytes at all
    when, reason = size_runway(999_999, OffsetRange(0, 1_000_000), 70, 1000, NOW - HOUR, NOW)
    assert (when, reason) == (None, "retention.bytes=1000: not estimated (70 B on disk for 1000000 offsets)")


def test_runway_of_a_size_limited_topic_takes_the_earlier_of_the_two_limits() -> None:
    log, stamp = OffsetRange(0, 1000), RecordStamp(600, NOW - HOUR)
    by_size = NOW + HOUR // 2
    both = runway_of(600, TopicRetention(WEEK, 6 * MIB), stamp, size=10 * MIB, log=log, now_ms=NOW)
    assert both.earliest_delete_ms == by_size
    assert both.reason.startswith(f"retention.ms={WEEK}; retention.bytes=6291456: ~4.0 MiB")
    short = runway_of(600, TopicRetention(HOUR // 4, 6 * MIB), stamp, size=10 * MIB, log=log, now_ms=NOW)
    assert short.earliest_delete_ms == NOW - HOUR + HOUR // 4  # time deletes first
    only_size = runway_of(600, TopicRetention(-1, 6 * MIB), stamp, size=10 * MIB, log=log, now_ms=NOW)
    assert only_size.earliest_delete_ms == by_size
    assert only_size.reason.startswith("retention.ms=-1; retention.bytes=6291456: ~4.0 MiB")
    unknown = runway_of(600, TopicRetention(-1, 6 * MIB), stamp, size="DescribeLogDirs failed: X", log=log)
    assert unknown == Runway(
        None,
        NOW - HOUR,
        "size-limited (retention.ms=-1): retention.bytes=6291456: not estimated (DescribeLogDirs failed: X)",
    )


def test_a_tiered_topic_counts_the_whole_log_and_leaves_its_size_unestimated() -> None:
    log, stamp = OffsetRange(0, 1000), RecordStamp(600, NOW - HOUR)
    tiered = " (local.retention.ms=3600000 only moves segments off the brokers' disks)"
    by_time = runway_of(600, TopicRetention(WEEK, remote_storage=True, local_retention_ms=HOUR), stamp)
    assert by_time == Runway(
        NOW - HOUR + WEEK,
        NOW - HOUR,
        f"retention.ms={WEEK}; tiered storage: the whole log counts, remote segments included{tiered}",
    )
    as_long = runway_of(600, TopicRetention(WEEK, remote_storage=True), stamp)  # local.retention.ms=-2
    assert as_long.reason.endswith("(local.retention.ms=-2: the brokers keep them as long as retention.ms)")
    # DescribeLogDirs sizes the local segments only: the size limit is not estimated from them
    sized = TopicRetention(-1, 6 * MIB, remote_storage=True, local_retention_ms=HOUR)
    by_size = runway_of(600, sized, stamp, size=10 * MIB, log=log, now_ms=NOW)
    assert by_size.earliest_delete_ms is None
    assert by_size.reason == (
        "size-limited (retention.ms=-1): retention.bytes=6291456: not estimated (Kafka reports the size "
        f"of the local segments only); tiered storage: the whole log counts, remote segments included{tiered}"
    )


def test_a_size_limited_partition_near_its_limit_is_at_risk() -> None:
    finding = Finding("0", T0, Verdict.OK, 600, None, OffsetRange(0, 1000))
    judged = apply_runway(
        (finding,),
        {"orders": TopicRetention(-1, 6 * MIB)},
        {(T0, 600): RecordStamp(600, NOW - HOUR)},
        sizes={T0: 10 * MIB},
        now_ms=NOW,
        warn_ms=HOUR,
    )
    assert judged[0].verdict is Verdict.AT_RISK
    assert judged[0].detail.startswith(
        "retention may delete unread records in 30m (record at 600 is 1h old; retention.ms=-1; "
    )


def test_compact_and_delete_is_deleted_by_time() -> None:
    both = TopicRetention(HOUR, cleanup_policy=frozenset({"compact", "delete"}))
    assert runway_of(5, both, RecordStamp(5, NOW)).earliest_delete_ms == NOW + HOUR


def test_an_ok_partition_below_the_threshold_is_at_risk_and_the_others_keep_their_verdict() -> None:
    lost = Finding("0", T1, Verdict.BELOW_LOG_START, 10, None, OffsetRange(50, 200), 40, COULD_NOT_READ)
    caught_up = ok(TopicPartition("orders", 2), position=200)
    findings = (ok(), lost, caught_up)
    assert wanted_positions(findings) == {(T0, 100)}
    stamps = {(T0, 100): RecordStamp(100, NOW - WEEK + 2 * HOUR)}  # 2 hours before retention may delete it

    judged = apply_runway(findings, {"orders": DELETE}, stamps, now_ms=NOW, warn_ms=6 * HOUR)

    at_risk, same, nothing = judged
    assert at_risk.verdict is Verdict.AT_RISK and at_risk.needs_action and not at_risk.needs_repair
    assert at_risk.runway == Runway(NOW + 2 * HOUR, NOW - WEEK + 2 * HOUR, f"retention.ms={WEEK}")
    assert at_risk.detail == (
        f"retention may delete unread records in 2h (record at 100 is 6d22h old; retention.ms={WEEK}): "
        "start the query"
    )
    assert same == lost
    assert nothing.verdict is Verdict.OK and nothing.runway == Runway(None, None, "nothing unread")
    without = apply_runway(findings, {"orders": DELETE}, stamps, now_ms=NOW, warn_ms=None)
    assert without[0].verdict is Verdict.OK and without[0].runway == at_risk.runway


def test_a_runway_already_past_says_the_next_retention_check() -> None:
    stamps = {(T0, 100): RecordStamp(100, NOW - WEEK - 1000)}
    (f,) = apply_runway((ok(),), {"orders": DELETE}, stamps, now_ms=NOW, warn_ms=HOUR)
    assert f.verdict is Verdict.AT_RISK and "at the next retention check" in f.detail
    assert runway_cell(f.runway, NOW) == "due"


def test_report_rows_notes_and_exit_code() -> None:
    stamps = {(T0, 100): RecordStamp(100, NOW - WEEK + 2 * HOUR)}
    findings = apply_runway((ok(),), {"orders": DELETE}, stamps, now_ms=NOW, warn_ms=6 * HOUR)
    report = ValidationReport(
        "/chk", "q", 3, False, Isolation.READ_UNCOMMITTED, findings, runway_at_ms=NOW, runway_warn_s=6 * 3600
    )

    (row,) = finding_rows(report.findings, table=True, runway=True, now_ms=NOW)
    assert (row["verdict"], row["runway"], row["oldest_unread"], row["on_restart"]) == (
        "AT_RISK",
        "2h",
        "6d22h",
        "runs",
    )
    assert (row["runway_s"], row["oldest_unread_ms"]) == (7200.0, NOW - WEEK + 2 * HOUR)
    assert report.exit_code == 1 and report.needs_action and not report.needs_repair
    assert (
        report_notes(report)[-1]
        == "action needed: start the query before retention deletes what it has not read"
    )

    healthy = ValidationReport(
        "/chk",
        "q",
        3,
        False,
        Isolation.READ_UNCOMMITTED,
        apply_runway((ok(),), {"orders": DELETE}, stamps, now_ms=NOW, warn_ms=None),
        runway_at_ms=NOW,
    )
    assert healthy.exit_code == 0
    assert (
        "shortest runway: orders [0]: retention may delete unread records in 2h "
        f"(no --runway-warn threshold); retention.ms={WEEK}" in report_notes(healthy)
    )


def test_lag_carries_the_runway_in_seconds() -> None:
    lag = PartitionLag("0", T0, 100, 0, 200, Verdict.OK, runway=Runway(NOW + 90_000, NOW, "r"), at_ms=NOW)
    assert (lag.runway_s, lag.lag) == (90.0, 100)
    assert PartitionLag("0", T0, 100, 0, 200, Verdict.OK).runway_s is None


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT6H", 6 * HOUR),
        ("6h", 6 * HOUR),
        ("1h30m", 90 * 60_000),
        ("P1D", 24 * HOUR),
        ("2d", 48 * HOUR),
        ("pt90s", 90_000),
    ],
)
def test_runway_warn_takes_iso_and_short_durations(text: str, ms: int) -> None:
    assert parse_runway_warn(text) == ms


@pytest.mark.parametrize("text", ["", "6 hours", "PT", "0h", "-6h", "6x"])
def test_runway_warn_refuses_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(OffsetSpecError, match=r"^runway_warn '"):
        parse_runway_warn(text)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (18_720_000, "5h12m"),
        (3 * 86_400_000 + 7000, "3d"),
        (61_000, "1m1s"),
        (500, "0s"),
        (-90_000, "-1m30s"),
    ],
)
def test_durations_show_two_units(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text


# -- long tables ---------------------------------------------------------------------------------


def test_a_long_validate_table_shows_what_needs_action_first_and_sums_up_the_rest() -> None:
    healthy = [ok(TopicPartition("big", p)) for p in range(120)]
    lost = [
        Finding(
            "0",
            TopicPartition("big", 120 + p),
            Verdict.BELOW_LOG_START,
            1,
            None,
            OffsetRange(5, 9),
            4,
            COULD_NOT_READ,
        )
        for p in range(3)
    ]
    report = ValidationReport("/chk", "q", 3, False, Isolation.READ_UNCOMMITTED, (*healthy, *lost))

    rows, lines = validate_table(report)

    assert len(rows) == 50
    assert [r["partition"] for r in rows[:3]] == [120, 121, 122] and rows[3]["partition"] == 0
    assert lines == [
        "73 more partitions OK (not shown)",
        "73 of 123 partitions not shown: --output json shows all",
    ]
    assert len(finding_rows(report.findings)) == 123  # JSON and CSV stay complete


def test_the_rest_gets_one_line_per_verdict_and_a_short_table_is_left_alone() -> None:
    rows = [{"verdict": v} for v in ["OK"] * 3 + ["AT_RISK"] * 4 + ["BELOW_LOG_START"] * 2]
    urgent = [r["verdict"] != "OK" for r in rows]
    shown, lines = paged(rows, urgent, page=2)
    assert shown == [{"verdict": "AT_RISK"}] * 2
    assert lines == [
        "2 more partitions AT_RISK (not shown)",
        "2 more partitions BELOW_LOG_START (not shown)",
        "3 more partitions OK (not shown)",
        "7 of 9 partitions not shown: --output json shows all",
    ]
    assert paged(rows, urgent, page=9) == (rows, [])


# -- --from-file rows the checkpoint does not read -----------------------------------------------


def plan_for(*tps: TopicPartition) -> Plan:
    findings = tuple(ok(tp) for tp in tps)
    return Plan("/chk", "q", 3, False, "from-file", findings, (), ())


def test_from_file_rows_the_checkpoint_does_not_read_are_refused_with_the_closest_names() -> None:
    plan = plan_for(T0, T1, TopicPartition("payments", 0))
    strategy = Strategy(
        StrategyKind.FROM_FILE,
        targets={TopicPartition("ordres", 0): 5, TopicPartition("orders", 7): 5, T0: 5},
    )
    with pytest.raises(OffsetSpecError) as raised:
        _refuse_unknown_scope(plan, strategy)
    assert str(raised.value) == (
        "from_file: the checkpoint does not read orders [7], ordres [0] (closest: orders); "
        "orders has partitions 0, 1 (it reads orders, payments). Nothing was written."
    )
    _refuse_unknown_scope(plan, Strategy(StrategyKind.FROM_FILE, targets={T1: 3}))  # all known: fine


def test_a_topic_scope_typo_names_the_closest_topic() -> None:
    from recovery.core.specs import parse_topic_partitions

    with pytest.raises(
        OffsetSpecError, match=r"^scope ordrs: the checkpoint reads no such topic \(closest: orders\)"
    ):
        _refuse_unknown_scope(plan_for(T0), Strategy(scope=parse_topic_partitions("ordrs")))


def test_moves_past_a_page_are_summed_up() -> None:
    from recovery.cli.report.findings import repair_table
    from recovery.core.results import RepairResult

    moves = tuple(
        Move("0", TopicPartition("big", p), Verdict.BELOW_LOG_START, 1, 5, lost=4) for p in range(60)
    )
    plan = Plan("/chk", "q", 3, False, "clamp", (), moves, ())
    rows, lines = repair_table(RepairResult(plan, False))
    assert len(rows) == 50
    assert lines == [
        "10 more moves BELOW_LOG_START (not shown)",
        "10 of 60 moves not shown: --output json shows all",
    ]


def test_stamp_cache_keeps_its_last_positions_per_partition_and_only_stamps_of_known_topics() -> None:
    cache = StampCache(partitions=2)
    a, b, c = (TopicPartition("t", p) for p in range(3))
    ids = {"t": "id1"}
    cache.keep({(a, 1): RecordStamp(1, 10), (b, 1): "fetch answered X"}, ids)
    assert len(cache) == 1  # a reason is not a stamp
    cache.keep({(TopicPartition("old", 0), 1): RecordStamp(1, 10)}, {})
    assert len(cache) == 1  # a topic without an id (a broker before Kafka 2.8): never kept
    cache.keep({(b, 1): RecordStamp(1, 11), (c, 1): RecordStamp(1, 12)}, ids)
    assert len(cache) == 2 and cache.lookup([(a, 1)]) == {}  # the least recently used partition went
    both = {(b, 1): RecordStamp(1, 11), (c, 1): RecordStamp(1, 12)}
    assert cache.lookup([(b, 1), (c, 1)], ids) == both
    assert cache.lookup([(b, 1)], {"t": "id2"}) == {}  # another topic of that name
    assert cache.lookup([(b, 1)], {}) == {}  # a topic whose id is not known now
    assert cache.lookup([(b, 1)], isolation=Isolation.READ_COMMITTED) == {}  # read with the other level
    # a running query's position moves each batch: a partition keeps its last few positions only
    cache.keep({(b, n): RecordStamp(n, n) for n in range(2, 12)}, ids)
    assert set(cache.lookup([(b, n) for n in range(12)], ids)) == {(b, n) for n in range(8, 12)}
