"""``recovery.checkpoint.format``: bytes <-> values, as Spark writes and reads them (spec §1-§4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recovery.checkpoint import format as fmt
from recovery.checkpoint.format import (
    DeltaSourceOffset,
    KafkaOffsets,
    SourceKind,
    parse_commit_log,
    parse_initial_offsets,
    parse_kafka_offsets,
    parse_offset_log,
    parse_stream_metadata,
    serialize_commit_log,
    serialize_initial_offsets,
    serialize_offset_log,
    with_initial_kafka_offsets,
    with_kafka_offsets,
)
from recovery.core.model import TopicPartition
from recovery.errors import CheckpointFormatError

META = b'{"batchWatermarkMs":0,"batchTimestampMs":1795327212050,"conf":{"spark.sql.shuffle.partitions":"2"}}'
# What pyspark 4.2 wrote on the rig for a Kafka -> Delta query.
KAFKA_V1 = b"v1\n" + META + b'\n{"orders":{"0":334,"1":333,"2":333}}'
DELTA_LINE = (
    b'{"sourceVersion":1,"reservoirId":"abc","reservoirVersion":3,"index":-1,"isStartingVersion":false}'
)


def tp(partition: int, topic: str = "orders") -> TopicPartition:
    return TopicPartition(topic, partition)


def test_kafka_v1_offsets_parse_and_reserialize_byte_for_byte() -> None:
    entry = parse_offset_log(KAFKA_V1, batch_id=0)
    assert entry.version == 1
    assert entry.metadata is not None and entry.metadata.batch_timestamp_ms == 1795327212050
    assert entry.metadata.conf == (("spark.sql.shuffle.partitions", "2"),)
    (source,) = entry.sources
    assert source.kind is SourceKind.KAFKA and source.source_id == "0"
    assert source.kafka == KafkaOffsets(((tp(0), 334), (tp(1), 333), (tp(2), 333)))
    assert serialize_offset_log(entry) == KAFKA_V1


def test_kafka_offsets_are_a_map_in_any_key_order() -> None:
    """Spark 2.4.3 wrote {"2":3,"4":3,...}: HashMap order, not sorted."""
    offsets = parse_kafka_offsets('{"t":{"2":3,"4":3,"1":3,"3":3,"0":3}}')
    assert offsets.offsets == {tp(p, "t"): 3 for p in range(5)}
    assert offsets.to_json() == '{"t":{"2":3,"4":3,"1":3,"3":3,"0":3}}'


def test_rewrite_changes_only_the_kafka_values_and_keeps_key_order() -> None:
    data = b"v1\n" + META + b'\n{"logOffset":7}\n-\n{"b":{"1":5,"0":9},"a":{"0":1}}\n' + DELTA_LINE
    entry = parse_offset_log(data, batch_id=3)
    assert [s.kind for s in entry.sources] == [SourceKind.OPAQUE, None, SourceKind.KAFKA, SourceKind.DELTA]
    assert entry.kafka_sources == (entry.sources[2],)
    new = serialize_offset_log(with_kafka_offsets(entry, 2, {tp(0, "b"): 4, tp(0, "a"): 2}))
    assert new == data.replace(b'{"b":{"1":5,"0":9},"a":{"0":1}}', b'{"b":{"1":5,"0":4},"a":{"0":2}}')


def test_rewrite_can_add_and_drop_partitions() -> None:
    offsets = KafkaOffsets(((tp(1), 5), (tp(0), 9), (tp(0, "z"), 1)))
    changed = offsets.with_offsets({tp(0): None, tp(2): 7, tp(0, "new"): 0})
    assert changed.to_json() == '{"orders":{"1":5,"2":7},"z":{"0":1},"new":{"0":0}}'


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"], ids=["negative", "float", "bool", "string"])
def test_rewrite_refuses_offsets_that_are_not_non_negative_integers(bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        KafkaOffsets(((tp(0), 1),)).with_offsets({tp(0): bad})  # type: ignore[dict-item]


def test_rewrite_refuses_a_source_that_is_not_kafka() -> None:
    entry = parse_offset_log(b"v1\n" + META + b"\n7", batch_id=0)
    with pytest.raises(ValueError, match="source 0 is not a Kafka source"):
        with_kafka_offsets(entry, 0, {tp(0): 1})


def test_v2_offsets_keep_map_order_and_source_ids() -> None:
    meta = META[:-1] + b',"sourceMetadataInfo":{}}'
    data = b"v2\n" + meta + b'\n1:{"t":{"0":4}}\n0:-'
    entry = parse_offset_log(data, batch_id=9)
    assert entry.version == 2
    assert [s.source_id for s in entry.sources] == ["1", "0"]
    assert entry.source(1).kafka == KafkaOffsets(((tp(0, "t"), 4),))
    assert entry.source(0).text is None
    assert entry.metadata is not None and entry.metadata.source_metadata_info == ()
    rewritten = serialize_offset_log(with_kafka_offsets(entry, "1", {tp(0, "t"): 2}))
    assert rewritten == b"v2\n" + meta + b'\n1:{"t":{"0":2}}\n0:-'


def test_delta_source_offset_is_recognised() -> None:
    entry = parse_offset_log(b"v1\n" + META + b"\n" + DELTA_LINE, batch_id=0)
    assert entry.sources[0].delta == DeltaSourceOffset(1, "abc", 3, -1, False)


def test_trailing_newline_is_accepted_and_kept() -> None:
    entry = parse_offset_log(KAFKA_V1 + b"\n", batch_id=0)
    assert len(entry.sources) == 1 and entry.trailing == "\n"
    assert serialize_offset_log(entry) == KAFKA_V1 + b"\n"


@pytest.mark.parametrize(
    ("data", "version", "watermark", "state_ids", "sinks"),
    [
        (b'v1\n{"nextBatchWatermarkMs":0}', 1, 0, None, None),
        (b"v1\n{}", 1, 0, None, None),
        (b'v1\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{}}', 1, 0, (), None),
        (
            b'v2\n{"nextBatchWatermarkMs":5,"stateUniqueIds":{"0":[["a"],["b"]]}}',
            2,
            5,
            (("0", (("a",), ("b",))),),
            None,
        ),
        (
            b'v3\n{"nextBatchWatermarkMs":1,"sinkMetadataMap":{"0":{"sinkName":"s","commitOffset":"-"}}}',
            3,
            1,
            None,
            (("0", '{"sinkName":"s","commitOffset":"-"}'),),
        ),
    ],
    ids=["v1", "v1-empty", "v1-stateUniqueIds", "v2", "v3"],
)
def test_commit_log_versions(
    data: bytes, version: int, watermark: int, state_ids: object, sinks: object
) -> None:
    entry = parse_commit_log(data, batch_id=4)
    assert (entry.version, entry.next_batch_watermark_ms) == (version, watermark)
    assert entry.state_unique_ids == state_ids
    assert entry.sink_metadata == sinks
    assert serialize_commit_log(entry) == data


def test_initial_offsets_nul_v1_form() -> None:
    data = b'\x00v1\n{"orders":{"0":0,"1":0,"2":0}}'
    initial = parse_initial_offsets(data)
    assert (initial.lead_byte, initial.version_text) == (0, "v1")
    assert initial.kafka.offsets == {tp(p): 0 for p in range(3)}
    assert serialize_initial_offsets(initial) == data
    moved = serialize_initial_offsets(with_initial_kafka_offsets(initial, {tp(1): 12}))
    assert moved == b'\x00v1\n{"orders":{"0":0,"1":12,"2":0}}'


def test_initial_offsets_spark_2_1_0_length_prefixed_form() -> None:
    data = b'2{"kafka-initial-offset-2-1-0":{"2":2,"1":1,"0":0}}\n'
    initial = parse_initial_offsets(data)
    assert initial.version_text is None and initial.lead_byte == 0x32
    assert initial.kafka.offsets == {tp(p, "kafka-initial-offset-2-1-0"): p for p in range(3)}
    assert serialize_initial_offsets(initial) == data


def test_rate_source_file_is_not_kafka_initial_offsets() -> None:
    assert not fmt.is_kafka_initial_offsets(b"v1\n1795327229939")
    assert fmt.is_kafka_initial_offsets(b'\x00v1\n{"t":{"0":1}}')


def test_stream_metadata() -> None:
    meta = parse_stream_metadata(b'{"id":"a888a0f2-c5b3-4a17-b5f8-9d6250991d3f"}')
    assert meta.query_id == "a888a0f2-c5b3-4a17-b5f8-9d6250991d3f"
    assert fmt.serialize_stream_metadata(meta) == b'{"id":"a888a0f2-c5b3-4a17-b5f8-9d6250991d3f"}'
    assert fmt.stream_metadata(meta.query_id) == meta


P = "/x/chk/offsets/17"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", f"{P}: empty file (truncated write?)"),
        (b"v1", f"{P}: truncated: no batch metadata line after the version line"),
        (b"v9\n{}\n1", f"{P}: unsupported log version v9 (this tool reads up to v2)"),
        (b"x1\n{}\n1", f"{P}: line 1 is not a log version (expected v1..v2, got 'x1')"),
        (b"v1 \n{}\n1", f"{P}: line 1 is not a log version (expected v1..v2, got 'v1 ')"),
        (
            b"v1\n{bad\n1",
            f"{P}: line 2 is not JSON (column 2: Expecting property name enclosed in double quotes)",
        ),
        (b'v1\n{}\n{"t":{"0":5,"1":7', f"{P}: line 3 is not JSON (column 18: Expecting ',' delimiter)"),
        (b'v1\n{}\n{"t":{"0":-5}}', f"{P}: line 3: offset of t [0] is negative (-5)"),
        (b'v1\n{}\n{"t":{"0":5.5}}', f"{P}: line 3: offset of t [0] is not an integer (5.5)"),
        (b'v1\n{}\n{"t":{"0":"5"}}', f'{P}: line 3: offset of t [0] is not an integer ("5")'),
        (b'v1\n{}\n{"t":{"0":5,"0":6}}', f"{P}: line 3 is not valid JSON (duplicate key '0')"),
        (b'v1\n{}\n{"t":{"0":5}}\x00', f"{P}: NUL byte at offset 19 where none belongs"),
        (b"v1\n{}\n\xff\xfe", f"{P}: not UTF-8 (byte 0xff at offset 6)"),
        (b"v1\n{}\n\n1", f"{P}: line 3 is empty"),
        (b"v2\n\n0:1", f"{P}: v2 offset log requires a batch metadata line"),
        (b"v2\n{}\n01", f"{P}: line 3 is not <sourceId>:<offset>"),
        (b"v2\n{}\n0:1\n0:2", f"{P}: line 4: source id '0' appears twice"),
        (
            b'v1\n{"batchWatermarkMs":"x"}\n1',
            f"{P}: line 2: batchWatermarkMs is not an integer in the range of a long",
        ),
        (b"v1\n[]\n1", f"{P}: line 2 (batch metadata) is not a JSON object"),
    ],
    ids=[
        "empty",
        "truncated",
        "unknown-version",
        "not-a-version",
        "version-with-space",
        "metadata-not-json",
        "truncated-json",
        "negative-offset",
        "float-offset",
        "string-offset",
        "duplicate-partition",
        "nul-byte",
        "not-utf8",
        "empty-source-line",
        "v2-without-metadata",
        "v2-without-colon",
        "v2-duplicate-source",
        "bad-watermark",
        "metadata-not-object",
    ],
)
def test_bad_offset_files_name_the_file_and_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointFormatError) as raised:
        parse_offset_log(data, batch_id=17, path=P)
    assert str(raised.value) == message
    assert "\n" not in str(raised.value)


C = "/x/chk/commits/3"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"v4\n{}", f"{C}: unsupported log version v4 (this tool reads up to v3)"),
        (b"v3\n{}", f"{C}: v3 commit log requires a non-empty sinkMetadataMap"),
        (
            b'v1\n{"nextBatchWatermarkMs":1.5}',
            f"{C}: line 2: nextBatchWatermarkMs is not an integer in the range of a long",
        ),
        (
            b'v2\n{"stateUniqueIds":{"0":"x"}}',
            f"{C}: line 2: stateUniqueIds is not a map of operator id -> [[id, ...], ...]",
        ),
        (b"v1\n{}\n{}", f"{C}: unexpected line 3 (a commit file has 2 lines, this one has 3)"),
    ],
    ids=["unknown-version", "v3-without-sinks", "bad-watermark", "bad-state-ids", "extra-line"],
)
def test_bad_commit_files(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointFormatError) as raised:
        parse_commit_log(data, batch_id=3, path=C)
    assert str(raised.value) == message


S = "/x/chk/sources/0/0"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00", f"{S}: truncated: nothing after the leading byte"),
        (b"\x00v1", f"{S}: truncated: no line break after the version"),
        (b'\x00v99999\n{"t":{"0":0}}', f"{S}: unsupported log version v99999 (this tool reads up to v1)"),
        (b'\x00v1\n{"t":{"0":0}}\x00', f"{S}: NUL byte at offset 17 where none belongs"),
        (
            b"\x00v1\n[1]",
            f'{S}: initial offsets is not a Kafka offset map ({{"topic":{{"partition":offset}}}})',
        ),
    ],
    ids=["nul-only", "no-newline", "future-version", "second-nul", "not-kafka"],
)
def test_bad_initial_offset_files(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointFormatError) as raised:
        parse_initial_offsets(data, path=S)
    assert str(raised.value) == message


def test_bad_metadata_file() -> None:
    with pytest.raises(CheckpointFormatError, match=r'^/c/metadata: expected \{"id":"<query id>"\}$'):
        parse_stream_metadata(b'{"name":"x"}', path="/c/metadata")


def test_format_module_does_no_io() -> None:
    """format.py and crc.py import only the standard library, model and errors."""
    allowed = {"__future__", "json", "re", "struct", "zlib", "dataclasses", "enum", "typing"}
    allowed |= {"collections.abc"}
    allowed |= {"recovery.errors", "recovery.core.model"}
    package = Path(fmt.__file__).parent
    for name in ("format.py", "crc.py"):
        tree = ast.parse((package / name).read_text())
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert imported <= allowed, (name, imported - allowed)
