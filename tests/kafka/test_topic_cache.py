"""TopicCache: which kept topic descriptions a round may use again (no broker)."""

from __future__ import annotations

from recovery.core.model import OffsetRange, TopicPartition
from recovery.kafka.cluster import TopicCache
from recovery.kafka.values import MissingPartition, MissingReason, PartitionOffsets, TopicInfo

ORDERS = TopicInfo("orders", "id-1", 2)


def _read(*ends: tuple[int, int]) -> dict[TopicPartition, PartitionOffsets | MissingPartition]:
    return {
        TopicPartition("orders", p): PartitionOffsets(TopicPartition("orders", p), start, end, None, "id-1")
        for p, (start, end) in enumerate(ends)
    }


def test_a_description_is_used_again_until_it_is_max_age_old() -> None:
    now = [100.0]
    cache = TopicCache(max_age_s=300, clock=lambda: now[0])
    cache.keep({"orders": ORDERS, "gone": None}, _read((0, 5), (0, 5)))
    assert cache.fresh(["orders", "gone", "other"]) == {"orders": ORDERS}
    now[0] = 399.0
    assert cache.fresh(["orders"]) == {"orders": ORDERS}
    # a checkpoint names a partition it does not have (added since, read by a running query): not used
    assert cache.fresh(["orders"], [TopicPartition("orders", 1)]) == {"orders": ORDERS}
    assert cache.fresh(["orders"], [TopicPartition("orders", 2)]) == {}
    now[0] = 400.0
    assert cache.fresh(["orders"]) == {}
    cache.keep({"orders": None}, {})  # described again: no such topic now
    now[0] = 100.0
    assert cache.fresh(["orders"]) == {}


def test_offsets_that_went_back_or_a_partition_unknown_mean_the_topic_may_have_changed() -> None:
    cache = TopicCache()
    cache.keep({"orders": ORDERS}, _read((2, 5), (0, 5)))
    used = {"orders": ORDERS}
    assert cache.changed(used, _read((3, 9), (0, 5))) == set()  # retention and appends move forward
    cache.keep({}, _read((3, 9), (0, 5)))  # each round's offsets are kept
    assert cache.changed(used, _read((2, 9), (0, 5))) == {"orders"}  # log start went back
    assert cache.changed(used, _read((3, 9), (0, 4))) == {"orders"}  # high watermark went back
    gone = {
        TopicPartition("orders", 1): MissingPartition(TopicPartition("orders", 1), MissingReason.TOPIC_GONE)
    }
    assert cache.changed(used, {**_read((3, 9)), **gone}) == {"orders"}
    assert cache.changed({}, _read((0, 0), (0, 0))) == set()  # described this round: nothing to compare


def test_a_range_read_again_unchanged_is_the_very_one_given_before() -> None:
    cache = TopicCache()
    first = cache.keep({"orders": ORDERS}, _read((0, 5), (0, 5)))
    again = cache.keep({}, _read((0, 5), (1, 7)))
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    assert list(again) == [p0, p1]
    assert again[p0] is first[p0]  # a judging given again compares its cluster by identity first
    assert again[p1] == OffsetRange(1, 7) and first[p1] == OffsetRange(0, 5)
    # read_committed: the range ends at the last stable offset, kept beside the high watermark
    committed = {p0: PartitionOffsets(p0, 0, 9, 5, "id-1")}
    assert cache.keep({}, committed)[p0] is first[p0]
    assert cache.changed({"orders": ORDERS}, {p0: PartitionOffsets(p0, 0, 8, 5, "id-1")}) == {"orders"}


def test_ranges_are_given_for_every_partition_read_and_kept_across_a_new_description() -> None:
    cache = TopicCache()
    first = cache.keep({"orders": ORDERS}, _read((0, 5), (0, 5)))
    gone = MissingPartition(TopicPartition("orders", 1), MissingReason.PARTITION_GONE)
    other = TopicPartition("other", 0)  # a topic not kept (not described here): its range still given
    read = {
        **_read((0, 5)),
        TopicPartition("orders", 1): gone,
        other: PartitionOffsets(other, 2, 3, None, "x"),
    }
    again = cache.keep({"orders": ORDERS}, read)  # described anew (every 5 minutes)
    assert list(again) == [TopicPartition("orders", 0), other]
    assert again[TopicPartition("orders", 0)] is first[TopicPartition("orders", 0)]
    assert again[other] == OffsetRange(2, 3)
