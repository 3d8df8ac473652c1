"""Values -> rows and ``%`` lines for ``offsets``, ``read-to-end`` and ``group show|set`` (pure).

Rows are dicts whose keys are the documented JSON keys (the CSV columns too); ``fmt="table"`` adds
the display-only keys the table columns name (ISO timestamps, a NOTE), and CSV flattens lists.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from json.encoder import encode_basestring  # what json.dumps(ensure_ascii=False) uses for str
from typing import TYPE_CHECKING

from recovery.core.model import JsonObject
from recovery.core.specs import iso_utc
from recovery.kafka.values import (
    ConsumedRecord,
    Headers,
    MissingPartition,
    OffsetRow,
    OffsetTable,
    PartitionRead,
    RecordChunk,
)

if TYPE_CHECKING:  # annotations only: offsets and read-to-end need not import the group values
    from recovery.kafka.group_values import GroupChange, GroupPartition, GroupReport

Columns = tuple[tuple[str, str], ...]

# -- offsets --------------------------------------------------------------------------------------

OFFSETS_JSON_KEYS = (
    "topic",
    "partition",
    "topic_id",
    "status",
    "log_start_offset",
    "high_watermark",
    "last_stable_offset",
    "time",
    "offset",
    "timestamp",
    "no_match",
)

OFFSETS_COLUMNS: Columns = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("log_start_offset", "LOG-START"),
    ("high_watermark", "HIGH-WATERMARK"),
    ("last_stable_offset", "LAST-STABLE"),
    ("offset", "OFFSET"),
    ("timestamp_iso", "TIMESTAMP"),
    ("note", "NOTE"),
)


def _iso(ms: int | None) -> str:
    return "" if ms is None else iso_utc(ms)


def offset_record(row: OffsetRow | MissingPartition) -> JsonObject:
    """One partition of ``offsets`` with the documented JSON keys."""
    if isinstance(row, MissingPartition):
        return {
            **dict.fromkeys(OFFSETS_JSON_KEYS),
            "topic": row.tp.topic,
            "partition": row.tp.partition,
            "status": row.reason.value,
        }
    offsets, lookup = row.offsets, row.lookup
    return {
        "topic": offsets.tp.topic,
        "partition": offsets.tp.partition,
        "topic_id": offsets.topic_id,
        "status": "OK",
        "log_start_offset": offsets.log_start,
        "high_watermark": offsets.high_watermark,
        "last_stable_offset": offsets.last_stable,
        "time": str(lookup.time),
        "offset": lookup.offset,
        "timestamp": lookup.timestamp_ms,
        "no_match": lookup.no_match.value if lookup.no_match else None,
    }


def offset_note(record: JsonObject) -> str:
    """The table's NOTE: why a partition is missing, or which --no-match policy gave its offset."""
    if record["status"] != "OK":
        return str(record["status"])
    if not record["no_match"]:
        return ""
    moment = str(record["time"])
    if moment.isdigit():
        moment = iso_utc(int(moment))
    return f"no record at or after {moment}: {record['no_match']}"


def offset_rows(table: OffsetTable, fmt: str) -> list[JsonObject]:
    """The rows of ``offsets``, sorted by topic and partition."""
    records = [offset_record(row) for row in table.rows.values()]
    if fmt != "table":
        return records
    return [{**r, "timestamp_iso": _iso(r["timestamp"]), "note": offset_note(r)} for r in records]


# -- read-to-end ------------------------------------------------------------------------------------

READ_COLUMNS: Columns = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("start_offset", "START"),
    ("end_offset", "END"),
    ("records", "RECORDS"),
    ("min_timestamp_iso", "FIRST-TIMESTAMP"),
    ("max_timestamp_iso", "LAST-TIMESTAMP"),
    ("gaps_text", "DELETED-WHILE-READING"),
)


def read_record(read: PartitionRead) -> JsonObject:
    """One partition of ``read-to-end`` with the documented JSON keys."""
    return {
        "topic": read.tp.topic,
        "partition": read.tp.partition,
        "start_offset": read.start,
        "end_offset": read.end,
        "records": read.records,
        "min_timestamp": read.min_timestamp_ms,
        "max_timestamp": read.max_timestamp_ms,
        "skipped_offsets": read.skipped_offsets,
        "gaps": [[gap.start, gap.end] for gap in read.gaps],
    }


def read_rows(reads: Iterable[PartitionRead], fmt: str) -> list[JsonObject]:
    """The summary rows of ``read-to-end``; CSV writes gaps as ``start-end;...``."""
    records = [read_record(read) for read in reads]
    if fmt == "table":
        return [
            {
                **r,
                "min_timestamp_iso": _iso(r["min_timestamp"]),
                "max_timestamp_iso": _iso(r["max_timestamp"]),
                "gaps_text": " ".join(f"[{a}, {b})" for a, b in r["gaps"]),
            }
            for r in records
        ]
    if fmt == "csv":
        return [{**r, "gaps": ";".join(f"{a}-{b}" for a, b in r["gaps"])} for r in records]
    return records


def record_line(record: ConsumedRecord) -> str:
    """A record as one JSON line (``--records FILE``): UTF-8 text, or base64 for every field when
    the key, the value or a header value is not UTF-8 (``"encoding"`` says which)."""
    parts = [record.key, record.value, *(v for _, v in record.headers)]
    encoding = "utf-8" if all(_is_utf8(part) for part in parts) else "base64"

    def text(raw: bytes | None) -> str | None:
        if raw is None:
            return None
        return raw.decode("utf-8") if encoding == "utf-8" else base64.b64encode(raw).decode("ascii")

    line = {
        "topic": record.tp.topic,
        "partition": record.tp.partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "key": text(record.key),
        "value": text(record.value),
        "headers": [[name, text(value)] for name, value in record.headers],
        "encoding": encoding,
    }
    return json.dumps(line, ensure_ascii=False) + "\n"


def record_lines(chunk: RecordChunk) -> str:
    """The chunk's records as JSON lines, exactly as :func:`record_line` writes each one, built
    column by column without a dict per record (``read-to-end --records`` writes millions)."""
    head = f'{{"topic": {encode_basestring(chunk.tp.topic)}, "partition": {chunk.tp.partition}, "offset": '
    try:
        keys, values = _utf8_column(chunk.keys), _utf8_column(chunk.values)
        headers = _headers_column(chunk.headers)
    except UnicodeDecodeError:
        return _record_lines_one_by_one(head, chunk)
    stamps: Iterable[int | str] = chunk.timestamps
    if chunk.timestamps and min(chunk.timestamps) < 0:
        stamps = [ts if ts >= 0 else "null" for ts in chunk.timestamps]
    return "".join(
        [
            f'{head}{offset}, "timestamp": {ts}, "key": {key}, "value": {value}, "headers": {hdrs}, '
            '"encoding": "utf-8"}\n'
            for offset, ts, key, value, hdrs in zip(chunk.offsets, stamps, keys, values, headers, strict=True)
        ]
    )


def _utf8_column(raws: Sequence[bytes | None]) -> Sequence[str]:
    """JSON texts of UTF-8 byte strings (``null`` for None); UnicodeDecodeError if one is not UTF-8."""
    if None not in raws:
        return list(map(encode_basestring, map(bytes.decode, raws)))  # type: ignore[arg-type]
    return [_utf8_json(raw) for raw in raws]


def _headers_column(column: Sequence[Headers]) -> Sequence[str]:
    if not any(column):
        return ["[]"] * len(column)
    return [
        "[" + ", ".join(f"[{encode_basestring(name)}, {_utf8_json(raw)}]" for name, raw in hdrs or ()) + "]"
        for hdrs in column
    ]


def _record_lines_one_by_one(head: str, chunk: RecordChunk) -> str:
    """Records of a chunk with some field that is not UTF-8: each record's encoding decided alone."""
    lines = []
    for offset, ts, key, value, headers in zip(
        chunk.offsets, chunk.timestamps, chunk.keys, chunk.values, chunk.headers, strict=True
    ):
        try:
            fields, encoding = _json_fields(key, value, headers, _utf8_json), "utf-8"
        except UnicodeDecodeError:
            fields, encoding = _json_fields(key, value, headers, _base64_json), "base64"
        stamp = ts if ts >= 0 else "null"
        lines.append(f'{head}{offset}, "timestamp": {stamp}, {fields}, "encoding": "{encoding}"}}\n')
    return "".join(lines)


def _utf8_json(raw: bytes | None) -> str:
    return "null" if raw is None else encode_basestring(raw.decode("utf-8"))


def _base64_json(raw: bytes | None) -> str:
    return "null" if raw is None else f'"{base64.b64encode(raw).decode("ascii")}"'


def _json_fields(
    key: bytes | None, value: bytes | None, headers: Headers, text: Callable[[bytes | None], str]
) -> str:
    listed = ", ".join(f"[{encode_basestring(name)}, {text(raw)}]" for name, raw in headers or ())
    return f'"key": {text(key)}, "value": {text(value)}, "headers": [{listed}]'


def _is_utf8(raw: bytes | None) -> bool:
    if raw is None:
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- group show | set -------------------------------------------------------------------------------

GROUP_SHOW_COLUMNS: Columns = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("committed_offset", "COMMITTED"),
    ("log_start_offset", "LOG-START"),
    ("high_watermark", "HIGH-WATERMARK"),
    ("lag", "LAG"),
    ("status", "STATUS"),
)

GROUP_SET_COLUMNS: Columns = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("current_offset", "CURRENT"),
    ("new_offset", "NEW"),
)


def group_partition_record(part: GroupPartition) -> JsonObject:
    """One partition of ``group show`` with the documented JSON keys."""
    available = None if isinstance(part.available, MissingPartition) else part.available
    return {
        "topic": part.tp.topic,
        "partition": part.tp.partition,
        "committed_offset": part.committed,
        "log_start_offset": available.log_start if available else None,
        "high_watermark": available.high_watermark if available else None,
        "lag": part.lag,
        "status": part.status,
    }


def group_show_rows(report: GroupReport) -> list[JsonObject]:
    return [group_partition_record(part) for part in report.partitions]


def group_show_notes(report: GroupReport) -> list[str]:
    """The ``%`` lines of ``group show``: the group's state (and offset retention), expired offsets."""
    group = report.group
    retention = (
        f"; offsets of an Empty group expire after {group.retention_minutes} minutes "
        "(offsets.retention.minutes, KIP-211)"
        if group.retention_minutes is not None
        else ""
    )
    notes = [f"group {group.group} is {group.state} with {group.members} member(s){retention}"]
    if not report.partitions:
        # OffsetFetch leaves out, without an error, the topics the principal may not Describe.
        notes.append(
            "no committed offsets: the group has none, or none of a topic these client settings may "
            "Describe (Kafka leaves those out of the answer without an error)"
        )
    if report.expired:
        notes.append(
            f"{len(report.expired)} offset(s) of the earlier export are gone from the group: "
            + ", ".join(str(tp) for tp in report.expired[:5])
        )
    return notes


def group_set_rows(change: GroupChange) -> list[JsonObject]:
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": change.before.offsets.get(tp),
            "new_offset": offset,
        }
        for tp, offset in sorted(change.offsets.items())
    ]


def group_set_note(change: GroupChange) -> str:
    if change.executed:
        return f"wrote {len(change.offsets)} offset(s) to group {change.before.group}"
    return "dry run: nothing was written; add --execute to write these offsets"
