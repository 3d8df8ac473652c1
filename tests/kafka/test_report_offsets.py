"""Rows and lines of offsets, read-to-end and group show|set (``recovery.cli.report.offsets``; pure)."""

from __future__ import annotations

import json

from recovery.cli.report.offsets import (
    OFFSETS_JSON_KEYS,
    group_set_note,
    group_set_rows,
    group_show_notes,
    group_show_rows,
    offset_rows,
    read_rows,
    record_line,
    record_lines,
)
from recovery.core.model import NoMatch, OffsetRange, TopicPartition
from recovery.core.specs import TimeKind, TimeSpec, iso_utc
from recovery.kafka.group_values import GroupChange, GroupOffsets, group_report
from recovery.kafka.values import (
    ConsumedRecord,
    MissingPartition,
    MissingReason,
    OffsetRow,
    OffsetTable,
    PartitionOffsets,
    PartitionRead,
    RecordChunk,
    TimeLookup,
)

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
T = 1_795_327_200_000
AT_T = TimeSpec(TimeKind.TIMESTAMP, T)


def table() -> OffsetTable:
    found = OffsetRow(PartitionOffsets(TP0, 0, 9, 9, "id"), TimeLookup(TP0, AT_T, 9, None, NoMatch.LATEST))
    return OffsetTable(AT_T, {TP0: found, TP1: MissingPartition(TP1, MissingReason.PARTITION_GONE)})


def test_offset_rows_have_the_documented_keys_in_order() -> None:
    rows = offset_rows(table(), "json")

    assert [list(row) for row in rows] == [list(OFFSETS_JSON_KEYS)] * 2
    assert rows[0] == {
        "topic": "orders",
        "partition": 0,
        "topic_id": "id",
        "status": "OK",
        "log_start_offset": 0,
        "high_watermark": 9,
        "last_stable_offset": 9,
        "time": str(T),
        "offset": 9,
        "timestamp": None,
        "no_match": "latest",
    }
    assert rows[1] == {
        **dict.fromkeys(OFFSETS_JSON_KEYS),
        "topic": "orders",
        "partition": 1,
        "status": "PARTITION_GONE",
    }


def test_offset_table_rows_say_why_in_the_note() -> None:
    rows = offset_rows(table(), "table")

    assert rows[0]["note"] == f"no record at or after {iso_utc(T)}: latest"
    assert rows[1]["note"] == "PARTITION_GONE"
    assert table().exit_code == 1


def test_read_rows_flatten_gaps_for_csv_and_table() -> None:
    read = PartitionRead(TP0, 0, 60, 40, T, T + 5, (OffsetRange(3, 23),))

    (as_json,) = read_rows([read], "json")
    (as_csv,) = read_rows([read], "csv")
    (as_table,) = read_rows([read], "table")

    assert as_json["gaps"] == [[3, 23]] and as_json["skipped_offsets"] == 20
    assert as_csv["gaps"] == "3-23"
    assert as_table["gaps_text"] == "[3, 23)"
    assert as_table["min_timestamp_iso"] == iso_utc(T)


def test_record_lines_are_utf8_or_all_base64() -> None:
    text = ConsumedRecord(TP0, 7, T, b"k", b"v", (("h", b"x"),))
    binary = ConsumedRecord(TP0, 8, None, b"k", b"\xff", ())

    assert json.loads(record_line(text)) == {
        "topic": "orders",
        "partition": 0,
        "offset": 7,
        "timestamp": T,
        "key": "k",
        "value": "v",
        "headers": [["h", "x"]],
        "encoding": "utf-8",
    }
    assert json.loads(record_line(binary))["key"] == "aw=="
    assert json.loads(record_line(binary))["encoding"] == "base64"


def test_record_lines_of_a_chunk_are_the_record_lines_of_its_records() -> None:
    """The column-wise writer (read-to-end --records) writes exactly what record_line writes."""
    odd = TopicPartition('or"dérs', 2)
    chunks = [
        RecordChunk(TP0, [0, 1], [T, T + 1], [None, None], [b"v0", b"v1"], [None, None]),
        RecordChunk(TP0, [5, 6], [T, -1], [b"k", b'"q"\n'], [None, "ü\u2028".encode()], [[], [("h", None)]]),
        RecordChunk(
            odd,
            [7, 8, 9],
            [-1, T, T],
            [b"k", b"\xff", None],
            [b"\x00", b"v", b"w"],
            [None, [("h", b"x")], [("h\u00e9", b"\xfe")]],
        ),
        RecordChunk(TP0, [], [], [], [], []),
    ]

    for chunk in chunks:
        assert record_lines(chunk) == "".join(record_line(r) for r in chunk.records())
    assert [json.loads(line)["encoding"] for line in record_lines(chunks[2]).splitlines()] == [
        "utf-8",
        "base64",
        "base64",
    ]


def test_group_show_rows_and_notes() -> None:
    now = GroupOffsets("billing", "Empty", 0, {TP0: 4}, retention_minutes=10080)
    report = group_report(
        now,
        {TP0: PartitionOffsets(TP0, 5, 9, None, "id"), TP1: PartitionOffsets(TP1, 0, 3, None, "id")},
        [TP1],
    )

    assert group_show_rows(report) == [
        {"topic": "orders", "partition": 0, "committed_offset": 4, "log_start_offset": 5,
         "high_watermark": 9, "lag": 5, "status": "BELOW_LOG_START"},
        {"topic": "orders", "partition": 1, "committed_offset": None, "log_start_offset": 0,
         "high_watermark": 3, "lag": None, "status": "EXPIRED"},
    ]  # fmt: skip
    assert group_show_notes(report) == [
        "group billing is Empty with 0 member(s); offsets of an Empty group expire after 10080 minutes "
        "(offsets.retention.minutes, KIP-211)",
        "1 offset(s) of the earlier export are gone from the group: orders [1]",
    ]


def test_group_set_rows_and_note() -> None:
    change = GroupChange(GroupOffsets("billing", "Empty", 0, {TP0: 1}), {TP0: 3, TP1: 0}, executed=False)

    assert group_set_rows(change) == [
        {"topic": "orders", "partition": 0, "current_offset": 1, "new_offset": 3},
        {"topic": "orders", "partition": 1, "current_offset": None, "new_offset": 0},
    ]
    assert group_set_note(change).startswith("dry run: nothing was written")
