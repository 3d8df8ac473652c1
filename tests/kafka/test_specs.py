"""Parsing what users type: topic-partition selections and time specs (pure, no broker)."""

from __future__ import annotations

import pytest

from recovery.core.specs import (
    PartitionRange,
    TimeKind,
    TimeSpec,
    TopicPattern,
    parse_time,
    parse_topic_partitions,
    topic_regex,
)
from recovery.errors import OffsetSpecError


@pytest.mark.parametrize(
    ("spec", "patterns"),
    [
        ("orders", (TopicPattern("orders"),)),
        ("orders.*", (TopicPattern("orders.*"),)),
        ("orders:3", (TopicPattern("orders", (PartitionRange(3, 4),)),)),
        ("orders:2-5", (TopicPattern("orders", (PartitionRange(2, 5),)),)),
        ("orders:2-", (TopicPattern("orders", (PartitionRange(2, None),)),)),
        ("orders:-5", (TopicPattern("orders", (PartitionRange(0, 5),)),)),
        (
            "orders:0,1,4",
            (TopicPattern("orders", (PartitionRange(0, 1), PartitionRange(1, 2), PartitionRange(4, 5))),),
        ),
        (
            "orders:0,payments.*:1-3",
            (
                TopicPattern("orders", (PartitionRange(0, 1),)),
                TopicPattern("payments.*", (PartitionRange(1, 3),)),
            ),
        ),
        (":1", (TopicPattern(".*", (PartitionRange(1, 2),)),)),
        ("a,b", (TopicPattern("a"), TopicPattern("b"))),
    ],
    ids=[
        "topic",
        "regex",
        "one",
        "range",
        "open-high",
        "open-low",
        "list",
        "two-items",
        "all-topics",
        "two-topics",
    ],
)
def test_topic_partitions(spec: str, patterns: tuple[TopicPattern, ...]) -> None:
    assert parse_topic_partitions(spec).patterns == patterns


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("orders:5-2", "is empty"),
        ("orders:-", "is not a partition range"),
        ("orders:", "names no partitions"),
        ("orders:x", "is not TOPIC_REGEX[:PARTITIONS]"),
        ("(orders", "not a valid topic regex"),
        ("a,,b", "is not TOPIC_REGEX[:PARTITIONS]"),
    ],
    ids=["empty-range", "dash", "colon-only", "not-a-number", "bad-regex", "empty-item"],
)
def test_bad_topic_partitions(spec: str, message: str) -> None:
    with pytest.raises(OffsetSpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_topic_partitions(spec)


def test_topic_regex_matches_whole_names_like_get_offset_shell() -> None:
    selection = topic_regex("orders", exclude_internal=True)
    assert selection.matches("orders", 7)
    assert not selection.matches("orders-v2", 0)
    assert not topic_regex(".*", exclude_internal=True).matches("__consumer_offsets", 0, internal=True)
    assert topic_regex(".*").matches("__consumer_offsets", 0, internal=True)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("earliest", TimeSpec(TimeKind.EARLIEST)),
        ("-2", TimeSpec(TimeKind.EARLIEST)),
        ("latest", TimeSpec(TimeKind.LATEST)),
        ("-1", TimeSpec(TimeKind.LATEST)),
        ("max-timestamp", TimeSpec(TimeKind.MAX_TIMESTAMP)),
        ("-3", TimeSpec(TimeKind.MAX_TIMESTAMP)),
        ("1795327200000", TimeSpec(TimeKind.TIMESTAMP, 1795327200000)),
        ("2026-11-22T06:00:00", TimeSpec(TimeKind.TIMESTAMP, 1795327200000)),
        ("2026-11-22T06:00:00Z", TimeSpec(TimeKind.TIMESTAMP, 1795327200000)),
        ("2026-11-22T08:00:00.250+02:00", TimeSpec(TimeKind.TIMESTAMP, 1795327200250)),
        ("0", TimeSpec(TimeKind.TIMESTAMP, 0)),
    ],
    ids=[
        "earliest",
        "-2",
        "latest",
        "-1",
        "max-ts",
        "-3",
        "epoch-ms",
        "iso-utc-default",
        "iso-z",
        "iso-offset",
        "zero",
    ],
)
def test_time_specs(text: str, spec: TimeSpec) -> None:
    assert parse_time(text) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-4", "only -1 (latest), -2 (earliest) and -3"),
        ("yesterday", "expected earliest, latest, max-timestamp"),
        ("1969-12-31T23:59:59Z", "before 1970"),
    ],
    ids=["earliest-local", "words", "before-epoch"],
)
def test_bad_time_specs(text: str, message: str) -> None:
    with pytest.raises(OffsetSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_time(text)


def test_time_spec_renders_as_typed() -> None:
    assert [str(parse_time(t)) for t in ("-2", "latest", "-3", "1000")] == [
        "earliest",
        "latest",
        "max-timestamp",
        "1000",
    ]


def test_time_spec_label_for_people() -> None:
    assert parse_time("2026-11-22T06:00:00Z").label() == "1795327200000 (2026-11-22T06:00:00.000Z)"
    assert parse_time("-3").label() == "max-timestamp"
