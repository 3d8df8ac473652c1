"""Real Spark accepts checkpoints rewritten by ``recovery.checkpoint``, and ``restore`` brings back the
exact original bytes.

One Kafka -> Delta query on the embedded broker, three runs of real Spark 4.2:

1. the query consumes 30 records (10 per partition) and commits batch 0;
2. we move partition 0 back from 10 to 4 in ``offsets/0``: Spark restarts with batch 1 from our
   offsets and replays offsets 4..9 of partition 0 into the Delta table;
3. we move partition 1 back from 10 to 7 in ``offsets/1`` and restart with Spark's
   FileSystem-based checkpoint manager, which verifies the ``.crc`` side files on read.

Then both backups are restored and every file is byte-identical to what Spark wrote.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from recovery.checkpoint import NextRun, list_backups, open_checkpoint, restore_backup, rewrite_offsets
from recovery.checkpoint.crc import checksum_file
from recovery.cli import main
from recovery.local.pipeline import run_once
from recovery.model import TopicPartition

# Spark 4.1+ moved the checkpoint file managers to ...streaming.checkpointing (checked in the
# spark-sql_2.13-4.2.0 jar: org/apache/spark/sql/execution/streaming/checkpointing/
# FileSystemBasedCheckpointFileManager.class).
FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def delta_rows(spark: SparkSession, table: Path) -> Counter[tuple[int, int]]:
    """How many times each (partition, offset) landed in the Delta table."""
    rows = spark.read.format("delta").load(str(table)).select("partition", "offset").collect()
    return Counter((r["partition"], r["offset"]) for r in rows)


def hadoop_filesystem_read(spark: SparkSession, path: Path) -> bytes:
    """Read ``path`` through Hadoop's LocalFileSystem (a ChecksumFileSystem: verifies ``.crc``)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hpath = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.open(hpath)
    try:
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def show_json(capsys: pytest.CaptureFixture[str], checkpoint: Path) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exited:
        main(["checkpoint", "show", str(checkpoint), "--output", "json"])
    out, _ = capsys.readouterr()
    assert exited.value.code == 0
    return json.loads(out)  # type: ignore[no-any-return]


def test_spark_restarts_from_rewritten_offsets_and_restore_is_byte_exact(
    capsys: pytest.CaptureFixture[str],
    spark: SparkSession,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    tmp_path: Path,
) -> None:
    topic = new_topic(3)
    produce(topic, 30)  # k0..k29 round-robin: offsets 0..9 in each of partitions 0, 1, 2
    chk_dir, table = tmp_path / "checkpoint", tmp_path / "table"
    args = {"bootstrap": bootstrap, "topic": topic, "table": str(table), "checkpoint": str(chk_dir)}

    run_once(spark, **args)
    chk = open_checkpoint(str(chk_dir))
    assert chk.offset_batch_ids == (0,) and chk.commit_batch_ids == (0,)
    assert chk.restart_state().next_run is NextRun.NEXT_BATCH
    source = chk.offsets(0).source(0)
    assert source.kafka is not None
    assert source.kafka.offsets == {TopicPartition(topic, p): 10 for p in range(3)}
    initial = chk.initial_offsets(0)
    assert initial is not None and initial.kafka.offsets == {TopicPartition(topic, p): 0 for p in range(3)}
    original_0 = {p: (chk_dir / p).read_bytes() for p in ("offsets/0", "offsets/.0.crc")}
    shown = show_json(capsys, chk_dir)
    assert {f["path"]: f["crc"] for f in shown["files"]} == {
        "commits/0": "ok",
        "metadata": "ok",
        "offsets/0": "ok",
        "sources/0/0": "ok",
    }
    assert shown["next_run"] == {"action": "next_batch", "batch_id": 1, "start": "offsets/0", "end": None}

    # Run 2: the default FileContext-based manager.
    first = rewrite_offsets(chk, {0: {0: {TopicPartition(topic, 0): 4}}})
    rewritten = (chk_dir / "offsets/0").read_bytes()
    old_lines, new_lines = original_0["offsets/0"].split(b"\n"), rewritten.split(b"\n")
    assert new_lines[:2] == old_lines[:2]  # version and metadata lines byte-identical
    assert new_lines[2] == old_lines[2].replace(b'"0":10', b'"0":4')
    assert (chk_dir / "offsets/.0.crc").read_bytes() == checksum_file(rewritten)
    assert hadoop_filesystem_read(spark, chk_dir / "offsets/0") == rewritten
    # Negative control: the same edit with Spark's old side file is refused by Hadoop's FileSystem.
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "0").write_bytes(rewritten)
    (stale / ".0.crc").write_bytes(original_0["offsets/.0.crc"])
    with pytest.raises(Py4JJavaError, match="ChecksumException"):
        hadoop_filesystem_read(spark, stale / "0")

    run_once(spark, **args)
    counts = delta_rows(spark, table)
    assert sum(counts.values()) == 36
    assert {key for key, n in counts.items() if n == 2} == {(0, o) for o in range(4, 10)}

    # Run 3: Spark reads through a Hadoop FileSystem that verifies our regenerated .crc.
    chk = open_checkpoint(str(chk_dir))
    assert chk.offset_batch_ids == (0, 1) and chk.commit_batch_ids == (0, 1)
    original_1 = {p: (chk_dir / p).read_bytes() for p in ("offsets/1", "offsets/.1.crc")}
    second = rewrite_offsets(chk, {1: {0: {TopicPartition(topic, 1): 7}}})
    spark.conf.set(FILE_MANAGER_CONF, FILE_SYSTEM_MANAGER)
    try:
        run_once(spark, **args)
    finally:
        spark.conf.unset(FILE_MANAGER_CONF)
    counts = delta_rows(spark, table)
    assert sum(counts.values()) == 39
    assert {key for key, n in counts.items() if n == 2} == {(0, o) for o in range(4, 10)} | {
        (1, o) for o in range(7, 10)
    }
    assert open_checkpoint(str(chk_dir)).offset_batch_ids == (0, 1, 2)

    # Restore: exact original bytes, and each restore is itself backed up.
    assert [b.id for b in list_backups(str(chk_dir))] == [first.id, second.id]
    restore_backup(str(chk_dir), second.id, execute=True)
    restore_backup(str(chk_dir), first.id, execute=True)
    for rel, data in {**original_0, **original_1}.items():
        assert (chk_dir / rel).read_bytes() == data, rel
    assert hadoop_filesystem_read(spark, chk_dir / "offsets/1") == original_1["offsets/1"]
    assert len(list_backups(str(chk_dir))) == 4
