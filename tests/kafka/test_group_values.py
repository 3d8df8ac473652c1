"""Consumer-group judgements (pure: no broker): verdicts in the toolkit's words, exit codes, checks."""

from __future__ import annotations

import pytest

from recovery.errors import ExitCode, GroupActive, InvalidInput, OffsetOutsideLog
from recovery.kafka.group_values import (
    EXPIRED,
    GroupChange,
    GroupOffsets,
    check_in_log,
    check_inactive,
    expired_offsets,
    group_report,
    judge,
    read_offsets_file,
)
from recovery.kafka.values import MissingPartition, MissingReason, PartitionOffsets
from recovery.model import TopicPartition, Verdict

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
TP2 = TopicPartition("orders", 2)


def log(tp: TopicPartition, start: int, end: int) -> PartitionOffsets:
    return PartitionOffsets(tp, start, end, None, "id")


def group(offsets: dict[TopicPartition, int], state: str = "Empty", members: int = 0) -> GroupOffsets:
    return GroupOffsets("billing", state, members, offsets)


@pytest.mark.parametrize(
    ("committed", "verdict"),
    [(10, Verdict.OK), (50, Verdict.OK), (9, Verdict.BELOW_LOG_START), (51, Verdict.BEYOND_LOG_END)],
    ids=["log-start", "high-watermark", "below", "beyond"],
)
def test_a_committed_offset_is_judged_against_the_log(committed: int, verdict: Verdict) -> None:
    assert judge(committed, log(TP0, 10, 50)) is verdict


def test_a_gone_partition_keeps_its_reason_as_verdict() -> None:
    assert judge(3, MissingPartition(TP0, MissingReason.TOPIC_GONE)) is Verdict.TOPIC_GONE
    assert judge(3, MissingPartition(TP0, MissingReason.PARTITION_GONE)) is Verdict.PARTITION_GONE


def test_group_report_statuses_lag_and_exit_code() -> None:
    now = group({TP0: 40, TP1: 60})
    ranges = {TP0: log(TP0, 10, 50), TP1: log(TP1, 0, 50), TP2: log(TP2, 0, 7)}

    report = group_report(now, ranges, expired=[TP2])

    assert [(p.tp, p.status, p.lag) for p in report.partitions] == [
        (TP0, "OK", 10),
        (TP1, "BEYOND_LOG_END", -10),
        (TP2, EXPIRED, None),
    ]
    assert report.expired == (TP2,)
    assert report.exit_code is ExitCode.ACTION_NEEDED


def test_a_healthy_group_exits_0() -> None:
    report = group_report(group({TP0: 40}), {TP0: log(TP0, 10, 50)})
    assert report.exit_code is ExitCode.OK


def test_expired_offsets_are_the_ones_the_group_lost() -> None:
    assert expired_offsets({TP0: 1, TP1: 2}, group({TP1: 2})) == (TP0,)


def test_a_dry_run_with_changes_pending_exits_1() -> None:
    dry = GroupChange(group({TP0: 5}), {TP0: 7, TP1: 0}, executed=False)
    same = GroupChange(group({TP0: 5}), {TP0: 5}, executed=False)
    done = GroupChange(group({TP0: 5}), {TP0: 7}, executed=True)

    assert (dry.pending, dry.exit_code) == ((TP0, TP1), ExitCode.ACTION_NEEDED)
    assert (same.pending, same.exit_code) == ((), ExitCode.OK)
    assert (done.pending, done.exit_code) == ((), ExitCode.OK)


def test_an_active_group_is_refused() -> None:
    check_inactive(group({}, "Dead"))
    with pytest.raises(GroupActive, match=r"group billing is Stable with 2 active member\(s\)"):
        check_inactive(group({}, "Stable", 2))


def test_offsets_outside_the_log_are_refused_with_every_reason() -> None:
    ranges = {TP0: log(TP0, 10, 50), TP1: MissingPartition(TP1, MissingReason.PARTITION_GONE)}

    check_in_log({TP0: 10}, ranges)
    with pytest.raises(OffsetOutsideLog) as refused:
        check_in_log({TP0: 51, TP1: 0, TP2: 0}, ranges)

    assert str(refused.value) == (
        "orders [0] offset 51 is outside the log [10, 50]; orders [1] does not exist (PARTITION_GONE); "
        "orders [2] does not exist (not found). Nothing was written."
    )


def test_offsets_file_with_and_without_header() -> None:
    plain = read_offsets_file(["orders,0,5", "", "orders,1,7"], "plan.csv")
    ours = read_offsets_file(
        ["topic,partition,committed_offset,log_start_offset", "orders,0,5,0"], "export.csv"
    )

    assert plain == {TP0: 5, TP1: 7}
    assert ours == {TP0: 5}


def test_a_bad_offsets_line_names_file_and_line() -> None:
    with pytest.raises(InvalidInput, match=r"plan.csv: line 2 is not topic,partition,offset \(orders,x,5\)"):
        read_offsets_file(["orders,0,5", "orders,x,5"], "plan.csv")
