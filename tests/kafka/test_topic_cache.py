"""TopicCache: which kept topic descriptions a round may use again (no broker)."""

from __future__ import annotations

from recovery.core.model import TopicPartition
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
