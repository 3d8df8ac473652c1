"""``delta-source validate|repair`` on real Delta tables written by deltalake and a hand-made
checkpoint (fast, no JVM); Spark's side of the same cases is in test_delta_source_spark.py."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from recovery.checkpoint import list_backups
from recovery.delta.log import read_table_log

REPO = Path(__file__).resolve().parents[2]
META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _table(path: Path, versions: int, *, clean: bool) -> str:
    """A table with ``versions`` appends (versions 0..versions-1); log cleaned up to a checkpoint."""
    for i in range(versions):
        write_deltalake(
            str(path),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.logRetentionDuration": "interval 0 seconds"},
        )
    table = DeltaTable(str(path))
    if clean:
        table.create_checkpoint()
        table.cleanup_metadata()
    return str(table.metadata().id)


def _checkpoint(path: Path, table_id: str, versions: list[int], committed: int) -> None:
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text('{"id":"5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e01"}')
    for batch, version in enumerate(versions):
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
        (path / "offsets" / str(batch)).write_text(f"v1\n{META}\n{line}")
        if batch <= committed:
            (path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_log_listing_after_cleanup(tmp_path: Path) -> None:
    _table(tmp_path / "t", 5, clean=True)
    log = read_table_log(str(tmp_path / "t"), files_from=0)
    assert (log.latest, log.commits, log.checkpoints) == (4, (4,), (4,))
    assert (log.earliest_change, log.earliest_snapshot) == (4, 4)
    assert log.files[4].added == 1 and log.files[4].missing == 0


def test_validate_and_repair(tmp_path: Path, cli: Callable[..., Any]) -> None:
    table_id = _table(tmp_path / "t", 5, clean=True)
    chk = tmp_path / "chk"
    _checkpoint(chk, table_id, [2, 3], committed=1)
    table = str(tmp_path / "t")

    validated = cli("delta-source", "validate", str(chk), "--table", table, "--output", "json")
    assert validated.exit_code == 1
    [finding] = json.loads(validated.stdout)["findings"]
    assert (finding["verdict"], finding["needed_from"], finding["resume_from"], finding["versions_lost"]) == (
        "VERSIONS_GONE",
        2,
        3,
        1,
    )

    original = (chk / "offsets" / "1").read_bytes()
    done = cli(
        "delta-source", "repair", str(chk), "--table", table, "--execute", "--force", "--output", "json"
    )
    assert done.exit_code == 0, done.stderr
    body = json.loads(done.stdout)
    assert [(m["file"], m["new"]["reservoirVersion"]) for m in body["moves"]] == [
        ("offsets/0", 4),
        ("offsets/1", 4),
    ]
    assert body["losses"] == [
        {
            "source_id": "0",
            "versions_lost": 1,
            "versions_skipped": 0,
            "files_skipped": 0,
            "reads_snapshot": None,
            "rereads": False,
            "lost_unknown": False,
            "lost_from": None,
        }
    ]
    assert (chk / "offsets" / "1").read_bytes() == original.replace(
        b'"reservoirVersion":3', b'"reservoirVersion":4'
    )
    [backup] = list_backups(str(chk))
    assert backup.id == body["backup_id"] and {f.path for f in backup.files} >= {"offsets/0", "offsets/1"}
    assert cli("delta-source", "validate", str(chk), "--table", table).exit_code == 0
    again = cli("delta-source", "repair", str(chk), "--table", table)
    assert again.exit_code == 0 and "% nothing to change" in again.stderr


def test_version_budget_refuses_and_writes_nothing(tmp_path: Path, cli: Callable[..., Any]) -> None:
    table_id = _table(tmp_path / "t", 5, clean=True)
    chk = tmp_path / "chk"
    _checkpoint(chk, table_id, [1, 2], committed=0)  # batch 1 re-runs from version 1
    before = (chk / "offsets" / "0").read_bytes()
    refused = cli(
        "delta-source",
        "repair",
        str(chk),
        "--table",
        str(tmp_path / "t"),
        "--max-versions",
        "2",
        "--execute",
        "--force",
    )
    assert refused.exit_code == 1
    assert "the plan loses or skips 3 versions, over the budget of 2" in refused.stderr
    assert (chk / "offsets" / "0").read_bytes() == before


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--table", "s-1=/x", "--table", "0=/y"], 2, "expected SOURCE_ID=TABLE for each of several tables"),
        (["--table", "/lake/env=prod/t"], 2, "/lake/env=prod/t: not a Delta table"),
        (["--table", "/nonexistent/table"], 2, "not a Delta table"),
        (["--table", "7=/x"], 2, "no Delta source 7 (Delta sources: 0)"),
    ],
    ids=["bad-table-option", "path-with-equals-sign", "no-table", "unknown-source"],
)
def test_bad_input_exits_2(
    tmp_path: Path, cli: Callable[..., Any], args: list[str], code: int, message: str
) -> None:
    table_id = _table(tmp_path / "t", 1, clean=False)
    _checkpoint(tmp_path / "chk", table_id, [1], committed=0)
    result = cli("delta-source", "validate", str(tmp_path / "chk"), *args)
    assert result.exit_code == code
    assert message in result.stderr + result.stdout


def test_cli_modules_import_nothing_heavy() -> None:
    code = (
        "import sys, recovery.cli.delta, recovery.cli.ledger, recovery.delta.api\n"
        "print(sorted(m for m in ('deltalake', 'pyarrow', 'pyspark', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["model.py", "source.py"])
def test_planning_core_does_no_io(module: str) -> None:
    tree = ast.parse((REPO / "recovery" / "delta" / module).read_text())
    imported = {
        ((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    allowed = {"__future__", "collections", "dataclasses", "enum", "json", "typing", "recovery"}
    assert imported <= allowed
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} - {None}
    assert {m for m in modules if m and m.startswith("recovery")} <= {
        "recovery.core.model",
        "recovery.errors",
        "recovery.checkpoint.format",
        "recovery.delta.model",
    }


def test_a_checkpoint_written_just_now_looks_in_use(tmp_path: Path, cli: Callable[..., Any]) -> None:
    table_id = _table(tmp_path / "t", 3, clean=True)
    _checkpoint(tmp_path / "chk", table_id, [1, 2], committed=1)
    result = cli("delta-source", "repair", str(tmp_path / "chk"), "--table", str(tmp_path / "t"), "--execute")
    assert result.exit_code == 1
    assert "the query looks like it is running" in result.stderr
    assert list_backups(str(tmp_path / "chk")) == ()


def test_a_table_path_with_an_equals_sign_is_a_path(tmp_path: Path, cli: Callable[..., Any]) -> None:
    table_id = _table(tmp_path / "env=prod" / "t", 1, clean=False)
    _checkpoint(tmp_path / "chk", table_id, [1], committed=0)
    result = cli(
        "delta-source", "validate", str(tmp_path / "chk"), "--table", str(tmp_path / "env=prod" / "t")
    )
    assert result.exit_code == 0, result.stderr


def test_validate_refuses_a_checkpoint_spark_cannot_restart(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Malformed input, as for every command: one line naming the file and what is wrong, exit 2."""
    table_id = _table(tmp_path / "t", 3, clean=False)
    sink = tmp_path / "sink"
    write_deltalake(str(sink), pa.table({"id": [0]}))
    chk = tmp_path / "chk"
    _checkpoint(chk, table_id, [1, 2], committed=1)
    (chk / "commits" / "5").write_text('v1\n{"nextBatchWatermarkMs":0}')  # newer than offsets/1
    table = str(tmp_path / "t")
    result = cli("delta-source", "validate", str(chk), "--table", table, "--sink", str(sink))
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: {chk}/commits/5 is newer than the latest offsets/1: the logs disagree; "
        "Spark cannot restart from it\n"
    )
    refused = cli(
        "delta-source", "repair", str(chk), "--table", table, "--strategy", "latest", "--execute", "--force"
    )
    assert refused.exit_code == 2
    assert refused.stderr == result.stderr
    assert list_backups(str(chk)) == ()


def test_max_versions_help_says_what_it_counts(cli: Callable[..., Any]) -> None:
    help_text = " ".join(cli("delta-source", "repair", "--help").stdout.split())
    assert "Refuse a plan whose versions lost plus versions skipped exceed N." in help_text


def test_repair_refuses_while_the_sink_would_skip_the_batches(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """As `repair` does for Kafka offsets: the guard is the library's, `--accept-sink-skip` lifts it."""
    from deltalake import CommitProperties, Transaction

    table_id = _table(tmp_path / "t", 5, clean=True)
    chk = tmp_path / "chk"
    _checkpoint(chk, table_id, [2, 3], committed=1)  # Spark runs batch 2 next
    sink = tmp_path / "sink"
    query_id = "5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e01"
    write_deltalake(
        str(sink),
        pa.table({"id": [0]}),
        commit_properties=CommitProperties(app_transactions=[Transaction(query_id, 3)]),
    )
    args = ("delta-source", "repair", str(chk), "--table", str(tmp_path / "t"), "--sink", str(sink))
    refused = cli(*args, "--execute", "--force")
    assert refused.exit_code == 1, refused.stderr
    assert "DeltaSink skips batches 2-3" in refused.stderr and "--accept-sink-skip" in refused.stderr
    assert list_backups(str(chk)) == ()
    done = cli(*args, "--execute", "--force", "--accept-sink-skip")
    assert done.exit_code == 0, done.stderr
    assert "% warning: Delta sink" in done.stderr
    assert len(list_backups(str(chk))) == 1
