"""Spark Structured Streaming checkpoint files: bytes <-> frozen values. Pure: no IO, no clock.

Files handled (see docs/checkpoint.md and the spec, ../shared/reference/spark-checkpoint-format.md):

* ``metadata``           ``{"id":"<query id>"}``                                  -> :class:`StreamMetadata`
* ``offsets/<N>``        ``v1`` / ``v2`` + metadata line + one line per source      -> :class:`OffsetLogEntry`
* ``commits/<N>``        ``v1`` / ``v2`` / ``v3`` + one JSON line                  -> :class:`CommitLogEntry`
* ``sources/<i>/0``      Kafka initial offsets: NUL + ``v1`` + LF + JSON (or 2.1.0) -> :class:`InitialOffsets`

Every parsed value keeps the exact text of what it does not interpret (version line, metadata line,
opaque source offsets, trailing newline), so ``serialize_*(parse_*(b)) == b`` for every file Spark
writes, and a rewrite changes only the Kafka offsets it was asked to change.

Every error is a :class:`~recovery.errors.CheckpointFormatError` whose one-line message starts with
the file's path and says what is wrong, e.g. ``/x/chk/offsets/17: line 3 is not JSON (column 41)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NoReturn

from recovery.core.model import JsonObject, JsonValue, TopicPartition
from recovery.errors import CheckpointFormatError

# OffsetSeqLog.VERSION_1/VERSION_2 (Spark 4.2+ reads both); CommitLog max 3 (4.2+); the Kafka
# initial-offset file (KafkaSourceInitialOffsetWriter.VERSION) is v1.
MAX_OFFSET_LOG_VERSION = 2
MAX_COMMIT_LOG_VERSION = 3
MAX_INITIAL_OFFSETS_VERSION = 1
VOID_OFFSET = "-"  # OffsetSeqLog.SERIALIZED_VOID_OFFSET
# Java long and int ranges: offsets and timestamps are Scala Longs, partition numbers Ints
# (JsonUtils.partitionOffsets reads ``Map[String, Map[Int, Long]]`` with Jackson).
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
# StreamExecution: ``val id: UUID = UUID.fromString(streamMetadata.id)``. Spark writes the canonical
# form (UUID.randomUUID().toString); the lenient spellings java.util.UUID also takes are refused.
_HEX = frozenset("0123456789abcdefABCDEF")
# topic -> partition -> TopicPartition: what the parsers share between the files of one checkpoint.
Partitions = dict[str, dict[int, TopicPartition]]


def is_uuid(text: str) -> bool:
    """The canonical 8-4-4-4-12 hex form."""
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(c in _HEX for p in parts for c in p)


class SourceKind(StrEnum):
    KAFKA = "kafka"
    DELTA = "delta"
    OPAQUE = "opaque"  # rate, file, custom sources: kept verbatim, never rewritten


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamMetadata:
    """``metadata``: the query id (``StreamMetadata(id)``), plus the exact file text."""

    query_id: str
    text: str


@dataclass(frozen=True)
class KafkaOffsets:
    """A ``KafkaSourceOffset``: next offset to read per partition, in the order of the file."""

    partitions: tuple[tuple[TopicPartition, int], ...]

    @property
    def offsets(self) -> dict[TopicPartition, int]:
        return dict(self.partitions)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tp.topic for tp, _ in self.partitions))

    def to_json(self) -> str:
        """Spelled as Spark's JsonUtils.partitionOffsets spells it: compact, partitions as strings."""
        by_topic: dict[str, dict[str, int]] = {}
        for tp, offset in self.partitions:
            by_topic.setdefault(tp.topic, {})[str(tp.partition)] = offset
        return json.dumps(by_topic, separators=(",", ":"), ensure_ascii=False)

    def with_offsets(self, changes: Mapping[TopicPartition, int | None]) -> KafkaOffsets:
        """New offsets: listed partitions get their new value in place (``None`` drops the partition);
        partitions not yet present are appended after their topic's last partition."""
        for tp, offset in changes.items():
            if tp.partition < 0:
                raise ValueError(f"{tp}: partition must be non-negative")
            if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int) or offset < 0):
                raise ValueError(f"{tp}: offset must be a non-negative integer, got {offset!r}")
        out = [(tp, changes.get(tp, off)) for tp, off in self.partitions]
        known = {tp for tp, _ in self.partitions}
        for tp, offset in sorted((tp, o) for tp, o in changes.items() if tp not in known and o is not None):
            last = max((i for i, (t, _) in enumerate(out) if t.topic == tp.topic), default=len(out) - 1)
            out.insert(last + 1, (tp, offset))
        return KafkaOffsets(tuple((tp, o) for tp, o in out if o is not None))


@dataclass(frozen=True)
class DeltaSourceOffset:
    """A Delta Lake ``DeltaSourceOffset`` line (delta-io/delta DeltaSourceOffset.scala)."""

    source_version: int
    reservoir_id: str
    reservoir_version: int
    index: int
    is_starting_version: bool


@dataclass(frozen=True)
class SourceOffset:
    """One source's offset in an ``offsets/<N>`` file.

    ``source_id`` is the source index as Spark spells it (line index in v1, the ``<id>:`` prefix in
    v2); ``text`` is the exact text after any ``<id>:`` prefix, ``None`` for ``-`` (no offset).
    """

    source_id: str
    text: str | None
    kind: SourceKind | None
    kafka: KafkaOffsets | None = None
    delta: DeltaSourceOffset | None = None

    @property
    def index(self) -> int | None:
        return int(self.source_id) if self.source_id.isdigit() else None


@dataclass(frozen=True)
class OffsetSeqMetadata:
    """Line 2 of ``offsets/<N>`` (OffsetSeqMetadata / OffsetSeqMetadataV2), as read."""

    batch_watermark_ms: int
    batch_timestamp_ms: int
    conf: tuple[tuple[str, str], ...]
    source_metadata_info: tuple[tuple[str, str], ...] | None = None  # id -> compact JSON (v2)


@dataclass(frozen=True)
class OffsetLogEntry:
    """``offsets/<N>``: the write-ahead log entry of batch ``batch_id``."""

    batch_id: int
    version: int
    metadata: OffsetSeqMetadata | None
    sources: tuple[SourceOffset, ...]
    version_text: str  # exact line 1, e.g. "v1"
    metadata_text: str  # exact line 2, copied byte for byte on rewrite
    trailing: str = ""  # "\n" if the file ends with a newline (accepted by Spark's getLines)

    def source(self, source_id: int | str) -> SourceOffset:
        key = str(source_id)
        for s in self.sources:
            if s.source_id == key:
                return s
        raise KeyError(key)

    @property
    def kafka_sources(self) -> tuple[SourceOffset, ...]:
        return tuple(s for s in self.sources if s.kind is SourceKind.KAFKA)


@dataclass(frozen=True)
class CommitLogEntry:
    """``commits/<N>``: batch ``batch_id`` completed (CommitMetadata v1/v2/v3)."""

    batch_id: int
    version: int
    next_batch_watermark_ms: int
    state_unique_ids: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] | None
    sink_metadata: tuple[tuple[str, str], ...] | None  # v3 sinkMetadataMap: id -> compact JSON
    version_text: str
    json_text: str | None  # None when the file has no second line (Spark reads "{}")
    trailing: str = ""


@dataclass(frozen=True)
class InitialOffsets:
    """``sources/<i>/0`` of a Kafka source (KafkaSourceInitialOffsetWriter).

    ``lead_byte`` is the byte Spark skips (0 since 2.1.1; the JSON length in 2.1.0's form);
    ``version_text`` is ``"v1"``, or ``None`` in 2.1.0's form (JSON right after the lead byte).
    """

    lead_byte: int
    version_text: str | None
    json_text: str
    kafka: KafkaOffsets


# -- helpers ---------------------------------------------------------------------------------------


def _fail(path: str, what: str) -> CheckpointFormatError:
    return CheckpointFormatError(f"{path}: {what}")


def _decode(data: bytes, path: str, *, base: int = 0) -> str:
    """UTF-8 text without NUL bytes; ``base`` = where ``data`` starts in the file (for messages)."""
    if not data:
        raise _fail(path, "empty file (truncated write?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise _fail(path, f"not UTF-8 (byte 0x{bad:02x} at offset {base + exc.start})") from None
    nul = text.find("\x00")
    if nul >= 0:
        raise _fail(path, f"NUL byte at offset {base + len(text[:nul].encode())} where none belongs")
    return text


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _no_duplicates(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    out = dict(pairs)  # one C call; the key-by-key search only when the sizes say a key repeats
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return out


def _json(text: str, path: str, where: str) -> JsonValue:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"{where} is not JSON (column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise _fail(path, f"{where} is not valid JSON ({exc})") from None


def _compact(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_int(value: JsonValue) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_long(value: JsonValue) -> bool:
    return _is_int(value) and LONG_MIN <= value <= LONG_MAX


def _version(line: str, path: str, maximum: int, *, trim: bool) -> int:
    """MetadataVersionUtil.validateVersion: ``v<positive int>`` up to ``maximum``."""
    text = line.strip() if trim else line
    digits = text[1:]
    if not text.startswith("v") or not digits.isascii() or not digits.isdigit() or int(digits) <= 0:
        raise _fail(path, f"line 1 is not a log version (expected v1..v{maximum}, got {text[:20]!r})")
    version = int(digits)
    if version > maximum:
        raise _fail(path, f"unsupported log version v{version} (this tool reads up to v{maximum})")
    return version


def _respell(old_text: str, new_json: str) -> str:
    """Replace the JSON inside ``old_text`` keeping its surrounding whitespace (e.g. a trailing ``\\r``)."""
    core = old_text.strip()
    start = old_text.find(core) if core else 0
    return old_text[:start] + new_json + old_text[start + len(core) :]


# -- Kafka / Delta / opaque source offsets -----------------------------------------------------------


# Partition keys joined by commas: one regex match per topic instead of a Python call per partition
# (a checkpoint can hold 100,000 partitions and more).
_PARTITION_KEYS = re.compile(r"-?[0-9]+(?:,-?[0-9]+)*")


def _looks_like_kafka(value: JsonValue) -> bool:
    # {"topic":{"0":n,...},...}: JsonUtils.partitionOffsets. An empty map ({}) cannot be told apart
    # from other sources and stays opaque.
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(parts, dict) and parts and _partition_keys(parts) for parts in value.values())
    )


def _partition_keys(parts: JsonObject) -> bool:
    """Every key ``-?[0-9]+`` (a key holding a comma would add a comma: the count catches it)."""
    joined = ",".join(parts)
    return joined.count(",") == len(parts) - 1 and _PARTITION_KEYS.fullmatch(joined) is not None


def _kafka_from_value(
    value: dict[str, JsonObject], path: str, where: str, known: Partitions | None = None
) -> KafkaOffsets:
    # KafkaSourceOffset(str) = JsonUtils.partitionOffsets: Jackson reads Map[String, Map[Int, Long]]
    # (connector/kafka-0-10-sql/.../JsonUtils.scala). Spark only ever writes concrete positions
    # (KafkaOffsetReaderAdmin resolves -1/-2 before anything is logged), so an offset must be a JSON
    # integer in [0, 2^63); Jackson's coercions of floats or strings are not accepted here.
    out: list[tuple[TopicPartition, int]] = []
    for topic, parts in value.items():
        numbers = _plain_numbers(parts)
        if numbers is not None:  # the common case, checked in bulk (C loops, no per-item calls)
            out.extend(zip(_topic_partitions(topic, numbers, known), parts.values(), strict=True))
            continue
        for key, offset in parts.items():  # something is wrong: find it and name it
            if int(key) > INT_MAX:
                raise _fail(path, f"{where}: partition {key} of {topic!r} is out of range (> 2^31-1)")
            tp = TopicPartition(topic, int(key))
            if tp.partition < 0:
                raise _fail(path, f"{where}: negative partition number in {tp}")
            if not _is_int(offset):
                raise _fail(path, f"{where}: offset of {tp} is not an integer ({_compact(offset)[:40]})")
            if offset < 0:
                raise _fail(path, f"{where}: offset of {tp} is negative ({offset})")
            if offset > LONG_MAX:
                raise _fail(path, f"{where}: offset of {tp} is out of range (>= 2^63)")
            out.append((tp, offset))
    return KafkaOffsets(tuple(out))


def _plain_numbers(parts: JsonObject) -> list[int] | None:
    """The partition numbers when every key is one in [0, 2^31) and every offset a JSON integer in
    [0, 2^63); else None (the caller then finds what is wrong, partition by partition)."""
    offsets = parts.values()
    if not parts or not all(type(o) is int for o in offsets):  # bool is not int here: type() is exact
        return None
    numbers = list(map(int, parts))
    plain = min(numbers) >= 0 and max(numbers) <= INT_MAX and min(offsets) >= 0 and max(offsets) <= LONG_MAX
    return numbers if plain else None


def _topic_partitions(topic: str, numbers: list[int], known: Partitions | None) -> list[TopicPartition]:
    """``TopicPartition(topic, n)`` for each number, shared with earlier files through ``known``: a
    checkpoint's files name the same partitions, and 100,000 of them cost time and memory once."""
    if known is None:
        return list(map(TopicPartition, [topic] * len(numbers), numbers))
    table = known.setdefault(topic, {})
    found = list(map(table.get, numbers))
    if not all(found):  # C loop: a TopicPartition is always true
        for i, tp in enumerate(found):
            if tp is None:
                found[i] = table[numbers[i]] = TopicPartition(topic, numbers[i])
    return found  # type: ignore[return-value]  # no None left


def parse_kafka_offsets(
    text: str, *, path: str = "<kafka offsets>", where: str = "offsets", known: Partitions | None = None
) -> KafkaOffsets:
    """Parse ``{"topic":{"partition":offset}}`` (any key order, whitespace tolerated); ``known``
    (optional, filled in) shares TopicPartition values between the files of one checkpoint."""
    value = _json(text.strip(), path, where)
    if not _looks_like_kafka(value):
        raise _fail(path, f'{where} is not a Kafka offset map ({{"topic":{{"partition":offset}}}})')
    return _kafka_from_value(value, path, where, known)


_DELTA_FIELDS: dict[str, Callable[[JsonValue], bool]] = {
    "sourceVersion": _is_long,
    "reservoirId": lambda v: isinstance(v, str),
    "reservoirVersion": _is_long,
    "index": _is_long,
    "isStartingVersion": lambda v: isinstance(v, bool),
}


def _delta_from_value(value: JsonObject, path: str, where: str) -> DeltaSourceOffset:
    for field, ok in _DELTA_FIELDS.items():
        if field not in value or not ok(value[field]):
            raise _fail(path, f"{where}: Delta source offset has a missing or bad {field!r}")
    return DeltaSourceOffset(
        source_version=value["sourceVersion"],
        reservoir_id=value["reservoirId"],
        reservoir_version=value["reservoirVersion"],
        index=value["index"],
        is_starting_version=value["isStartingVersion"],
    )


def parse_source_offset(
    source_id: str, text: str | None, *, path: str, where: str, known: Partitions | None = None
) -> SourceOffset:
    """Classify and parse one source's offset text (``None`` = no offset, ``-`` in the file)."""
    if text is None:
        return SourceOffset(source_id, None, None)
    stripped = text.strip()
    if not stripped:
        raise _fail(path, f"{where} is empty")
    # Offset.json() is JSON by contract for every source (rate: a number, file: {"logOffset":n}).
    value = _json(stripped, path, where)
    if _looks_like_kafka(value):
        return SourceOffset(
            source_id, text, SourceKind.KAFKA, kafka=_kafka_from_value(value, path, where, known)
        )
    if isinstance(value, dict) and "reservoirId" in value and "reservoirVersion" in value:
        return SourceOffset(source_id, text, SourceKind.DELTA, delta=_delta_from_value(value, path, where))
    return SourceOffset(source_id, text, SourceKind.OPAQUE)


# -- metadata ----------------------------------------------------------------------------------------


def parse_stream_metadata(data: bytes, *, path: str = "metadata") -> StreamMetadata:
    """StreamMetadata.read: json4s ``Serialization.read[StreamMetadata]`` (field ``id``: a string,
    other fields ignored), then StreamExecution's ``UUID.fromString(streamMetadata.id)``."""
    text = _decode(data, path)
    value = _json(text.strip(), path, "the file")
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not value["id"]:
        raise _fail(path, 'expected {"id":"<query id>"}')
    if not is_uuid(value["id"]):
        raise _fail(path, f'field "id": not a UUID ({value["id"][:40]!r})')
    return StreamMetadata(value["id"], text)


def serialize_stream_metadata(metadata: StreamMetadata) -> bytes:
    return metadata.text.encode("utf-8")


def stream_metadata(query_id: str) -> StreamMetadata:
    """The value Spark writes for a new query (json4s ``Serialization.write``)."""
    return StreamMetadata(query_id, _compact({"id": query_id}))


# -- offsets/<N> -------------------------------------------------------------------------------------


def _split_lines(text: str) -> tuple[list[str], str]:
    """Split at LF like scala.io.Source.getLines; one trailing newline adds no line."""
    trailing = "\n" if text.endswith("\n") else ""
    body = text[:-1] if trailing else text
    return body.split("\n"), trailing


def _parse_offset_metadata(text: str, path: str) -> OffsetSeqMetadata | None:
    stripped = text.strip()
    if not stripped:
        return None
    value = _json(stripped, path, "line 2")
    if not isinstance(value, dict):
        raise _fail(path, "line 2 (batch metadata) is not a JSON object")
    for key in ("batchWatermarkMs", "batchTimestampMs"):
        if key in value and not _is_long(value[key]):
            raise _fail(path, f"line 2: {key} is not an integer in the range of a long")
    conf = value.get("conf", {})
    if not isinstance(conf, dict) or not all(isinstance(v, str) for v in conf.values()):
        raise _fail(path, "line 2: conf is not a map of strings")
    info = value.get("sourceMetadataInfo")
    if info is not None and not isinstance(info, dict):
        raise _fail(path, "line 2: sourceMetadataInfo is not a JSON object")
    return OffsetSeqMetadata(
        batch_watermark_ms=value.get("batchWatermarkMs", 0),
        batch_timestamp_ms=value.get("batchTimestampMs", 0),
        conf=tuple(conf.items()),
        source_metadata_info=None if info is None else tuple((k, _compact(v)) for k, v in info.items()),
    )


def parse_offset_log(
    data: bytes, *, batch_id: int, path: str = "offsets", known: Partitions | None = None
) -> OffsetLogEntry:
    """Parse ``offsets/<batch_id>`` (OffsetSeqLog.deserialize, v1 and v2): an empty file is
    "Incomplete log file", the version line is validated untrimmed, line 2 is the metadata
    (``lines.next()``: a missing one fails), every further line one source's offset or ``-``.
    Spark then asserts the number of sources equals the query's; every query has one at least."""
    text = _decode(data, path)
    lines, trailing = _split_lines(text)
    version = _version(lines[0], path, MAX_OFFSET_LOG_VERSION, trim=False)
    if len(lines) < 2:
        raise _fail(path, "truncated: no batch metadata line after the version line")
    metadata = _parse_offset_metadata(lines[1], path)
    if version == 2 and metadata is None:
        raise _fail(path, "v2 offset log requires a batch metadata line")
    sources: list[SourceOffset] = []
    for number, line in enumerate(lines[2:], start=3):
        where = f"line {number}"
        if version == 1:
            source_id, raw = str(number - 3), line
        else:
            source_id, sep, raw = line.partition(":")
            if not sep or not source_id.strip():
                raise _fail(path, f"{where} is not <sourceId>:<offset>")
            if any(s.source_id == source_id for s in sources):
                raise _fail(path, f"{where}: source id {source_id!r} appears twice")
        if not raw.strip():
            raise _fail(path, f"{where} is empty")
        offset_text = None if raw.strip() == VOID_OFFSET else raw
        # v2 lines come in Scala Map order, not sorted: the file's order is kept.
        sources.append(parse_source_offset(source_id, offset_text, path=path, where=where, known=known))
    if not sources:
        raise _fail(path, "line 3: missing (no source offsets; truncated?)")
    return OffsetLogEntry(
        batch_id=batch_id,
        version=version,
        metadata=metadata,
        sources=tuple(sources),
        version_text=lines[0],
        metadata_text=lines[1],
        trailing=trailing,
    )


def serialize_offset_log(entry: OffsetLogEntry) -> bytes:
    """The bytes of ``offsets/<N>`` (OffsetSeqLog.serialize), keeping every unchanged byte."""
    parts = [entry.version_text, "\n", entry.metadata_text]
    for source in entry.sources:
        parts.append("\n")
        if entry.version >= 2:
            parts.append(f"{source.source_id}:")
        parts.append(VOID_OFFSET if source.text is None else source.text)
    parts.append(entry.trailing)
    return "".join(parts).encode("utf-8")


def with_kafka_offsets(
    entry: OffsetLogEntry, source_id: int | str, changes: Mapping[TopicPartition, int | None]
) -> OffsetLogEntry:
    """``entry`` with new offsets for some partitions of one Kafka source; nothing else changes."""
    key = str(source_id)
    sources = list(entry.sources)
    for i, source in enumerate(sources):
        if source.source_id == key:
            if source.kind is not SourceKind.KAFKA or source.kafka is None or source.text is None:
                raise ValueError(f"batch {entry.batch_id}: source {key} is not a Kafka source")
            kafka = source.kafka.with_offsets(changes)
            sources[i] = replace(source, text=_respell(source.text, kafka.to_json()), kafka=kafka)
            return replace(entry, sources=tuple(sources))
    raise ValueError(f"batch {entry.batch_id}: no source {key}")


# -- commits/<N> -------------------------------------------------------------------------------------


def _parse_state_ids(value: JsonValue, path: str) -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]:
    bad = _fail(path, "line 2: stateUniqueIds is not a map of operator id -> [[id, ...], ...]")
    if not isinstance(value, dict):
        raise bad
    out = []
    for op, partitions in value.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, list) and all(isinstance(i, str) for i in p) for p in partitions
        ):
            raise bad
        out.append((op, tuple(tuple(p) for p in partitions)))
    return tuple(out)


def parse_commit_log(data: bytes, *, batch_id: int, path: str = "commits") -> CommitLogEntry:
    """Parse ``commits/<batch_id>`` (CommitLog.deserialize: v1, v2 with stateUniqueIds, v3 with sinks)."""
    text = _decode(data, path)
    lines, trailing = _split_lines(text)
    version = _version(lines[0], path, MAX_COMMIT_LOG_VERSION, trim=True)
    if len(lines) > 2:
        raise _fail(path, f"unexpected line 3 (a commit file has 2 lines, this one has {len(lines)})")
    json_text = lines[1] if len(lines) == 2 else None
    value = _json(json_text.strip() or "{}", path, "line 2") if json_text is not None else {}
    if not isinstance(value, dict):
        raise _fail(path, "line 2 is not a JSON object")
    watermark = value.get("nextBatchWatermarkMs", 0)
    if not _is_long(watermark):
        raise _fail(path, "line 2: nextBatchWatermarkMs is not an integer in the range of a long")
    ids = value.get("stateUniqueIds")
    sinks = value.get("sinkMetadataMap")
    if sinks is not None and not isinstance(sinks, dict):
        raise _fail(path, "line 2: sinkMetadataMap is not a JSON object")
    if version == 3 and not sinks:
        raise _fail(path, "v3 commit log requires a non-empty sinkMetadataMap")
    return CommitLogEntry(
        batch_id=batch_id,
        version=version,
        next_batch_watermark_ms=watermark,
        state_unique_ids=None if ids is None else _parse_state_ids(ids, path),
        sink_metadata=None if sinks is None else tuple((k, _compact(v)) for k, v in sinks.items()),
        version_text=lines[0],
        json_text=json_text,
        trailing=trailing,
    )


def serialize_commit_log(entry: CommitLogEntry) -> bytes:
    text = entry.version_text + ("" if entry.json_text is None else "\n" + entry.json_text) + entry.trailing
    return text.encode("utf-8")


# -- sources/<i>/0 (Kafka initial offsets) ------------------------------------------------------------


def is_kafka_initial_offsets(data: bytes) -> bool:
    """True if ``data`` reads as a Kafka ``sources/<i>/0`` file (other sources write their own formats)."""
    if not data:
        return False
    if data[0] == 0:
        return True
    try:
        parse_initial_offsets(data)
    except CheckpointFormatError:
        return False
    return True


def parse_initial_offsets(
    data: bytes, *, path: str = "sources/0/0", known: Partitions | None = None
) -> InitialOffsets:
    """Parse a Kafka initial-offset file the way KafkaSourceInitialOffsetWriter.deserialize does:
    skip the first byte; ``v1`` + LF + JSON, or (Spark 2.1.0) the JSON itself."""
    if not data:
        raise _fail(path, "empty file (truncated write?)")
    if len(data) == 1:
        raise _fail(path, "truncated: nothing after the leading byte")
    lead = data[0]
    content = _decode(data[1:], path, base=1)
    if content.startswith("v"):
        newline = content.find("\n")
        if newline <= 0:
            raise _fail(path, "truncated: no line break after the version")
        version_text: str | None = content[:newline]
        _version(content[:newline], path, MAX_INITIAL_OFFSETS_VERSION, trim=False)
        json_text = content[newline + 1 :]
    else:
        version_text, json_text = None, content
    kafka = parse_kafka_offsets(json_text, path=path, where="initial offsets", known=known)
    return InitialOffsets(lead, version_text, json_text, kafka)


def serialize_initial_offsets(initial: InitialOffsets) -> bytes:
    head = "" if initial.version_text is None else initial.version_text + "\n"
    return bytes([initial.lead_byte]) + (head + initial.json_text).encode("utf-8")


def initial_offsets(kafka: KafkaOffsets) -> InitialOffsets:
    """The value Spark (2.1.1+) writes: NUL, ``v1``, LF, compact JSON."""
    return InitialOffsets(0, "v1", kafka.to_json(), kafka)


def with_initial_kafka_offsets(
    initial: InitialOffsets, changes: Mapping[TopicPartition, int | None]
) -> InitialOffsets:
    kafka = initial.kafka.with_offsets(changes)
    return replace(initial, json_text=_respell(initial.json_text, kafka.to_json()), kafka=kafka)


def is_batch_file_name(name: str) -> bool:
    """HDFSMetadataLog: a batch file is one whose whole name parses as a long (so ``.0.crc`` is not,
    and neither is a number too large for a long: ``Try(path.getName.toLong).isSuccess``)."""
    return name.isascii() and name.isdigit() and int(name) <= LONG_MAX


# -- Delta source offsets (added for recovery.delta) ---------------------------------------------------


def delta_offset_json(offset: DeltaSourceOffset) -> str:
    """Spelled as Delta's DeltaSourceOffsetForSerialization: compact, fields in declaration order."""
    return _compact(
        {
            "sourceVersion": offset.source_version,
            "reservoirId": offset.reservoir_id,
            "reservoirVersion": offset.reservoir_version,
            "index": offset.index,
            "isStartingVersion": offset.is_starting_version,
        }
    )


def with_delta_offset(
    entry: OffsetLogEntry, source_id: int | str, offset: DeltaSourceOffset
) -> OffsetLogEntry:
    """``entry`` with a new offset for one Delta source; every other line stays byte-identical."""
    key = str(source_id)
    sources = list(entry.sources)
    for i, source in enumerate(sources):
        if source.source_id == key:
            if source.kind is not SourceKind.DELTA or source.text is None:
                raise ValueError(f"batch {entry.batch_id}: source {key} is not a Delta source")
            text = _respell(source.text, delta_offset_json(offset))
            sources[i] = replace(source, text=text, delta=offset)
            return replace(entry, sources=tuple(sources))
    raise ValueError(f"batch {entry.batch_id}: no source {key}")
