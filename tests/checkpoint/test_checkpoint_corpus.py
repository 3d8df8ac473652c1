"""Every real checkpoint in ../shared/fixtures/spark-checkpoints (Spark 2.1 -> 4.3) parses, and
re-serialising each file reproduces it byte for byte; regenerated ``.crc`` files equal Spark's."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.checkpoint import CrcStatus, NextRun, SourceKind, open_checkpoint
from recovery.checkpoint import format as fmt
from recovery.checkpoint.crc import checksum_file, checksum_matches, parse_checksum_file
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.core.restart import Level
from recovery.errors import CheckpointFormatError

CHECKPOINTS = [
    "checkpoint-test-offsetId-commitId-inconsistent",
    "checkpoint-version-2.1.0",
    "checkpoint-version-2.3.1-flatMapGroupsWithState-state-format-1",
    "checkpoint-version-2.3.1-for-multi-watermark-policy",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1",
    "checkpoint-version-2.3.1-without-commit-log-metadata",
    "checkpoint-version-2.4.0-streaming-join",
    "checkpoint-version-2.4.3-kafka-include-headers-default",
    "checkpoint-version-2.4.5-for-compatibility-test-common-functions",
    "checkpoint-version-2.4.5-for-compatibility-test-deduplicate",
    "checkpoint-version-2.4.5-for-compatibility-test-statistical-functions",
    "checkpoint-version-2.4.5-for-compatibility-test-sum-decimal",
    "checkpoint-version-3.0.0-streaming-statestore-codec",
    "checkpoint-version-3.1.0-flatmapgroupswithstate-repartition",
    "checkpoint-version-3.2.0-deduplication-with-repartition",
    "checkpoint-version-3.2.0-session-window-with-repartition",
    "checkpoint-version-3.2.0-streaming-aggregate-with-repartition",
    "checkpoint-version-3.3.0-streaming-deduplication",
    "checkpoint-version-3.5.1-streaming-deduplication",
    "checkpoint-version-4.0.0/hdfs/agg",
    "checkpoint-version-4.0.0/hdfs/dedup",
    "checkpoint-version-4.0.0/hdfs/join1",
    "checkpoint-version-4.0.0/hdfs/join2",
    "checkpoint-version-4.0.0/hdfs/limit",
    "checkpoint-version-4.0.0/rocksdb/agg",
    "checkpoint-version-4.0.0/rocksdb/dedup",
    "checkpoint-version-4.0.0/rocksdb/join1",
    "checkpoint-version-4.0.0/rocksdb/join2",
    "checkpoint-version-4.0.0/rocksdb/limit",
    "checkpoint-version-4.0.0-tws-avro",
    "checkpoint-version-4.0.0-tws-unsaferow",
    "escaped-path-2.4.0/chk%252520%252525@%252523chk",
    "generated-local/spark-4.0.1-rate-agg-v1",
    "generated-local/spark-4.3.0-two-rate-agg-offsetlog-v2-commitlog-v2-rocksdb",
    "generated-local/spark-4.3.0-two-rate-agg-v1",
]
GENERATED = [name for name in CHECKPOINTS if name.startswith("generated-local/")]


def _batch_files(directory: Path) -> list[Path]:
    return (
        sorted(p for p in directory.iterdir() if fmt.is_batch_file_name(p.name)) if directory.is_dir() else []
    )


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_checkpoint_parses_and_every_file_round_trips(spark_fixtures: Path, name: str) -> None:
    root = spark_fixtures / name
    chk = open_checkpoint(str(root), strict=False)
    assert fmt.serialize_stream_metadata(chk.metadata) == (root / "metadata").read_bytes()
    assert len(chk.query_id) == 36
    offsets, commits = _batch_files(root / "offsets"), _batch_files(root / "commits")
    assert chk.offset_batch_ids == tuple(int(p.name) for p in offsets)
    assert chk.commit_batch_ids == tuple(int(p.name) for p in commits)
    for path in offsets:
        entry = chk.offsets(int(path.name))
        assert fmt.serialize_offset_log(entry) == path.read_bytes(), path
        assert entry.sources, path
    for path in commits:
        assert fmt.serialize_commit_log(chk.commit(int(path.name))) == path.read_bytes(), path
    chk.restart_state()  # decides without raising, whatever the logs hold


@pytest.mark.parametrize("name", GENERATED)
def test_regenerated_crc_files_equal_the_ones_spark_wrote(spark_fixtures: Path, name: str) -> None:
    crcs = sorted((spark_fixtures / name).rglob(".*.crc"))
    assert crcs
    for crc in crcs:
        data_file = crc.with_name(crc.name[1 : -len(".crc")])
        assert checksum_file(data_file.read_bytes()) == crc.read_bytes(), crc
        assert parse_checksum_file(crc.read_bytes()) is not None


@pytest.mark.parametrize("name", GENERATED)
def test_crc_status_of_every_file_read_is_ok(spark_fixtures: Path, name: str) -> None:
    chk = open_checkpoint(str(spark_fixtures / name))
    chk.offset_batches()
    chk.commit_batches()
    assert chk.files_read and {f.crc for f in chk.files_read} == {CrcStatus.OK}


def test_kafka_fixture_2_4_3(spark_fixtures: Path) -> None:
    chk = open_checkpoint(str(spark_fixtures / "checkpoint-version-2.4.3-kafka-include-headers-default"))
    (source,) = chk.offsets(0).sources
    topic = "spark-test-topic-2b8619f5-d3c4-4c2d-b5d1-8d9d9458aa62"
    assert source.kind is SourceKind.KAFKA and source.kafka is not None
    assert source.kafka.offsets == {TopicPartition(topic, p): 3 for p in range(5)}
    assert source.kafka.to_json() == source.text  # Spark's spelling, its HashMap key order kept
    state = chk.restart_state()
    assert (state.next_run, state.start, state.end) == (NextRun.FIRST_BATCH, None, CheckpointFile.offsets(0))


def test_inconsistent_fixture_reports_the_gap_and_the_missing_previous_batch(spark_fixtures: Path) -> None:
    state = open_checkpoint(
        str(spark_fixtures / "checkpoint-test-offsetId-commitId-inconsistent"), strict=False
    ).restart_state()
    assert (state.next_run, state.batch_id, state.latest_offsets, state.latest_commit) == (
        NextRun.RERUN_BATCH,
        4,
        4,
        None,
    )
    # Spark's own test of a log with a gap: the gap is read as async progress tracking's, which
    # restarts from the previous batch on disk; without it Spark fails, and the warning says so.
    assert (state.start, state.previous, state.asynchronous) == (CheckpointFile.offsets(2), 2, True)
    (gap,) = [i for i in state.issues if "has gaps" in i.message]
    assert gap.level is Level.WARNING
    assert gap.message == (
        "offsets/ has gaps (missing 3): written with async progress tracking, which restarts from the "
        "previous batch on disk (offsets/2); restarted without asyncProgressTrackingEnabled, Spark "
        "fails (batch 3 doesn't exist)"
    )
    assert state.can_restart


def test_two_rate_sources_v2_uncommitted_batch(spark_fixtures: Path) -> None:
    name = "generated-local/spark-4.3.0-two-rate-agg-offsetlog-v2-commitlog-v2-rocksdb"
    chk = open_checkpoint(str(spark_fixtures / name))
    entry = chk.latest_offsets()
    assert entry is not None and entry.version == 2
    assert [(s.source_id, s.kind, s.text) for s in entry.sources] == [
        ("1", SourceKind.OPAQUE, "6"),
        ("0", SourceKind.OPAQUE, "6"),
    ]
    commit = chk.latest_commit()
    assert commit is not None and commit.version == 2 and commit.state_unique_ids is not None
    state = chk.restart_state()
    assert (state.next_run, state.batch_id, state.start, state.end) == (
        NextRun.RERUN_BATCH,
        4,
        CheckpointFile.offsets(3),
        CheckpointFile.offsets(4),
    )
    assert chk.initial_offsets(0) is None  # a rate source's sources/0/0 is not Kafka's


def test_spark_2_1_0_metadata_without_conf(spark_fixtures: Path) -> None:
    entry = open_checkpoint(str(spark_fixtures / "checkpoint-version-2.1.0")).offsets(0)
    assert entry.metadata is not None and entry.metadata.conf == ()
    assert entry.metadata.batch_timestamp_ms == 1489180207737


KAFKA_RESOURCES = "kafka-0-10-sql-test-resources"


def test_kafka_source_offset_2_1_0(spark_fixtures: Path) -> None:
    text = (spark_fixtures / KAFKA_RESOURCES / "external/kafka-source-offset-version-2.1.0.txt").read_text()
    offsets = fmt.parse_kafka_offsets(text)
    assert offsets.offsets == {
        TopicPartition("topic1", 0): 456,
        TopicPartition("topic1", 1): 789,
        TopicPartition("topic2", 0): 0,
    }


def test_kafka_initial_offset_2_1_0(spark_fixtures: Path) -> None:
    data = (
        spark_fixtures / KAFKA_RESOURCES / "external/kafka-source-initial-offset-version-2.1.0.bin"
    ).read_bytes()
    initial = fmt.parse_initial_offsets(data)
    assert initial.kafka.offsets == {TopicPartition("kafka-initial-offset-2-1-0", p): p for p in range(3)}
    assert fmt.serialize_initial_offsets(initial) == data


@pytest.mark.parametrize("where", ["external", "connector"])
def test_kafka_initial_offset_future_version_is_refused(spark_fixtures: Path, where: str) -> None:
    path = spark_fixtures / KAFKA_RESOURCES / where / "kafka-source-initial-offset-future-version.bin"
    with pytest.raises(
        CheckpointFormatError, match=r"unsupported log version v99999 \(this tool reads up to v1\)"
    ):
        fmt.parse_initial_offsets(path.read_bytes(), path=str(path))


@pytest.mark.parametrize(
    "name",
    ["file-source-offset-version-2.1.0-long.txt", "file-source-offset-version-2.1.0-json.txt"],
)
def test_file_source_offsets_stay_opaque(spark_fixtures: Path, name: str) -> None:
    text = (spark_fixtures / "structured-streaming-test-resources" / name).read_text()
    source = fmt.parse_source_offset("0", text, path=name, where="line 3")
    assert (source.kind, source.text) == (SourceKind.OPAQUE, text)


def test_query_metadata_2_1_0_pretty_json(spark_fixtures: Path) -> None:
    path = spark_fixtures / "structured-streaming-test-resources/query-metadata-logs-version-2.1.0.txt"
    meta = fmt.parse_stream_metadata(path.read_bytes())
    assert meta.query_id == "d366a8bf-db79-42ca-b5a4-d9ca0a11d63e"
    assert fmt.serialize_stream_metadata(meta) == path.read_bytes()


def test_file_source_log_is_not_a_checkpoint(spark_fixtures: Path) -> None:
    root = spark_fixtures / "file-source-log-version-2.1.0"
    with pytest.raises(CheckpointFormatError, match=r"/metadata: missing \(not a checkpoint directory"):
        open_checkpoint(str(root))


def test_crc_of_a_different_file_does_not_match(spark_fixtures: Path) -> None:
    root = spark_fixtures / "generated-local/spark-4.0.1-rate-agg-v1"
    assert checksum_matches((root / "offsets/6").read_bytes(), (root / "offsets/.6.crc").read_bytes())
    assert not checksum_matches((root / "offsets/5").read_bytes(), (root / "offsets/.6.crc").read_bytes())
