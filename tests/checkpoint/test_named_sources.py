"""Named sources on offset log v2 (Spark 4.2, ``DataStreamReader.name``), in the bytes real Spark
wrote on the rig: ``<name>:<offset JSON>`` lines and ``sources/<name>/0``. Read, planned and
rewritten like numbered ones (issue 25: these printed a traceback before)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chk_builder import QUERY_ID, tree, write_checkpoint

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.checkpoint.crc import checksum_file, crc_name
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.errors import CheckpointFormatError
from recovery.resume import checkpoint_view

META_V2 = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1795788886080,"conf":{"spark.sql.shuffle.partitions":"2",'
    '"spark.sql.streaming.queryEvolution.enableSourceEvolution":"true"},"sourceMetadataInfo":{}}'
)

ORDERS_LINE = 'orders_src:{"orders":{"0":13,"1":13}}'
PAY_LINE = 'pay_src:{"payments":{"0":5,"1":5}}'


def named_checkpoint(root: Path, *, committed: bool = True) -> Path:
    files = {
        "metadata": f'{{"id":"{QUERY_ID}"}}'.encode(),
        "offsets/0": f"v2\n{META_V2}\n{ORDERS_LINE}\n{PAY_LINE}".encode(),
        "sources/orders_src/0": b'\x00v1\n{"orders":{"0":0,"1":0}}',
        "sources/pay_src/0": b'\x00v1\n{"payments":{"0":0,"1":0}}',
    }
    if committed:
        files["commits/0"] = b'v1\n{"nextBatchWatermarkMs":0}'
    for rel, data in list(files.items()):
        parent, _, name = rel.rpartition("/")
        files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    return write_checkpoint(root, files)


@pytest.mark.parametrize(
    ("text", "file"),
    [
        ("offsets/3", CheckpointFile("offsets", 3)),
        ("sources/0/0", CheckpointFile("sources", 0)),
        ("sources/orders_src/0", CheckpointFile("sources", "orders_src")),
    ],
)
def test_a_file_is_spelled_and_parsed_back(text: str, file: CheckpointFile) -> None:
    assert CheckpointFile.parse(text) == file and str(file) == text
    assert CheckpointFile.sources(file.number) == file if file.is_initial else file.batch_id == 3


@pytest.mark.parametrize("text", ["sources/a-b/0", "sources//0", "offsets/x", "sources/0/1", "commits/0"])
def test_what_is_not_an_offsets_file_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a checkpoint offsets file"):
        CheckpointFile.parse(text)


def test_files_sort_as_spark_reads_them() -> None:
    files = [
        CheckpointFile.offsets(10),
        CheckpointFile.sources("pay_src"),
        CheckpointFile.offsets(2),
        CheckpointFile.sources(1),
        CheckpointFile.sources("orders_src"),
        CheckpointFile.sources(0),
    ]
    assert [str(f) for f in sorted(files)] == [
        "sources/0/0",
        "sources/1/0",
        "sources/orders_src/0",
        "sources/pay_src/0",
        "offsets/2",
        "offsets/10",
    ]


def test_named_sources_resume_where_their_lines_say(tmp_path: Path) -> None:
    chk = open_checkpoint(str(named_checkpoint(tmp_path / "chk")))
    view, issues = checkpoint_view(chk)
    assert not issues
    assert [(s.source_id, str(s.start_file), dict(s.start)) for s in view.sources] == [
        ("orders_src", "offsets/0", {TopicPartition("orders", 0): 13, TopicPartition("orders", 1): 13}),
        ("pay_src", "offsets/0", {TopicPartition("payments", 0): 5, TopicPartition("payments", 1): 5}),
    ]


def test_an_uncommitted_first_batch_starts_from_the_named_initial_file(tmp_path: Path) -> None:
    chk = open_checkpoint(str(named_checkpoint(tmp_path / "chk", committed=False)))
    view, _ = checkpoint_view(chk)
    assert [(s.source_id, str(s.start_file)) for s in view.sources] == [
        ("orders_src", "sources/orders_src/0"),
        ("pay_src", "sources/pay_src/0"),
    ]


def test_a_rewrite_keeps_the_v2_names_and_every_other_byte(tmp_path: Path) -> None:
    root = named_checkpoint(tmp_path / "chk")
    before = tree(root)
    rewrite_offsets(
        open_checkpoint(str(root)),
        {0: {"orders_src": {TopicPartition("orders", 0): 20}}},
        initial={"pay_src": {TopicPartition("payments", 1): 2}},
        force=True,
    )
    after = tree(root)
    assert after["offsets/0"] == before["offsets/0"].replace(b'"0":13,', b'"0":20,')
    assert after["sources/pay_src/0"] == b'\x00v1\n{"payments":{"0":0,"1":2}}'
    assert after["offsets/.0.crc"] == checksum_file(after["offsets/0"])
    changed = {k for k in after if not k.startswith("_recovery/") and before.get(k) != after[k]}
    assert changed == {"offsets/0", "offsets/.0.crc", "sources/pay_src/0", "sources/pay_src/.0.crc"}


def test_a_name_of_digits_that_is_not_an_index_stays_a_name() -> None:
    assert str(CheckpointFile.sources("007")) == "sources/007/0"
    assert CheckpointFile.sources("7") == CheckpointFile("sources", 7)


def test_a_named_initial_file_spark_reads_before_any_batch_is_checked(tmp_path: Path) -> None:
    root = named_checkpoint(tmp_path / "chk")
    for rel in ("offsets/0", "offsets/.0.crc", "commits/0", "commits/.0.crc", "sources/pay_src/.0.crc"):
        (root / rel).unlink()
    (root / "sources/pay_src/0").write_bytes(b'\x00v9\n{"payments":{"0":0}}')
    with pytest.raises(CheckpointFormatError, match=r"sources/pay_src/0: unsupported log version v9"):
        open_checkpoint(str(root))
