"""A Python caller passing a time out of range or a backup directory that cannot be made gets an
``InvalidInput`` naming the parameter and the value (exit code 2 as a value), before any connection
is tried, never an ``OverflowError`` or a ``FileNotFoundError`` (issue 28). The broker named here
does not exist: a check that came after connecting would fail differently (KafkaUnavailable)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from chk_builder import checkpoint_files, tree, write_checkpoint

from recovery import (
    KafkaConfig,
    NoMatch,
    StrategyRequest,
    TopicPartition,
    offsets_for_time,
    repair_checkpoint,
    starting_offsets,
)
from recovery.api import checkpoint_time_targets
from recovery.checkpoint.store import Store
from recovery.core.specs import MAX_TIMESTAMP_MS, TimeKind, TimeSpec, iso_utc
from recovery.errors import ExitCode, InvalidInput, OffsetSpecError, RecoveryError
from recovery.kafka.cluster import time_targets

NOWHERE = KafkaConfig("127.0.0.1:1", timeout_s=1)
ORDERS_0 = TopicPartition("orders", 0)
AFTER_9999 = "after 9999-12-31T23:59:59.999Z (253402300799999), the latest time ISO-8601 can write"
BEFORE_1970 = "before 1970-01-01, the earliest time a record can have"


def checkpoint(tmp_path: Path) -> str:
    return str(write_checkpoint(tmp_path / "chk", checkpoint_files(partitions=1, batches=1, committed=1)))


Call = Callable[[Path, int], object]

CALLS: dict[str, Call] = {
    "TimeSpec": lambda _, ms: TimeSpec(TimeKind.TIMESTAMP, ms),
    "offsets_for_time": lambda _, ms: offsets_for_time(NOWHERE, [ORDERS_0], ms),
    "time_targets": lambda _, ms: time_targets(NOWHERE, [ORDERS_0], ms, NoMatch.LATEST),
    "starting_offsets": lambda _, ms: starting_offsets(NOWHERE, topics=["orders"], timestamp_ms=ms),
    "checkpoint_time_targets": lambda tmp, ms: checkpoint_time_targets(
        checkpoint(tmp), NOWHERE, ms, NoMatch.LATEST
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(
    ("timestamp_ms", "wrong"),
    [
        (2**64, AFTER_9999),  # confluent_kafka: OverflowError
        (MAX_TIMESTAMP_MS + 1, AFTER_9999),  # no ISO-8601 for it
        (-1, BEFORE_1970),  # ListOffsets would read it as "latest"
        (-2, BEFORE_1970),  # ... as "earliest"
        (-10, BEFORE_1970),
    ],
    ids=["past-int64", "past-9999", "minus-1", "minus-2", "negative"],
)
def test_a_timestamp_out_of_range_is_invalid_input_naming_timestamp_ms(
    call: str, timestamp_ms: int, wrong: str, tmp_path: Path
) -> None:
    with pytest.raises(OffsetSpecError) as refused:
        CALLS[call](tmp_path, timestamp_ms)
    assert str(refused.value) == f"timestamp_ms {timestamp_ms}: {wrong}"
    assert refused.value.exit_code is ExitCode.INVALID_INPUT


def test_the_edges_of_the_range_are_times() -> None:
    assert TimeSpec(TimeKind.TIMESTAMP, 0).label() == "0 (1970-01-01T00:00:00.000Z)"
    last = TimeSpec(TimeKind.TIMESTAMP, MAX_TIMESTAMP_MS)
    assert last.label() == f"{MAX_TIMESTAMP_MS} (9999-12-31T23:59:59.999Z)"


def test_a_record_time_iso_8601_cannot_write_is_shown_without_overflowing() -> None:
    """A record's CreateTime is whatever its producer set (any long): ``offsets`` shows it anyway."""
    assert iso_utc(2**62) == "after 9999-12-31T23:59:59.999Z"
    assert iso_utc(-(2**62)) == "before 0001-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (StrategyRequest(to_datetime=str(2**64)), f"to_datetime '{2**64}': {AFTER_9999}"),
        (StrategyRequest(by_duration="P30000D"), "reaches back before 1970-01-01"),
        (StrategyRequest(by_duration=f"P{'9' * 400}DT1.5S"), "longer than 100 years"),
    ],
    ids=["to-datetime", "by-duration-before-1970", "by-duration-huge"],
)
def test_repair_refuses_a_time_out_of_range_before_reading_the_cluster(
    request_: StrategyRequest, message: str, tmp_path: Path
) -> None:
    chk = checkpoint(tmp_path)
    before = tree(Path(chk))
    with pytest.raises(OffsetSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        repair_checkpoint(chk, NOWHERE, request_, execute=True)
    assert tree(Path(chk)) == before


@pytest.mark.parametrize("method", ["write", "write_atomic"])
def test_a_local_directory_that_cannot_be_made_is_invalid_input_naming_it(
    method: str, tmp_path: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        ("/proc/nope", "/proc/nope", "No such file or directory"),
        (f"{a_file}/backups", f"{a_file}/backups", "Not a directory"),
    ]
    for location, made, why in cases:
        with pytest.raises(RecoveryError) as refused:
            getattr(Store(location), method)("set/files/offsets/0", b"x")
        assert isinstance(refused.value, InvalidInput)
        assert str(refused.value) == (
            f"{made}: cannot create the directory ({why}) to write {location}/set/files/offsets/0"
        )
    assert a_file.read_text() == ""
