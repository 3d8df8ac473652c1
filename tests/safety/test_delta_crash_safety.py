"""Kill (SIGKILL) ``delta-source repair --execute`` before each of its file operations, then run it
again: the checkpoint ends byte for byte as the uninterrupted repair leaves it, at every kill point
the files Spark reads parse and match their ``.crc``, and no intent record is left.

The Delta table is real (deltalake); the checkpoint is a query's that read versions 2 then 3 of it,
with Hadoop ``.crc`` side files as the local file system keeps them. The kill comes from the
test-only hook of recovery.checkpoint.store (STREAM_RECOVERY_FAULT_AT).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from chk_builder import QUERY_ID, tree
from deltalake import DeltaTable, write_deltalake
from stopped import stopped

from recovery.checkpoint import open_checkpoint
from recovery.checkpoint.crc import checksum_file, crc_name
from recovery.checkpoint.recovery_dir import INTENT_FILE
from recovery.checkpoint.store import FAULT_AT_ENV, FAULT_LOG_ENV

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def delta_table(path: Path) -> str:
    """Five versions, the log cleaned up to a checkpoint at version 4: versions 2-3 are gone."""
    for i in range(5):
        write_deltalake(
            str(path),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.logRetentionDuration": "interval 0 seconds"},
        )
    table = DeltaTable(str(path))
    table.create_checkpoint()
    table.cleanup_metadata()
    return str(table.metadata().id)


def delta_checkpoint(root: Path, table_id: str) -> Path:
    files: dict[str, bytes] = {"metadata": f'{{"id":"{QUERY_ID}"}}'.encode()}
    for batch, version in enumerate([2, 3]):
        line = json.dumps(
            {
                "sourceVersion": 1,
                "reservoirId": table_id,
                "reservoirVersion": version,
                "index": -1,
                "isStartingVersion": False,
            },
            separators=(",", ":"),
        )
        files[f"offsets/{batch}"] = f"v1\n{META}\n{line}".encode()
        files[f"commits/{batch}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    for rel, data in list(files.items()):
        parent, _, name = rel.rpartition("/")
        files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return stopped(root)


def repair(checkpoint: Path, table: Path, *, fault_at: int | None = None, log: Path | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_AT_ENV, FAULT_LOG_ENV)}
    if fault_at is not None:
        env[FAULT_AT_ENV] = str(fault_at)
    if log is not None:
        env[FAULT_LOG_ENV] = str(log)
    command = [
        sys.executable,
        "-m",
        "recovery",
        "delta-source",
        "repair",
        str(checkpoint),
        "--table",
        str(table),
    ]
    done = subprocess.run([*command, "--execute"], env=env, capture_output=True, timeout=300)
    return done.returncode


def proper(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in tree(root).items() if not k.startswith("_recovery/")}


@pytest.mark.slow
def test_delta_source_repair_killed_before_each_file_operation(tmp_path: Path) -> None:
    table = tmp_path / "table"
    table_id = delta_table(table)
    base = delta_checkpoint(tmp_path / "base" / "chk", table_id)
    original = proper(base)

    done = tmp_path / "done" / "chk"
    shutil.copytree(base, done)
    log = tmp_path / "ops.log"
    assert repair(done, table, log=log) == 0
    ops = log.read_text().splitlines()
    result = proper(done)
    assert result != original
    assert b'"reservoirVersion":4' in result["offsets/1"]
    # each changed batch file: drop the stale .crc, replace the file, write the new .crc
    changed = [o.split(" ", 1)[1].replace(f"{done}/", "") for o in ops if "_recovery/" not in o]
    assert changed == [
        f"{verb} {rel}"
        for data, crc in (("offsets/0", "offsets/.0.crc"), ("offsets/1", "offsets/.1.crc"))
        for verb, rel in (("remove", crc), ("write", data), ("write", crc))
    ]

    for k in range(1, len(ops) + 1):
        root = tmp_path / f"k{k}" / "chk"
        shutil.copytree(base, root)
        assert repair(root, table, fault_at=k) == -signal.SIGKILL, ops[k - 1]
        open_checkpoint(str(root))  # every file Spark reads parses and matches its .crc
        assert proper(root) in (original, result) or (root / INTENT_FILE).exists(), ops[k - 1]
        assert repair(root, table) == 0, ops[k - 1]
        assert proper(root) == result, ops[k - 1]
        assert not (root / INTENT_FILE).exists()
        shutil.rmtree(root.parent)
