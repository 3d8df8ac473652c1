"""ListOffsets answers -> rows, and topic selections -> partitions (pure: no broker)."""

from __future__ import annotations

import pytest

from recovery.core.model import Isolation, NoMatch, TopicPartition
from recovery.core.specs import TimeKind, TimeSpec, parse_topic_partitions
from recovery.errors import NoOffsetForTime, TopicNotFound
from recovery.kafka.answers import offset_rows, queries, torn
from recovery.kafka.selection import explicit_partitions, selected_partitions
from recovery.kafka.values import ListedTopic, OffsetRow, PartitionOffsets, TimeLookup, TopicInfo

ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
LATEST = TimeSpec(TimeKind.LATEST)
EARLIEST = TimeSpec(TimeKind.EARLIEST)
AT_T = TimeSpec(TimeKind.TIMESTAMP, 1_000)


def answers(
    **kinds: dict[TopicPartition, int | tuple[int, int]],
) -> dict[str, dict[TopicPartition, tuple[int, int]]]:
    """``answers(earliest={tp: 10}, hw={tp: 90}, time={tp: (42, 1_500)})``; a bare int has timestamp -1."""
    return {
        kind: {tp: value if isinstance(value, tuple) else (value, -1) for tp, value in by_tp.items()}
        for kind, by_tp in kinds.items()
    }


def test_earliest_and_latest_need_no_time_lookup() -> None:
    assert set(queries(LATEST, Isolation.READ_UNCOMMITTED, with_lso=False)) == {"earliest", "hw"}
    assert set(queries(EARLIEST, Isolation.READ_COMMITTED, with_lso=True)) == {"earliest", "hw", "lso"}


def test_a_timestamp_is_looked_up_under_the_asked_isolation() -> None:
    wanted = queries(AT_T, Isolation.READ_COMMITTED, with_lso=True)
    assert wanted["time"] == (AT_T, Isolation.READ_COMMITTED)
    assert wanted["earliest"] == (EARLIEST, Isolation.READ_UNCOMMITTED)
    assert wanted["lso"] == (LATEST, Isolation.READ_COMMITTED)


def test_answers_that_disagree_are_torn() -> None:
    """A DeleteRecords between the lookups: log start 50 > high watermark 40."""
    found = answers(earliest={ORDERS_0: 50, ORDERS_1: 0}, hw={ORDERS_0: 40, ORDERS_1: 5})
    assert torn([ORDERS_0, ORDERS_1], found) == [ORDERS_0]


def test_last_stable_offset_above_the_high_watermark_is_torn() -> None:
    found = answers(earliest={ORDERS_0: 0}, hw={ORDERS_0: 5}, lso={ORDERS_0: 6})
    assert torn([ORDERS_0], found) == [ORDERS_0]


def test_latest_is_the_last_stable_offset_under_read_committed() -> None:
    found = answers(earliest={ORDERS_0: 0}, hw={ORDERS_0: 8}, lso={ORDERS_0: 7})

    committed = offset_rows(
        [ORDERS_0], found, {"orders": "id"}, LATEST, Isolation.READ_COMMITTED, NoMatch.FAIL
    )
    uncommitted = offset_rows(
        [ORDERS_0], found, {"orders": "id"}, LATEST, Isolation.READ_UNCOMMITTED, NoMatch.FAIL
    )

    offsets = PartitionOffsets(ORDERS_0, 0, 8, 7, "id")
    assert committed == {ORDERS_0: OffsetRow(offsets, TimeLookup(ORDERS_0, LATEST, 7))}
    assert uncommitted[ORDERS_0].lookup.offset == 8


def test_a_matching_record_gives_its_offset_and_timestamp() -> None:
    found = answers(earliest={ORDERS_0: 0}, hw={ORDERS_0: 9}, time={ORDERS_0: (4, 1_200)})

    rows = offset_rows([ORDERS_0], found, {"orders": "id"}, AT_T, Isolation.READ_UNCOMMITTED, NoMatch.FAIL)

    assert rows[ORDERS_0].lookup == TimeLookup(ORDERS_0, AT_T, 4, 1_200)
    assert rows[ORDERS_0].offsets.last_stable is None


@pytest.mark.parametrize(
    ("no_match", "offset"),
    [(NoMatch.LATEST, 9), (NoMatch.EARLIEST, 3)],
    ids=["latest", "earliest"],
)
def test_no_record_at_or_after_the_time_follows_the_policy(no_match: NoMatch, offset: int) -> None:
    """KIP-79: -1 means no record at or after T."""
    found = answers(earliest={ORDERS_0: 3}, hw={ORDERS_0: 9}, time={ORDERS_0: (-1, -1)})

    rows = offset_rows([ORDERS_0], found, {"orders": "id"}, AT_T, Isolation.READ_UNCOMMITTED, no_match)

    assert rows[ORDERS_0].lookup == TimeLookup(ORDERS_0, AT_T, offset, None, no_match)


def test_no_record_with_no_match_fail_names_every_partition() -> None:
    found = answers(
        earliest={ORDERS_0: 0, ORDERS_1: 0},
        hw={ORDERS_0: 9, ORDERS_1: 9},
        time={ORDERS_0: (-1, -1), ORDERS_1: (-1, -1)},
    )

    with pytest.raises(NoOffsetForTime) as failed:
        offset_rows(
            [ORDERS_1, ORDERS_0], found, {"orders": "id"}, AT_T, Isolation.READ_UNCOMMITTED, NoMatch.FAIL
        )

    assert failed.value.partitions == (ORDERS_0, ORDERS_1)
    assert str(failed.value).startswith("no_match 'fail': no record at or after ")
    assert failed.value.parameter == "no_match"


# -- selections ----------------------------------------------------------------------------------

INFOS = {
    "orders": TopicInfo("orders", "id-o", 3),
    "orders-dlq": TopicInfo("orders-dlq", "id-d", 1),
    "__consumer_offsets": TopicInfo("__consumer_offsets", "id-c", 2, internal=True),
}


def test_a_topic_name_selects_every_partition_of_that_topic_only() -> None:
    selected = selected_partitions(parse_topic_partitions("orders"), INFOS, "b:9092")
    assert selected == (TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 2))


def test_explicit_partitions_are_kept_even_when_they_do_not_exist() -> None:
    selection = parse_topic_partitions("orders:1,7")

    assert explicit_partitions(selection.patterns[0]) == (1, 7)
    assert selected_partitions(selection, INFOS, "b:9092") == (
        TopicPartition("orders", 1),
        TopicPartition("orders", 7),
    )


def test_a_regex_or_open_range_names_no_partition_explicitly() -> None:
    assert explicit_partitions(parse_topic_partitions("orders.*:0").patterns[0]) is None
    assert explicit_partitions(parse_topic_partitions("orders:1-").patterns[0]) is None


def test_internal_topics_can_be_left_out() -> None:
    selection = parse_topic_partitions(".*", exclude_internal=True)
    assert {tp.topic for tp in selected_partitions(selection, INFOS, "b:9092")} == {"orders", "orders-dlq"}


def test_a_missing_topic_name_is_topic_not_found() -> None:
    with pytest.raises(TopicNotFound, match="topic payments does not exist on the cluster at b:9092"):
        selected_partitions(parse_topic_partitions("payments"), {}, "b:9092")


def test_a_regex_matching_nothing_is_topic_not_found() -> None:
    with pytest.raises(TopicNotFound, match=r"no partition of the cluster at b:9092 matches pay\.\*"):
        selected_partitions(parse_topic_partitions("pay.*"), {}, "b:9092")


def test_a_listed_topic_selects_as_a_described_one() -> None:
    # internal as listed_topics tells it: by the "__" prefix
    listed = {name: ListedTopic(name, info.partitions, name.startswith("__")) for name, info in INFOS.items()}
    for spec in ("orders", "orders.*:0", ".*"):
        selection = parse_topic_partitions(spec, exclude_internal=spec == ".*")
        by_listing = selected_partitions(selection, listed, "b:9092")
        assert by_listing == selected_partitions(selection, INFOS, "b:9092")
