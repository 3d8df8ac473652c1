"""Property tests: parse(serialize(x)) == x for generated checkpoint files, and rewrites touch nothing
but the offsets asked for."""

from __future__ import annotations

import json
import uuid

import fsspec
from chk_builder import checkpoint_files
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.checkpoint import format as fmt
from recovery.checkpoint import open_checkpoint
from recovery.checkpoint.crc import checksum_file, checksum_matches, parse_checksum_file
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.core.restart import NextRun, plan_restart

topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789._-", min_size=1, max_size=12)
offsets = st.integers(min_value=0, max_value=2**63 - 1)
kafka_offsets = st.dictionaries(
    topics, st.dictionaries(st.integers(0, 500), offsets, min_size=1, max_size=6), min_size=1, max_size=3
).map(
    lambda m: fmt.KafkaOffsets(tuple((TopicPartition(t, p), o) for t, ps in m.items() for p, o in ps.items()))
)
conf = st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=20), max_size=5)
metadata = st.builds(
    lambda wm, ts, c: json.dumps(
        {"batchWatermarkMs": wm, "batchTimestampMs": ts, "conf": c}, separators=(",", ":"), ensure_ascii=False
    ),
    st.integers(0, 2**53),
    st.integers(0, 2**53),
    conf,
)
delta = st.builds(
    lambda v, rid, rv, idx, start: json.dumps(
        {
            "sourceVersion": v,
            "reservoirId": rid,
            "reservoirVersion": rv,
            "index": idx,
            "isStartingVersion": start,
        },
        separators=(",", ":"),
    ),
    st.integers(1, 3),
    st.uuids().map(str),
    st.integers(0, 10**6),
    st.integers(-100, 10**4),
    st.booleans(),
)
opaque = st.one_of(st.integers(0, 10**12).map(str), st.integers(0, 99).map(lambda n: f'{{"logOffset":{n}}}'))
source_text = st.one_of(kafka_offsets.map(lambda k: k.to_json()), delta, opaque, st.none())


def _offset_file(version: int, meta: str, texts: list[str | None], order: list[int], trailing: str) -> bytes:
    lines = [f"v{version}", meta]
    for i in order:
        text = "-" if texts[i] is None else texts[i]
        lines.append(f"{i}:{text}" if version == 2 else str(text))
    return ("\n".join(lines) + trailing).encode()


@st.composite
def offset_files(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from([1, 2]))
    texts = draw(st.lists(source_text, min_size=1, max_size=4))
    order = list(range(len(texts)))
    if version == 2:
        order = draw(st.permutations(order))
    return _offset_file(version, draw(metadata), texts, order, draw(st.sampled_from(["", "\n"])))


@given(offset_files())
def test_offset_log_round_trips(data: bytes) -> None:
    entry = fmt.parse_offset_log(data, batch_id=1)
    assert fmt.serialize_offset_log(entry) == data
    assert fmt.parse_offset_log(fmt.serialize_offset_log(entry), batch_id=1) == entry


@given(kafka_offsets)
def test_kafka_offsets_round_trip_as_spark_spells_them(value: fmt.KafkaOffsets) -> None:
    text = value.to_json()
    assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)  # compact
    assert fmt.parse_kafka_offsets(text) == value
    assert json.loads(text) == {
        t: {str(tp.partition): o for tp, o in value.partitions if tp.topic == t} for t in value.topics
    }


@given(offset_files(), st.data())
def test_rewrite_changes_only_the_chosen_kafka_values(data: bytes, draw: st.DataObject) -> None:
    entry = fmt.parse_offset_log(data, batch_id=1)
    kafka = [s for s in entry.sources if s.kafka is not None]
    if not kafka:
        return
    source = draw.draw(st.sampled_from(kafka))
    assert source.kafka is not None
    tps = [tp for tp, _ in source.kafka.partitions]
    changes = draw.draw(st.dictionaries(st.sampled_from(tps), offsets, min_size=1))
    new = fmt.with_kafka_offsets(entry, source.source_id, changes)
    reparsed = fmt.parse_offset_log(fmt.serialize_offset_log(new), batch_id=1)
    assert reparsed == new
    assert (reparsed.version_text, reparsed.metadata_text) == (entry.version_text, entry.metadata_text)
    for old, now in zip(entry.sources, reparsed.sources, strict=True):
        if old.source_id != source.source_id:
            assert now == old
    changed = reparsed.source(source.source_id).kafka
    assert changed is not None
    assert [tp for tp, _ in changed.partitions] == tps  # key order kept
    assert changed.offsets == {**source.kafka.offsets, **changes}


@given(
    st.one_of(st.just(0), st.integers(1, 255)),
    kafka_offsets,
    st.booleans(),
)
def test_initial_offsets_round_trip(lead: int, kafka: fmt.KafkaOffsets, versioned: bool) -> None:
    if not versioned and lead == ord("v"):
        lead = 0x32
    value = fmt.InitialOffsets(lead, "v1" if versioned else None, kafka.to_json(), kafka)
    assert fmt.parse_initial_offsets(fmt.serialize_initial_offsets(value)) == value


@given(
    st.integers(1, 3),
    st.integers(0, 2**53),
    st.dictionaries(st.text(max_size=4), st.lists(st.lists(st.uuids().map(str), max_size=2), max_size=3)),
)
def test_commit_log_round_trips(version: int, watermark: int, ids: dict[str, list[list[str]]]) -> None:
    body: dict[str, object] = {"nextBatchWatermarkMs": watermark, "stateUniqueIds": ids}
    if version == 3:
        body["sinkMetadataMap"] = {"0": {"sinkName": "s", "commitOffset": "-", "providerName": "p"}}
    data = f"v{version}\n{json.dumps(body, separators=(',', ':'))}".encode()
    entry = fmt.parse_commit_log(data, batch_id=0)
    assert fmt.serialize_commit_log(entry) == data
    assert entry.state_unique_ids == tuple((k, tuple(tuple(p) for p in v)) for k, v in ids.items())


@given(st.binary(max_size=3000), st.sampled_from([1, 16, 512, 4096]))
def test_crc_files_verify_and_parse(data: bytes, bpc: int) -> None:
    crc = checksum_file(data, bpc)
    assert len(crc) == 8 + 4 * ((len(data) + bpc - 1) // bpc)
    assert checksum_matches(data, crc)
    parsed = parse_checksum_file(crc)
    assert parsed is not None and parsed.bytes_per_checksum == bpc
    if data:
        assert not checksum_matches(data[:-1] + bytes([data[-1] ^ 1]), crc)


@given(st.sets(st.integers(0, 40), max_size=10), st.sets(st.integers(0, 40), max_size=10))
def test_restart_decision_follows_populate_start_offsets(offset_ids: set[int], commit_ids: set[int]) -> None:
    state = plan_restart(sorted(offset_ids), sorted(commit_ids))
    if not offset_ids:
        assert (state.next_run, state.batch_id) == (NextRun.FIRST_BATCH, 0)
        return
    n = max(offset_ids)
    latest_commit = max(commit_ids) if commit_ids else None
    # A log with gaps was written with async progress tracking: the batch before N is the previous
    # one on disk (AsyncProgressTrackingMicroBatchExecution); otherwise N-1, which must exist.
    gaps = set(range(min(offset_ids), n)) - offset_ids
    earlier = [i for i in offset_ids if i < n]
    previous = max(earlier, default=None) if gaps else (n - 1 if n - 1 in offset_ids else None)
    assert (state.previous, state.asynchronous) == (previous, bool(gaps))
    if latest_commit == n:
        assert (state.next_run, state.batch_id, state.start) == (
            NextRun.NEXT_BATCH,
            n + 1,
            CheckpointFile.offsets(n),
        )
    elif n == 0:
        assert (state.next_run, state.batch_id, state.end) == (
            NextRun.FIRST_BATCH,
            0,
            CheckpointFile.offsets(0),
        )
    else:
        assert (state.next_run, state.batch_id, state.start, state.end) == (
            NextRun.RERUN_BATCH,
            n,
            None if previous is None else CheckpointFile.offsets(previous),
            CheckpointFile.offsets(n),
        )
    assert state.can_restart == (
        (n == 0 or previous is not None) and (latest_commit is None or latest_commit <= n)
    )


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 5),
    st.integers(0, 5),
    st.integers(0, 30),
    topics,
    st.integers(1, 4),
)
def test_generated_checkpoints_parse_and_reserialize(
    batches: int, committed: int, first: int, topic: str, partitions: int
) -> None:
    """A whole checkpoint, as Spark 4.2 writes it, through the store (fsspec memory://)."""
    files = checkpoint_files(
        batches=batches, committed=min(committed, batches), first=first, topic=topic, partitions=partitions
    )
    fs = fsspec.filesystem("memory")
    base = f"memory://prop-{uuid.uuid4().hex}"
    for rel, data in files.items():
        fs.pipe_file(f"{base}/{rel}", data)
    try:
        chk = open_checkpoint(base, strict=False)
        assert chk.offset_batch_ids == tuple(range(first, first + batches))
        for entry in chk.offset_batches():
            assert fmt.serialize_offset_log(entry) == files[f"offsets/{entry.batch_id}"]
            assert entry.sources[0].kafka is not None and entry.sources[0].kafka.topics == (topic,)
        for commit in chk.commit_batches():
            assert fmt.serialize_commit_log(commit) == files[f"commits/{commit.batch_id}"]
        initial = chk.initial_offsets(0)
        assert initial is not None and fmt.serialize_initial_offsets(initial) == files["sources/0/0"]
    finally:
        fs.rm(base, recursive=True)
