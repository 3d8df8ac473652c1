"""From the options as given to a Strategy: which combinations are allowed, how times resolve.
Pure: the clock, the Kafka lookup and the file reader are handed in."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from recovery.core.model import NoMatch, OnBeyondEnd, Strategy, StrategyKind, TopicPartition
from recovery.core.strategy import StrategyRequest, parse_datetime_ms, parse_duration_ms, resolve_strategy
from recovery.errors import OffsetSpecError

O0 = TopicPartition("orders", 0)
NOW = 1_795_000_000_000


def resolve(request: StrategyRequest) -> tuple[Strategy, list[tuple[int, NoMatch]]]:
    asked: list[tuple[int, NoMatch]] = []

    def time_targets(ts: int, no_match: NoMatch) -> Mapping[TopicPartition, int]:
        asked.append((ts, no_match))
        return {O0: 42}

    def file_targets(path: str, *, name: str) -> Mapping[TopicPartition, int]:
        assert name == "from_file"
        return {O0: len(path)}

    return resolve_strategy(request, now_ms=NOW, time_targets=time_targets, file_targets=file_targets), asked


def test_no_option_is_the_follower_style_clamp() -> None:
    strategy, asked = resolve(StrategyRequest())
    assert strategy == Strategy(StrategyKind.CLAMP, OnBeyondEnd.LATEST) and asked == []


def test_a_value_option_implies_its_strategy() -> None:
    assert resolve(StrategyRequest(shift_by=-5))[0].kind is StrategyKind.SHIFT_BY
    assert resolve(StrategyRequest(from_file="a.csv"))[0].targets == {O0: 5}


def test_by_duration_is_resolved_against_the_clock_it_is_given() -> None:
    strategy, asked = resolve(StrategyRequest(by_duration="PT1M", no_match=NoMatch.EARLIEST))
    assert asked == [(NOW - 60_000, NoMatch.EARLIEST)]
    assert strategy.kind is StrategyKind.BY_DURATION and strategy.targets == {O0: 42}


def test_to_datetime_takes_iso_8601_in_utc() -> None:
    _, asked = resolve(StrategyRequest(to_datetime="2026-11-22T06:00:00Z"))
    assert asked == [(1_795_327_200_000, NoMatch.LATEST)]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            StrategyRequest(shift_by=1, to_offset=3),
            "kind clamp does not go with shift_by, to_offset",
        ),
        (
            StrategyRequest(kind=StrategyKind.EARLIEST, to_offset=3),
            "kind earliest does not go with to_offset",
        ),
        (StrategyRequest(kind=StrategyKind.TO_OFFSET), "kind to-offset needs a value for to_offset"),
        (
            StrategyRequest(kind=StrategyKind.LATEST, on_beyond_end=OnBeyondEnd.EARLIEST),
            "on_beyond_end goes with the clamp strategy, not latest",
        ),
        (StrategyRequest(to_datetime="yesterday"), "to_datetime 'yesterday': give an ISO-8601 date-time"),
        (StrategyRequest(to_datetime="latest"), "to_datetime 'latest': give an ISO-8601 date-time"),
        (StrategyRequest(by_duration="P99999999999D"), "longer than 100 years"),
        (StrategyRequest(by_duration="30m"), "by_duration '30m': expected ISO-8601"),
    ],
    ids=[
        "two-values",
        "kind-and-other-value",
        "kind-without-value",
        "beyond-end-not-clamp",
        "word",
        "named-time",
        "huge-duration",
        "not-iso",
    ],
)
def test_options_that_do_not_fit_are_bad_input_naming_them(request_: StrategyRequest, message: str) -> None:
    with pytest.raises(OffsetSpecError) as failed:
        resolve(request_)
    assert message in str(failed.value)


def test_durations_and_times_parse_as_kafka_consumer_groups_does() -> None:
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4.5) * 1000
    assert parse_datetime_ms("1795327200000") == 1_795_327_200_000
    assert parse_datetime_ms("2026-11-22T07:00:00+01:00") == 1_795_327_200_000
