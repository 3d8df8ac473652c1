"""FirstOffsetCache: which kept time-lookup answers hold for a cluster read now (no broker)."""

from __future__ import annotations

import time

from recovery.core.model import ClusterView, OffsetRange, TopicPartition
from recovery.kafka.cluster import FirstOffsetCache

TP = TopicPartition("orders", 0)
T = 1_700_000_000_000


def _cluster(start: int, end: int, topic_id: str = "id-1", hwm: int | None = None) -> ClusterView:
    high = {TP: hwm} if hwm is not None else {}
    return ClusterView({TP: OffsetRange(start, end)}, {"orders": topic_id}, high_watermarks=high)


def test_an_offset_found_holds_while_the_log_starts_at_or_below_it_and_ends_past_it() -> None:
    cache = FirstOffsetCache()
    cache.keep({T: {TP: 4}}, _cluster(0, 10), time.monotonic())
    assert cache.usable({T: [TP]}) == {T: {TP}}
    assert cache.still_true({T: [TP]}, _cluster(4, 12)) == ({T: {TP: 4}}, {})
    for now in (_cluster(5, 12), _cluster(0, 4), _cluster(0, 10, topic_id="id-2")):
        assert cache.still_true({T: [TP]}, now) == ({}, {T: {TP}})
    # a partition gone: its answers are dropped, and it is not asked
    assert cache.still_true({T: [TP]}, ClusterView({}, {"orders": "id-1"})) == ({}, {})
    assert cache.usable({T: [TP]}) == {}


def test_none_that_new_holds_once_two_rounds_found_the_same_end_and_while_nothing_is_appended() -> None:
    cache = FirstOffsetCache()
    cache.keep({T: {TP: None}}, _cluster(0, 10), time.monotonic())
    assert cache.usable({T: [TP]}) == {}  # the lookup may have seen less than the end read beside it
    cache.keep({T: {TP: None}}, _cluster(0, 11), time.monotonic())
    assert cache.usable({T: [TP]}) == {}  # the log grew meanwhile
    sent_at = time.monotonic() - 60  # another batch's lookup, sent before that end was read
    cache.keep({T: {TP: None}}, _cluster(0, 11), sent_at)
    assert cache.usable({T: [TP]}) == {}
    cache.keep({T: {TP: None}}, _cluster(0, 11), time.monotonic())
    assert cache.usable({T: [TP]}) == {T: {TP}}
    assert cache.still_true({T: [TP]}, _cluster(3, 11)) == ({T: {TP: None}}, {})
    assert cache.still_true({T: [TP]}, _cluster(0, 12)) == ({}, {T: {TP}})
    # read_committed views end at the last stable offset: the lookups' end is the high watermark
    assert cache.still_true({T: [TP]}, _cluster(0, 9, hwm=11)) == ({T: {TP: None}}, {})
    assert cache.still_true({T: [TP]}, _cluster(0, 11, hwm=12)) == ({}, {T: {TP}})


def test_answers_of_topics_without_ids_are_not_kept_and_the_oldest_go_first() -> None:
    cache = FirstOffsetCache(size=2)
    cache.keep({T: {TP: 1}}, _cluster(0, 10, topic_id=""), time.monotonic())
    assert len(cache) == 0
    others = {TopicPartition("orders", p): p for p in range(3)}
    cluster = ClusterView({tp: OffsetRange(0, 10) for tp in others}, {"orders": "id-1"})
    cache.keep({T: others}, cluster, time.monotonic())
    assert len(cache) == 2 and cache.usable({T: list(others)}) == {T: set(list(others)[1:])}
