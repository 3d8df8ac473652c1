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
from recovery.core.model import TopicPartition
from recovery.local.jars import installed_spark_line
from recovery.local.pipeline import run_once

pytestmark = pytest.mark.fidelity  # run on every Spark line by `make test-matrix`

# Spark 4.1+ moved the checkpoint file managers to ...streaming.checkpointing (checked in the
# spark-sql_2.13-4.2.0 jar: org/apache/spark/sql/execution/streaming/checkpointing/
# FileSystemBasedCheckpointFileManager.class); 3.5 and 4.0 keep them in ...streaming.
FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_MANAGER = (
    "org.apache.spark.sql.execution.streaming.{}FileSystemBasedCheckpointFileManager".format(
        "checkpointing." if installed_spark_line() not in ("3.5", "4.0") else ""
    )
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
    first = rewrite_offsets(chk, {0: {0: {TopicPartition(topic, 0): 4}}}, force=True)
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
    second = rewrite_offsets(chk, {1: {0: {TopicPartition(topic, 1): 7}}}, force=True)
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
    # The CLI's restore is a dry run unless --execute: changes pending exit 1, and nothing is written.
    rewritten_1 = (chk_dir / "offsets/1").read_bytes()
    with pytest.raises(SystemExit) as exited:
        main(["checkpoint", "restore", str(chk_dir), "--backup", second.id])
    out, _ = capsys.readouterr()
    assert (exited.value.code, out) == (
        1,
        "PATH            CHANGE\noffsets/1       restore\noffsets/.1.crc  restore\n",
    )
    assert (chk_dir / "offsets/1").read_bytes() == rewritten_1
    restore_backup(str(chk_dir), second.id, execute=True, force=True)
    restore_backup(str(chk_dir), first.id, execute=True, force=True)
    for rel, data in {**original_0, **original_1}.items():
        assert (chk_dir / rel).read_bytes() == data, rel
    assert hadoop_filesystem_read(spark, chk_dir / "offsets/1") == original_1["offsets/1"]
    assert len(list_backups(str(chk_dir))) == 4


KILLED_REWRITE = """
import sys
from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.core.model import TopicPartition
rewrite_offsets(open_checkpoint(sys.argv[1]), {0: {0: {TopicPartition(sys.argv[2], 0): 4}}}, force=True)
"""


def _rewrite_in_subprocess(
    chk_dir: Path, topic: str, *, fault_at: int | None = None, log: Path | None = None
) -> int:
    import os
    import subprocess
    import sys

    from recovery.checkpoint.store import FAULT_AT_ENV, FAULT_LOG_ENV

    env = {k: v for k, v in os.environ.items() if k not in (FAULT_AT_ENV, FAULT_LOG_ENV)}
    if fault_at is not None:
        env[FAULT_AT_ENV] = str(fault_at)
    if log is not None:
        env[FAULT_LOG_ENV] = str(log)
    args = [sys.executable, "-c", KILLED_REWRITE, str(chk_dir), topic]
    return subprocess.run(args, env=env, capture_output=True, timeout=300).returncode


def test_spark_restarts_from_every_kill_point_of_a_rewrite(
    spark: SparkSession,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    tmp_path: Path,
) -> None:
    """A rewrite of a real Spark checkpoint killed (SIGKILL) before each file operation: at every
    point, each file a restart reads passes Hadoop's checksum-verifying FileSystem; real Spark (with
    the FileSystem-based checkpoint manager, which verifies ``.crc``) restarts from the most delicate
    point (data file replaced, side file not yet written) and from the re-run's result."""
    import shutil
    import signal

    topic = new_topic(3)
    produce(topic, 30)
    original = tmp_path / "original"
    run_once(spark, bootstrap=bootstrap, topic=topic, table=str(tmp_path / "t0"), checkpoint=str(original))
    log = tmp_path / "ops.log"
    probe = tmp_path / "probe"
    shutil.copytree(original, probe)
    assert _rewrite_in_subprocess(probe, topic, log=log) == 0
    ops = log.read_text().splitlines()
    done = {rel: (probe / rel).read_bytes() for rel in ("offsets/0", "offsets/.0.crc")}
    delicate = next(
        i
        for i, op in enumerate(ops, 1)
        if op.endswith("offsets/.0.crc") and " write " in op and "_recovery/" not in op
    )

    for k in range(1, len(ops) + 1):
        killed = tmp_path / f"k{k}"
        shutil.copytree(original, killed)
        assert _rewrite_in_subprocess(killed, topic, fault_at=k) == -signal.SIGKILL, ops[k - 1]
        for rel in ("metadata", "offsets/0", "commits/0", "sources/0/0"):
            assert hadoop_filesystem_read(spark, killed / rel) == (killed / rel).read_bytes(), (
                ops[k - 1],
                rel,
            )
        if k == delicate:
            assert not (killed / "offsets/.0.crc").exists()  # the stale side file went first
            spark.conf.set(FILE_MANAGER_CONF, FILE_SYSTEM_MANAGER)
            try:
                table = tmp_path / "t-killed"
                run_once(spark, bootstrap=bootstrap, topic=topic, table=str(table), checkpoint=str(killed))
            finally:
                spark.conf.unset(FILE_MANAGER_CONF)
            assert sorted(delta_rows(spark, table)) == [(0, o) for o in range(4, 10)]
            continue
        assert _rewrite_in_subprocess(killed, topic) == 0, ops[k - 1]
        assert {rel: (killed / rel).read_bytes() for rel in done} == done, ops[k - 1]
        assert not (killed / "_recovery/intent.json").exists()
        if k == len(ops):  # one real restart from a re-run's result
            spark.conf.set(FILE_MANAGER_CONF, FILE_SYSTEM_MANAGER)
            try:
                table = tmp_path / "t-rerun"
                run_once(spark, bootstrap=bootstrap, topic=topic, table=str(table), checkpoint=str(killed))
            finally:
                spark.conf.unset(FILE_MANAGER_CONF)
            assert sorted(delta_rows(spark, table)) == [(0, o) for o in range(4, 10)]
