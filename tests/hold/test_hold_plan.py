"""The retention hold from values (no broker): how much ``plan_hold`` raises ``retention.ms`` and
``retention.bytes`` to keep unread records, what it costs each broker, the caps and the free-space
floor that refuse a hold, and how ``decide_release`` puts the values back."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery.core.hold import (
    HOLD_MARK,
    HeldValue,
    HoldAction,
    HoldLimits,
    HoldPlan,
    LogDir,
    ReleaseAction,
    ReleasePlan,
    TopicHold,
    TopicHoldRecord,
    TopicRelease,
    decide_release,
    plan_hold,
    set_by_a_hold,
    write_rate,
)
from recovery.core.model import Finding, OffsetRange, Runway, TopicPartition, Verdict
from recovery.core.runway import RecordStamp, TopicRetention
from recovery.errors import ExitCode

NOW = 1_800_000_000_000
SECOND = 1000
MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000
MIB = 1024 * 1024
GIB = 1024 * MIB
T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NO_LOG_DIRS: list[LogDir] = []  # no log directory reported: no cost, no floor


def unread(
    tp: TopicPartition = T0,
    *,
    age: int | None = 2 * HOUR,
    retention_ms: int = 3 * HOUR,
    position: int = 100,
    start: int = 0,
    end: int = 200,
    verdict: Verdict = Verdict.OK,
    lost: int = 0,
) -> Finding:
    """A partition whose record at ``position`` is ``age`` old (None: its time was not read)."""
    if age is None:
        runway = Runway(None, None, f"record at {position} not read: timed out")
    elif retention_ms < 0:
        runway = Runway(None, NOW - age, "infinite retention")
    else:
        runway = Runway(NOW - age + retention_ms, NOW - age, f"retention.ms={retention_ms}")
    return Finding(
        "0", tp, verdict, position, None, OffsetRange(start, end), records_lost=lost, runway=runway
    )


def new_partition(tp: TopicPartition = T1, *, start: int = 0, end: int = 50) -> Finding:
    """A partition the checkpoint does not know: Spark reads it from its log start."""
    return Finding("0", tp, Verdict.NEW_PARTITION, None, None, OffsetRange(start, end))


def hold(
    findings: list[Finding],
    retention: TopicRetention | str | None = None,
    *,
    keep: int = 2 * DAY,
    stamps: dict[TopicPartition, RecordStamp | str] | None = None,
    dirs: list[LogDir] | str = NO_LOG_DIRS,
    limits: HoldLimits | None = None,
) -> HoldPlan:
    """``plan_hold`` of topic ``orders`` (``retention``: its settings, default ``retention.ms``=3h)."""
    settings = {"orders": TopicRetention(3 * HOUR) if retention is None else retention}
    return plan_hold("/ckpt", findings, settings, stamps or {}, dirs, limits or HoldLimits(keep_ms=keep), NOW)


def only(plan: HoldPlan) -> TopicHold:
    (topic,) = plan.topics
    return topic


def minutes_up(ms: int) -> int:
    """What a hold sets for ``ms``: rounded up to a whole minute, plus the hold's mark."""
    return math.ceil(ms / MINUTE) * MINUTE + HOLD_MARK


# -- by time ----------------------------------------------------------------------------------------


def test_a_topic_whose_oldest_unread_record_outlives_its_retention_is_raised_to_keep_it() -> None:
    oldest = NOW - 2 * HOUR - 30 * SECOND - 1  # not a whole minute: the value is rounded up, then marked
    f = unread(age=NOW - oldest)

    plan = hold([f], keep=2 * DAY)

    t = only(plan)
    assert t.action is HoldAction.RAISE
    assert t.new_retention_ms == minutes_up(NOW + 2 * DAY - oldest) == 2 * DAY + 2 * HOUR + MINUTE + HOLD_MARK
    assert t.retention_ms == 3 * HOUR
    assert t.new_retention_bytes is None and t.retention_bytes == -1
    assert t.runway_ms == oldest + 3 * HOUR - NOW
    assert t.reason == "keep unread records 2d more (the oldest unread record is 2h old)"
    assert t.changes == {"retention.ms": str(2 * DAY + 2 * HOUR + MINUTE + HOLD_MARK)}
    assert t.protect_until == {0: 200}
    assert plan.raising == (t,)
    assert plan.keep_ms == 2 * DAY and plan.now_ms == NOW and plan.location == "/ckpt"


@pytest.mark.parametrize("retention_ms", [2 * DAY + 2 * HOUR, 3 * DAY, 365 * DAY])
def test_a_topic_already_keeping_enough_is_left_as_it_is_never_lowered(retention_ms: int) -> None:
    f = unread(age=2 * HOUR, retention_ms=retention_ms)

    t = only(hold([f], TopicRetention(retention_ms), keep=2 * DAY))

    assert t.action is HoldAction.ENOUGH
    assert t.new_retention_ms is None and t.new_retention_bytes is None
    assert t.changes == {}
    assert t.protect_until == {}
    assert t.runway_ms == retention_ms - 2 * HOUR


def test_the_enough_reason_shows_the_runway() -> None:
    t = only(hold([unread(age=2 * HOUR, retention_ms=3 * DAY)], TopicRetention(3 * DAY), keep=2 * DAY))

    assert t.reason == "runway 2d22h: keeps unread records 2d or more"


def test_a_topic_without_a_time_limit_keeps_enough() -> None:
    t = only(hold([unread(age=30 * DAY, retention_ms=-1)], TopicRetention(-1)))

    assert t.action is HoldAction.ENOUGH
    assert t.reason == "no time limit: keeps unread records 2d or more"
    assert t.new_retention_ms is None and t.runway_ms is None


def test_a_compacted_topic_keeps_enough() -> None:
    compacted = TopicRetention(3 * HOUR, cleanup_policy=frozenset({"compact"}))

    t = only(hold([unread(age=30 * DAY)], compacted))

    assert t.action is HoldAction.ENOUGH
    assert t.reason == "compacted (cleanup.policy=compact): not deleted by age"
    assert t.new_retention_ms is None


def test_compact_and_delete_is_still_deleted_by_age() -> None:
    both = TopicRetention(3 * HOUR, cleanup_policy=frozenset({"compact", "delete"}))

    assert only(hold([unread(age=2 * HOUR)], both)).action is HoldAction.RAISE


def test_a_topic_with_nothing_unread_keeps_enough() -> None:
    caught_up = unread(age=30 * DAY, position=200, end=200)

    t = only(hold([caught_up]))

    assert t.action is HoldAction.ENOUGH
    assert t.reason == "nothing unread"
    assert t.new_retention_ms is None


@pytest.mark.parametrize(
    ("settings", "why"), [("DescribeConfigs timed out", "DescribeConfigs timed out"), (None, "unknown")]
)
def test_unknown_retention_settings_refuse_the_hold(settings: str | None, why: str) -> None:
    retention: dict[str, TopicRetention | str] = {} if settings is None else {"orders": settings}

    plan = plan_hold("/ckpt", [unread()], retention, {}, [], HoldLimits(keep_ms=DAY), NOW)

    t = only(plan)
    assert t.action is HoldAction.REFUSED
    assert t.reason == f"retention settings not read: {why}"
    assert t.new_retention_ms is None
    assert plan.exit_code is ExitCode.ACTION_NEEDED


def test_an_unread_record_whose_time_is_not_known_refuses_the_hold() -> None:
    t = only(hold([unread(T0, age=HOUR), unread(T1, age=None)]))

    assert t.action is HoldAction.REFUSED
    assert t.reason == (
        "orders [1]: the oldest unread record's time is not known (record at 100 not read: timed out)"
    )


def test_the_oldest_unread_record_across_partitions_decides() -> None:
    findings = [
        unread(T0, age=1 * HOUR),
        unread(T1, age=5 * HOUR),
        # caught up: its old record at the position is not unread, and does not count
        unread(TopicPartition("orders", 2), age=9 * DAY, position=300, end=300),
    ]

    t = only(hold(findings, keep=DAY))

    assert t.action is HoldAction.RAISE
    assert t.new_retention_ms == DAY + 5 * HOUR + HOLD_MARK
    assert t.runway_ms == -2 * HOUR  # partition 1's record is deletable already
    assert t.reason == "keep unread records 1d more (the oldest unread record is 5h old)"
    assert t.protect_until == {0: 200, 1: 200, 2: 300}


# -- by size ----------------------------------------------------------------------------------------


def by_size(
    size: int = 2 * GIB - 7, log_start_age: int = 2 * DAY
) -> tuple[list[Finding], dict[TopicPartition, RecordStamp | str], list[LogDir]]:
    """Partition 0 of a topic limited to 2 GiB: ``size`` bytes, written over ``log_start_age``, a
    quarter of its records read."""
    findings = [unread(T0, age=HOUR, retention_ms=-1, position=1000, end=4000)]
    stamps: dict[TopicPartition, RecordStamp | str] = {T0: RecordStamp(0, NOW - log_start_age)}
    dirs = [LogDir(1, "/data", 1000 * GIB, 900 * GIB, sizes={T0: size})]
    return findings, stamps, dirs


def test_write_rate_is_the_size_over_the_age_of_the_oldest_record() -> None:
    assert write_rate(2 * DAY * 5, RecordStamp(0, NOW - 2 * DAY), NOW) == 5.0
    assert write_rate(0, None, NOW) == 0.0
    assert write_rate(None, RecordStamp(0, NOW), NOW) == "size not known (not read)"
    assert write_rate("offline", RecordStamp(0, NOW), NOW) == "size not known (offline)"
    assert write_rate(10, None, NOW) == "oldest record not read (unknown)"
    assert write_rate(10, "timed out", NOW) == "oldest record not read (timed out)"
    assert write_rate(10, RecordStamp(7, -1), NOW) == "oldest record (offset 7) has no timestamp"
    assert write_rate(10, RecordStamp(0, NOW), NOW) == 10.0  # no division by zero


def test_a_size_limited_topic_is_raised_to_hold_the_unread_bytes_and_what_keep_adds() -> None:
    size = 2 * GIB - 7
    findings, stamps, dirs = by_size(size)

    t = only(hold(findings, TopicRetention(-1, retention_bytes=2 * GIB), keep=DAY, stamps=stamps, dirs=dirs))

    rate = size / (2 * DAY)
    unread_bytes = size * (4000 - 1000) // (4000 - 0)
    expected = math.ceil((unread_bytes + int(rate * DAY)) / MIB) * MIB + HOLD_MARK
    assert t.action is HoldAction.RAISE
    assert t.new_retention_bytes == expected == 2560 * MIB + HOLD_MARK
    assert t.new_retention_ms is None
    assert t.reason == "keep unread records 1d more (~2.5 GiB unread or written within 1d)"
    assert t.changes == {"retention.bytes": str(2560 * MIB + HOLD_MARK)}
    # what it writes during keep (~1 GiB), up to the raised limit: 512 MiB + 14
    assert t.extra_bytes == {1: 2560 * MIB + HOLD_MARK - size}
    assert t.extra_bytes == {1: 512 * MIB + 14}


def test_a_size_limit_already_large_enough_is_left() -> None:
    findings, stamps, dirs = by_size()

    t = only(hold(findings, TopicRetention(-1, retention_bytes=3 * GIB), keep=DAY, stamps=stamps, dirs=dirs))

    assert t.action is HoldAction.ENOUGH
    assert t.new_retention_bytes is None


def test_a_partition_whose_size_is_not_reported_refuses_a_size_limited_hold() -> None:
    findings, stamps, _ = by_size()
    elsewhere = [LogDir(1, "/data", None, None, sizes={T1: 5})]

    t = only(
        hold(findings, TopicRetention(-1, retention_bytes=2 * GIB), keep=DAY, stamps=stamps, dirs=elsewhere)
    )

    assert t.action is HoldAction.REFUSED
    assert t.reason == (
        "orders [0]: retention.bytes=2147483648, and its unread bytes cannot be estimated "
        "(size not known (not reported))"
    )


def test_a_size_limited_topic_with_tiered_storage_refuses_the_hold() -> None:
    findings, stamps, dirs = by_size()  # the sizes DescribeLogDirs gives: the local segments only
    tiered = TopicRetention(-1, retention_bytes=2 * GIB, remote_storage=True, local_retention_ms=HOUR)

    t = only(hold(findings, tiered, keep=DAY, stamps=stamps, dirs=dirs))

    assert t.action is HoldAction.REFUSED
    assert t.reason == (
        "retention.bytes=2147483648 on a topic with tiered storage: its unread bytes cannot be "
        "estimated (Kafka reports the size of the local segments only)"
    )
    # by time alone, a tiered topic is held as any other: retention.ms counts the whole log
    t = only(hold(findings, TopicRetention(HOUR, remote_storage=True), keep=DAY, stamps=stamps, dirs=dirs))
    assert t.action is HoldAction.RAISE and t.new_retention_ms is not None


@pytest.mark.parametrize(
    ("stamp", "why"),
    [
        (None, "oldest record not read (unknown)"),
        ("timed out", "oldest record not read (timed out)"),
        (RecordStamp(0, -1), "oldest record (offset 0) has no timestamp"),
    ],
)
def test_a_partition_whose_write_rate_is_not_known_refuses_a_size_limited_hold(
    stamp: RecordStamp | str | None, why: str
) -> None:
    findings, _, dirs = by_size()
    stamps: dict[TopicPartition, RecordStamp | str] = {} if stamp is None else {T0: stamp}

    t = only(hold(findings, TopicRetention(-1, retention_bytes=2 * GIB), keep=DAY, stamps=stamps, dirs=dirs))

    assert t.action is HoldAction.REFUSED
    assert t.reason.startswith("orders [0]: retention.bytes=2147483648")
    assert t.reason.endswith(f"({why})")


# -- caps and the free-space floor ------------------------------------------------------------------

SIZE_AT_100 = 100 * 3 * HOUR  # bytes written in 3h at 100 bytes/ms


def at_100_bytes_a_ms(*tps: TopicPartition) -> dict[TopicPartition, RecordStamp | str]:
    """Log start stamps 3h old: with SIZE_AT_100 bytes each, 100 bytes/ms exactly."""
    return {tp: RecordStamp(0, NOW - 3 * HOUR) for tp in tps}


def test_a_retention_above_max_retention_is_refused() -> None:
    t = only(hold([unread(age=2 * HOUR)], keep=40 * DAY))

    assert t.action is HoldAction.REFUSED
    assert t.new_retention_ms == 40 * DAY + 2 * HOUR + HOLD_MARK
    assert t.reason == (
        f"needs retention.ms={40 * DAY + 2 * HOUR + HOLD_MARK} (40d2h), above the cap `max_retention_s` (30d)"
    )
    assert "max_retention" in t.reason
    assert t.protect_until == {}


def test_a_lower_max_retention_applies() -> None:
    limits = HoldLimits(keep_ms=DAY, max_retention_ms=DAY)

    t = only(hold([unread(age=2 * HOUR)], limits=limits))

    assert t.action is HoldAction.REFUSED
    assert "`max_retention_s` (1d)" in t.reason


def test_a_hold_above_max_extra_bytes_on_a_broker_is_refused() -> None:
    dirs = [LogDir(1, "/data", None, None, sizes={T0: SIZE_AT_100})]
    limits = HoldLimits(keep_ms=2 * DAY, max_extra_bytes=10 * GIB)

    t = only(hold([unread(age=2 * HOUR)], stamps=at_100_bytes_a_ms(T0), dirs=dirs, limits=limits))

    # 100 bytes/ms over the added 2d2h + HOLD_MARK - 3h = 47h + 7 ms: 16,920,000,700 bytes, ~15.8 GiB
    assert t.action is HoldAction.REFUSED
    assert t.reason == "would hold ~15.8 GiB more on broker 1, above `max_extra_bytes` (10.0 GiB)"
    assert t.extra_bytes == {1: 100 * (47 * HOUR + HOLD_MARK)}
    assert t.extra_bytes == {1: 16_920_000_700}
    assert t.protect_until == {}


def test_a_hold_within_max_extra_bytes_is_raised() -> None:
    dirs = [LogDir(1, "/data", None, None, sizes={T0: SIZE_AT_100})]
    limits = HoldLimits(keep_ms=2 * DAY, max_extra_bytes=16_920_000_700)  # exactly its extra bytes

    t = only(hold([unread(age=2 * HOUR)], stamps=at_100_bytes_a_ms(T0), dirs=dirs, limits=limits))

    assert t.action is HoldAction.RAISE


def two_topics(alpha_age: int, beta_age: int, usable: int) -> HoldPlan:
    """Topics alpha and beta (retention.ms=3h, 100 bytes/ms each) on one 100 GiB log directory."""
    a, b = TopicPartition("alpha", 0), TopicPartition("beta", 0)
    findings = [unread(a, age=alpha_age), unread(b, age=beta_age)]
    dirs = [LogDir(1, "/data", 100 * GIB, usable, sizes={a: SIZE_AT_100, b: SIZE_AT_100})]
    retention: dict[str, TopicRetention | str] = {
        "alpha": TopicRetention(3 * HOUR),
        "beta": TopicRetention(3 * HOUR),
    }
    return plan_hold(
        "/ckpt", findings, retention, at_100_bytes_a_ms(a, b), dirs, HoldLimits(keep_ms=DAY), NOW
    )


def test_when_the_disk_is_short_the_most_urgent_topic_is_held_and_the_other_refused() -> None:
    floor = 10 * GIB  # min_free_ratio 0.1 of 100 GiB
    # beta: record 2h old, runway 1h, extra 100 * (1d2h + HOLD_MARK - 3h); alpha: 1h old, runway 2h,
    # 100 * (1d1h + HOLD_MARK - 3h)
    beta_extra, alpha_extra = 100 * (23 * HOUR + HOLD_MARK), 100 * (22 * HOUR + HOLD_MARK)
    assert (beta_extra, alpha_extra) == (8_280_000_700, 7_920_000_700)
    usable = floor + max(alpha_extra, beta_extra) + GIB  # room for one of them, not both

    plan = two_topics(alpha_age=HOUR, beta_age=2 * HOUR, usable=usable)

    alpha, beta = plan.topics  # reported by name, judged by urgency
    assert (alpha.topic, beta.topic) == ("alpha", "beta")
    assert beta.action is HoldAction.RAISE and beta.runway_ms == HOUR
    assert beta.extra_bytes == {1: beta_extra}
    assert alpha.action is HoldAction.REFUSED and alpha.runway_ms == 2 * HOUR
    assert alpha.reason.startswith("would leave broker 1's /data with ~")
    assert alpha.reason.endswith("free of 100.0 GiB, under the floor `min_free_ratio` (0.1)")
    assert plan.exit_code is ExitCode.ACTION_NEEDED


def test_urgency_not_the_name_decides_who_gets_the_disk() -> None:
    usable = 10 * GIB + 100 * 23 * HOUR + GIB

    plan = two_topics(alpha_age=2 * HOUR, beta_age=HOUR, usable=usable)

    assert [(t.topic, t.action) for t in plan.topics] == [
        ("alpha", HoldAction.RAISE),
        ("beta", HoldAction.REFUSED),
    ]


def test_with_room_for_both_both_are_raised() -> None:
    plan = two_topics(alpha_age=HOUR, beta_age=2 * HOUR, usable=90 * GIB)

    assert [t.action for t in plan.topics] == [HoldAction.RAISE, HoldAction.RAISE]
    assert plan.notes == ()


def test_a_broker_that_does_not_report_free_space_is_noted_not_refused() -> None:
    dirs = [
        LogDir(3, "/data", None, None, sizes={T0: SIZE_AT_100}),
        LogDir(2, "/data", 100 * GIB, 90 * GIB, sizes={T0: SIZE_AT_100}),
        LogDir(1, "/data", None, None, sizes={}),
    ]

    plan = hold([unread(age=2 * HOUR)], stamps=at_100_bytes_a_ms(T0), dirs=dirs)

    assert only(plan).action is HoldAction.RAISE
    assert plan.notes == (
        "broker 1, 3 does not report its free space (DescribeLogDirs before v4, Kafka < 3.3): "
        "the free-space floor was not checked there",
    )
    assert plan.free_space == tuple(dirs)


def test_log_directories_that_could_not_be_read_refuse_a_raise() -> None:
    plan = hold([unread(age=2 * HOUR)], dirs="DescribeLogDirs timed out")

    t = only(plan)
    assert t.action is HoldAction.REFUSED
    assert t.reason == "the brokers' log directories could not be read (DescribeLogDirs timed out)"
    assert plan.free_space == ()


# -- the extra bytes per broker ---------------------------------------------------------------------


def test_extra_bytes_are_each_replicas_writes_during_the_added_retention_summed_per_broker() -> None:
    # rates that are not whole bytes a ms: each replica's extra has a fraction, truncated
    size0, size1 = 1_000_000_000, 400_000_000
    dirs = [
        LogDir(1, "/a", None, None, sizes={T0: size0}),
        LogDir(1, "/b", None, None, sizes={T1: size1}),
        LogDir(2, "/a", None, None, sizes={T0: size0 - 1000}),  # a follower a little behind
    ]
    findings = [unread(T0, age=2 * HOUR), unread(T1, age=HOUR)]

    t = only(hold(findings, keep=DAY, stamps=at_100_bytes_a_ms(T0, T1), dirs=dirs))

    added = (DAY + 2 * HOUR + HOLD_MARK) - 3 * HOUR
    assert t.action is HoldAction.RAISE and t.new_retention_ms == DAY + 2 * HOUR + HOLD_MARK
    # a partition's rate is its largest replica's size over its log start's age; truncated per replica
    per_replica0, per_replica1 = int(size0 / (3 * HOUR) * added), int(size1 / (3 * HOUR) * added)
    assert (per_replica0, per_replica1) == (7_666_667_314, 3_066_666_925)
    assert t.extra_bytes == {1: per_replica0 + per_replica1, 2: per_replica0}
    assert t.extra_bytes == {1: 10_733_334_239, 2: 7_666_667_314}


def test_extra_bytes_are_capped_by_the_size_limit() -> None:
    # retention.ms=1h, record 2h old, keep 1d: raised to 1d2h + HOLD_MARK, 1d1h + 7 ms more; by size,
    # unread bytes plus a day's writes (8,748,000,000) fit the limit of 9,000,000,000, which stays
    findings = [unread(T0, age=2 * HOUR, retention_ms=HOUR, position=180, end=200)]
    dirs = [
        LogDir(1, "/data", None, None, sizes={T0: SIZE_AT_100}),
        LogDir(2, "/data", None, None, sizes={T0: 80_000_000}),
    ]
    retention = TopicRetention(HOUR, retention_bytes=9_000_000_000)

    t = only(hold(findings, retention, keep=DAY, stamps=at_100_bytes_a_ms(T0), dirs=dirs))

    assert t.action is HoldAction.RAISE
    assert t.new_retention_ms == DAY + 2 * HOUR + HOLD_MARK and t.new_retention_bytes is None
    # uncapped each replica would grow 100 * (1d1h + HOLD_MARK) = 9,000,000,700: capped at the limit
    # minus its size
    assert t.extra_bytes == {1: 9_000_000_000 - SIZE_AT_100, 2: 9_000_000_000 - 80_000_000}


def test_a_replica_of_a_partition_the_checkpoint_does_not_read_refuses_the_hold() -> None:
    t2 = TopicPartition("orders", 2)
    dirs = [LogDir(1, "/data", None, None, sizes={T0: SIZE_AT_100, t2: SIZE_AT_100})]

    t = only(hold([unread(T0)], stamps=at_100_bytes_a_ms(T0, t2), dirs=dirs))

    assert t.action is HoldAction.REFUSED
    assert t.reason == "orders [2]: the extra disk cannot be estimated (not in the checkpoint's partitions)"


# -- lost and new partitions ------------------------------------------------------------------------


def test_partitions_that_already_lost_records_are_noted_and_what_is_left_is_kept() -> None:
    below = Finding("0", T1, Verdict.BELOW_LOG_START, 10, None, OffsetRange(50, 200), records_lost=40)
    findings = [unread(T0, age=2 * HOUR, lost=3), below]

    plan = hold(findings, keep=DAY, stamps={T1: RecordStamp(50, NOW - 3 * HOUR)})

    assert plan.notes == (
        "orders [0], orders [1]: records are already lost; a hold keeps what is left, it cannot bring "
        "those back (`repair_checkpoint` counts them)",
    )
    t = only(plan)
    assert t.action is HoldAction.RAISE
    # partition 1 is read from its log start (after the repair, or with failOnDataLoss=false): its
    # oldest record, 3 h old, decides
    assert t.new_retention_ms == DAY + 3 * HOUR + HOLD_MARK
    assert t.protect_until == {0: 200, 1: 200}


def test_a_new_partition_is_read_from_its_log_start_whose_record_decides() -> None:
    findings = [unread(T0, age=HOUR), new_partition(T1)]

    t = only(hold(findings, keep=DAY, stamps={T1: RecordStamp(0, NOW - 5 * HOUR)}))

    assert t.action is HoldAction.RAISE
    assert t.new_retention_ms == DAY + 5 * HOUR + HOLD_MARK
    # partition 1's oldest record (5 h old, 3 h retention) may go at the next retention check
    assert t.runway_ms == -2 * HOUR
    assert t.protect_until == {0: 200, 1: 50}


@pytest.mark.parametrize(
    ("stamp", "why"),
    [(None, "not read"), ("timed out", "timed out"), (RecordStamp(0, -1), "it has no timestamp")],
)
def test_a_new_partition_whose_log_start_time_is_not_known_refuses_the_hold(
    stamp: RecordStamp | str | None, why: str
) -> None:
    stamps: dict[TopicPartition, RecordStamp | str] = {} if stamp is None else {T1: stamp}

    t = only(hold([unread(T0, age=HOUR), new_partition(T1)], keep=DAY, stamps=stamps))

    assert t.action is HoldAction.REFUSED
    assert t.reason == f"orders [1]: the oldest unread record's time is not known ({why})"


def test_an_empty_new_partition_has_nothing_unread() -> None:
    t = only(hold([new_partition(T1, start=7, end=7)]))

    assert t.action is HoldAction.ENOUGH and t.reason == "nothing unread"


# -- exit codes -------------------------------------------------------------------------------------


def hold_plan(*actions: HoldAction, executed: bool = False, error: str | None = None) -> HoldPlan:
    topics = tuple(TopicHold(f"t{i}", a, "", error=error) for i, a in enumerate(actions))
    return HoldPlan("/ckpt", DAY, NOW, topics, executed=executed)


@pytest.mark.parametrize(
    ("plan", "code"),
    [
        (hold_plan(HoldAction.RAISE), ExitCode.ACTION_NEEDED),  # a dry run with a raise pending
        (hold_plan(HoldAction.RAISE, HoldAction.ENOUGH, executed=True), ExitCode.OK),
        (hold_plan(HoldAction.RAISE, executed=True, error="not authorized"), ExitCode.ACTION_NEEDED),
        (hold_plan(HoldAction.REFUSED, HoldAction.ENOUGH), ExitCode.ACTION_NEEDED),
        (hold_plan(HoldAction.REFUSED, HoldAction.RAISE, executed=True), ExitCode.ACTION_NEEDED),
        (hold_plan(HoldAction.ENOUGH, HoldAction.ENOUGH), ExitCode.OK),
        (hold_plan(), ExitCode.OK),
    ],
)
def test_hold_plan_exit_code(plan: HoldPlan, code: ExitCode) -> None:
    assert plan.exit_code is code


# -- release ----------------------------------------------------------------------------------------

ORIGINAL, HELD = "10800000", "180000000"


def record(original: str | None = ORIGINAL, protect: dict[int, int] | None = None) -> TopicHoldRecord:
    return TopicHoldRecord(
        "orders",
        {"retention.ms": HeldValue(original, HELD)},
        {0: 200, 1: 300} if protect is None else protect,
        NOW - DAY,
        "ops",
        "outage",
    )


CAUGHT_UP = {T0: 200, T1: 300}


def release(
    rec: TopicHoldRecord,
    values: dict[str, tuple[str | None, bool]] | str,
    positions: dict[TopicPartition, int] = CAUGHT_UP,
    *,
    now: bool = False,
) -> TopicRelease:
    (topic,) = decide_release("/ckpt", [rec], {"orders": values}, positions, now=now).topics
    return topic


def test_a_hold_is_kept_while_the_query_is_below_the_protected_offsets() -> None:
    t = release(record(), {"retention.ms": (HELD, True)}, {T0: 250, T1: 250})

    assert t.action is ReleaseAction.KEEP
    assert t.reason == (
        "the query has not read past the records the hold protects: partition 1 is at 250, below 300 "
        "(1 of 2 partitions behind; a query moved to a new checkpoint never will: `now=True`)"
    )
    assert t.changes == {}


def test_a_partition_the_query_no_longer_reads_does_not_keep_the_hold() -> None:
    t = release(record(), {"retention.ms": (HELD, True)}, {T1: 300})

    assert t.action is ReleaseAction.RESTORE  # partition 0 has no position: nothing to protect


def test_now_releases_even_below_the_protected_offsets() -> None:
    t = release(record(), {"retention.ms": (HELD, True)}, {}, now=True)

    assert t.action is ReleaseAction.RESTORE
    assert t.changes == {"retention.ms": ORIGINAL}


def test_a_value_still_the_held_one_is_put_back() -> None:
    t = release(record(), {"retention.ms": (HELD, True)})

    assert t.action is ReleaseAction.RESTORE
    assert t.changes == {"retention.ms": ORIGINAL}
    assert t.reason == f"put back retention.ms={ORIGINAL}"


def test_a_value_that_was_inherited_before_the_hold_is_deleted() -> None:
    t = release(record(original=None), {"retention.ms": (HELD, True)})

    assert t.action is ReleaseAction.RESTORE
    assert t.changes == {"retention.ms": None}
    assert t.reason == "put back retention.ms=(default)"


def test_a_value_someone_changed_since_is_left() -> None:
    t = release(record(), {"retention.ms": ("999", True)})

    assert t.action is ReleaseAction.CHANGED
    assert t.changes == {}
    assert t.reason == "changed since the hold (retention.ms=999, the hold set 180000000): left as it is"


def test_a_deleted_override_counts_as_changed() -> None:
    t = release(record(), {"retention.ms": ("604800000", False)})

    assert t.action is ReleaseAction.CHANGED
    assert "retention.ms=(default), the hold set 180000000" in t.reason


def test_only_the_values_still_held_are_put_back() -> None:
    rec = TopicHoldRecord(
        "orders",
        {"retention.ms": HeldValue(ORIGINAL, HELD), "retention.bytes": HeldValue(None, str(3 * GIB))},
        {0: 200},
        NOW - DAY,
        "ops",
        "outage",
    )

    t = release(rec, {"retention.ms": (HELD, True), "retention.bytes": (str(5 * GIB), True)})

    assert t.action is ReleaseAction.RESTORE
    assert t.changes == {"retention.ms": ORIGINAL}
    assert t.reason == (
        f"put back retention.ms={ORIGINAL}; left as changed since: "
        f"retention.bytes={5 * GIB}, the hold set {3 * GIB}"
    )


@pytest.mark.parametrize(
    ("original", "now_value"),
    [(ORIGINAL, (ORIGINAL, True)), (None, ("604800000", False)), (None, (None, False))],
)
def test_values_already_back_to_the_original_are_restored(
    original: str | None, now_value: tuple[str | None, bool]
) -> None:
    t = release(record(original=original), {"retention.ms": now_value})

    assert t.action is ReleaseAction.RESTORED
    assert t.reason == "already the original values"
    assert t.changes == {}


def test_a_value_the_broker_did_not_answer_is_unknown_never_guessed() -> None:
    t = release(record(original=None), {})

    assert t.action is ReleaseAction.UNKNOWN and t.reason == "retention.ms not answered"


def test_values_that_could_not_be_read_are_unknown() -> None:
    t = release(record(), "DescribeConfigs timed out")

    assert t.action is ReleaseAction.UNKNOWN
    assert t.reason == "values not read: DescribeConfigs timed out"
    plan = decide_release("/ckpt", [record()], {}, CAUGHT_UP)
    assert plan.topics[0].reason == "values not read: not read"


def test_release_topics_come_sorted_by_name() -> None:
    records = [TopicHoldRecord(n, {}, {}, NOW, "ops", "") for n in ("zeta", "alpha")]

    plan = decide_release("/ckpt", records, {"zeta": {}, "alpha": {}}, {})

    assert [t.topic for t in plan.topics] == ["alpha", "zeta"]


# -- the hold's mark, and two holds of one topic ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retention.ms", str(DAY + 2 * HOUR + HOLD_MARK)),
        ("retention.ms", str(MINUTE + HOLD_MARK)),
        ("retention.bytes", str(2560 * MIB + HOLD_MARK)),
        ("retention.bytes", str(MIB + HOLD_MARK)),
    ],
)
def test_a_value_a_hold_set_carries_its_mark(name: str, value: str) -> None:
    assert set_by_a_hold(name, value) is True


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retention.ms", str(DAY + 2 * HOUR)),  # a round value: someone's
        ("retention.ms", str(MINUTE + HOLD_MARK - 1)),
        ("retention.ms", str(MINUTE + HOLD_MARK + 1)),
        ("retention.ms", "999"),
        ("retention.ms", "-1"),
        ("retention.bytes", str(3 * GIB)),
        ("retention.bytes", str(MIB + HOLD_MARK + 1)),
        ("retention.ms", str(2560 * MIB + HOLD_MARK)),  # marked as bytes, not as a time
        ("retention.bytes", str(3000 * MINUTE + HOLD_MARK)),  # marked as a time, not as bytes
        ("retention.ms", "two days"),
        ("retention.bytes", ""),
        ("retention.ms", None),
        ("retention.bytes", None),
        ("segment.ms", str(MINUTE + HOLD_MARK)),  # not a value a hold sets
        ("cleanup.policy", "7"),
    ],
)
def test_any_other_value_does_not_carry_the_mark(name: str, value: str | None) -> None:
    assert set_by_a_hold(name, value) is False


X = str(3 * HOUR)  # the topic's own retention.ms before any hold: a round value, someone's
HA = str(DAY + 2 * HOUR + HOLD_MARK)  # what hold A set
HB = str(3 * DAY + HOLD_MARK)  # what hold B set later, above A's
RAISED_FURTHER = (
    "raised further by another retention hold since (retention.ms={}): "
    "this one goes back once that one is released"
)


def held_ms(original: str | None, held: str) -> TopicHoldRecord:
    return TopicHoldRecord(
        "orders", {"retention.ms": HeldValue(original, held)}, {0: 200, 1: 300}, NOW - DAY, "ops", "outage"
    )


@pytest.mark.parametrize(
    ("positions", "now"),
    [
        (CAUGHT_UP, False),
        (CAUGHT_UP, True),
        ({T0: 150, T1: 250}, True),  # behind, released now: still kept
    ],
)
def test_a_value_raised_further_by_another_hold_keeps_this_one_even_now(
    positions: dict[TopicPartition, int], now: bool
) -> None:
    plan = decide_release(
        "/ckpt", [held_ms(X, HA)], {"orders": {"retention.ms": (HB, True)}}, positions, now=now
    )

    (t,) = plan.topics
    assert t.action is ReleaseAction.KEEP
    assert t.reason == RAISED_FURTHER.format(HB)
    assert t.reason.startswith("raised further by another retention hold since (retention.ms=")
    assert t.changes == {}
    assert plan.exit_code is ExitCode.ACTION_NEEDED


def test_a_size_raised_further_by_another_hold_keeps_the_whole_topic() -> None:
    held_bytes, further_bytes = str(2 * GIB + HOLD_MARK), str(5 * GIB + HOLD_MARK)
    rec = TopicHoldRecord(
        "orders",
        {"retention.ms": HeldValue(X, HA), "retention.bytes": HeldValue(None, held_bytes)},
        {0: 200},
        NOW - DAY,
        "ops",
        "outage",
    )

    t = release(rec, {"retention.ms": (HA, True), "retention.bytes": (further_bytes, True)})

    assert t.action is ReleaseAction.KEEP
    assert t.reason == (
        f"raised further by another retention hold since (retention.bytes={further_bytes}): "
        "this one goes back once that one is released"
    )
    assert t.changes == {}


@pytest.mark.parametrize("now", [False, True])
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ((str(7 * DAY), True), str(7 * DAY)),  # someone's round value
        ((str(7 * DAY + 1), True), str(7 * DAY + 1)),
        ((HB, False), "(default)"),  # a marked value the topic inherits is not a hold's
    ],
)
def test_a_value_changed_since_without_the_mark_is_still_left(
    value: tuple[str, bool], shown: str, now: bool
) -> None:
    t = release(held_ms(X, HA), {"retention.ms": value}, now=now)

    assert t.action is ReleaseAction.CHANGED
    assert t.reason == f"changed since the hold (retention.ms={shown}, the hold set {HA}): left as it is"
    assert t.changes == {}


def test_two_holds_of_one_topic_go_back_in_turn_when_the_first_placed_is_released_first() -> None:
    hold_a = held_ms(X, HA)  # A raised X to HA
    hold_b = held_ms(HA, HB)  # then B, for another query, raised HA to HB
    assert not set_by_a_hold("retention.ms", X)
    assert set_by_a_hold("retention.ms", HA) and set_by_a_hold("retention.ms", HB)

    # A first, the topic at HB: B still protects its query's records, A waits for it
    first = release(hold_a, {"retention.ms": (HB, True)})
    assert first.action is ReleaseAction.KEEP
    assert first.reason == RAISED_FURTHER.format(HB)
    assert first.changes == {}

    # B: the topic is at B's value, which goes back to what B found, A's
    second = release(hold_b, {"retention.ms": (HB, True)})
    assert second.action is ReleaseAction.RESTORE
    assert second.changes == {"retention.ms": HA}
    assert second.reason == f"put back retention.ms={HA}"

    # A again, the topic back at A's value: the original goes back
    third = release(hold_a, {"retention.ms": (HA, True)})
    assert third.action is ReleaseAction.RESTORE
    assert third.changes == {"retention.ms": X}
    assert third.reason == f"put back retention.ms={X}"


def test_two_holds_of_one_topic_released_last_placed_first_go_back_at_once() -> None:
    # B first, then A: each finds its own value and puts back what it found
    assert release(held_ms(HA, HB), {"retention.ms": (HB, True)}).changes == {"retention.ms": HA}
    assert release(held_ms(X, HA), {"retention.ms": (HA, True)}).changes == {"retention.ms": X}


def release_plan(*actions: ReleaseAction, executed: bool = False, error: str | None = None) -> ReleasePlan:
    return ReleasePlan(
        "/ckpt", tuple(TopicRelease(f"t{i}", a, "", error=error) for i, a in enumerate(actions)), executed
    )


@pytest.mark.parametrize(
    ("plan", "code"),
    [
        (release_plan(ReleaseAction.RESTORE), ExitCode.ACTION_NEEDED),  # a dry run with changes pending
        (release_plan(ReleaseAction.RESTORE, executed=True), ExitCode.OK),
        (release_plan(ReleaseAction.RESTORE, executed=True, error="denied"), ExitCode.ACTION_NEEDED),
        (release_plan(ReleaseAction.KEEP), ExitCode.ACTION_NEEDED),
        (release_plan(ReleaseAction.KEEP, executed=True), ExitCode.ACTION_NEEDED),
        (release_plan(ReleaseAction.UNKNOWN), ExitCode.ACTION_NEEDED),
        (release_plan(ReleaseAction.RESTORED, ReleaseAction.CHANGED), ExitCode.OK),
        (release_plan(), ExitCode.OK),
    ],
)
def test_release_plan_exit_code(plan: ReleasePlan, code: ExitCode) -> None:
    assert plan.exit_code is code


# -- property ---------------------------------------------------------------------------------------


@given(
    retention_ms=st.integers(min_value=0, max_value=400 * DAY),
    ages=st.lists(st.integers(min_value=-HOUR, max_value=60 * DAY), min_size=1, max_size=4),
    keep=st.integers(min_value=1, max_value=60 * DAY),
)
def test_a_raise_keeps_the_oldest_unread_record_keep_more_and_never_lowers(
    retention_ms: int, ages: list[int], keep: int
) -> None:
    findings = [
        unread(TopicPartition("orders", p), age=age, retention_ms=retention_ms) for p, age in enumerate(ages)
    ]
    limits = HoldLimits(keep_ms=keep, max_retention_ms=10**15)

    t = only(hold(findings, TopicRetention(retention_ms), limits=limits))

    needed = NOW + keep - (NOW - max(ages))
    assert t.action is (HoldAction.RAISE if retention_ms < needed else HoldAction.ENOUGH)
    if t.action is HoldAction.RAISE:
        assert t.new_retention_ms is not None
        assert t.new_retention_ms >= needed
        assert t.new_retention_ms > retention_ms
        assert t.new_retention_ms - needed < MINUTE + HOLD_MARK
        assert t.new_retention_ms % MINUTE == HOLD_MARK
    else:
        assert t.new_retention_ms is None
        assert retention_ms >= needed
    assert t.new_retention_bytes is None


def test_partitions_spark_does_not_resume_cleanly_are_named_and_alone_refuse_the_hold() -> None:
    recreated = unread(T1, age=HOUR, verdict=Verdict.TOPIC_RECREATED)

    mixed = hold([unread(T0, age=20 * HOUR), recreated], keep=2 * DAY)
    alone = hold([recreated], keep=2 * DAY)

    assert only(mixed).action is HoldAction.RAISE  # partition 0 still gets its hold
    assert mixed.notes == (
        "orders [1]: TOPIC_RECREATED: not held; see `validate_checkpoint` and repair first",
    )
    assert only(alone).action is HoldAction.REFUSED and alone.exit_code == 1
    assert only(alone).reason == "no partition Spark resumes cleanly (TOPIC_RECREATED): repair first"
