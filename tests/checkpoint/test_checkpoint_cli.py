"""``stream-recovery checkpoint show|backups|restore``: exit codes, exact messages, JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from chk_builder import QUERY_ID, checkpoint_files, tree, write_checkpoint

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.cli import main
from recovery.model import TopicPartition


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_show_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=3, committed=2)
    code, out, err = run(capsys, "checkpoint", "show", str(root), "--output", "json")
    assert (code, err) == (0, "")
    info = json.loads(out)
    assert list(info) == [
        "checkpoint",
        "query_id",
        "offsets",
        "commits",
        "batch",
        "batch_timestamp_ms",
        "batch_watermark_ms",
        "sources",
        "next_run",
        "issues",
        "files",
    ]
    assert info["query_id"] == QUERY_ID
    assert info["offsets"] == {"batches": [0, 1, 2], "latest": 2}
    assert info["commits"] == {"batches": [0, 1], "latest": 1}
    assert info["sources"] == [
        {
            "source_id": "0",
            "kind": "kafka",
            "offsets": [{"topic": "orders", "partition": p, "offset": 30} for p in range(3)],
            "text": None,
            "initial_offsets": [{"topic": "orders", "partition": p, "offset": 0} for p in range(3)],
        }
    ]
    assert info["next_run"] == {
        "action": "rerun_batch",
        "batch_id": 2,
        "start": "offsets/1",
        "end": "offsets/2",
    }
    assert info["files"] == [
        {"path": "commits/1", "size": 29, "crc": "ok"},
        {"path": "metadata", "size": 45, "crc": "ok"},
        {"path": "offsets/2", "size": len(checkpoint_files()["offsets/2"]), "crc": "ok"},
        {"path": "sources/0/0", "size": 34, "crc": "ok"},
    ]


def test_show_a_chosen_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    code, out, _ = run(capsys, "checkpoint", "show", str(root), "--batch", "0", "--output", "json")
    info = json.loads(out)
    assert code == 0 and info["batch"] == 0
    assert {r["offset"] for r in info["sources"][0]["offsets"]} == {10}


def test_show_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:5] == [
        f"checkpoint  {root}",
        f"query id    {QUERY_ID}",
        "offsets     0..2 (3 files), latest 2",
        "commits     0..2 (3 files), latest 2",
        "next run    batch 3 starts from offsets/2; its end is read fresh from the source",
    ]
    assert "sources in offsets/2" in out
    rows = [line for line in lines if "orders" in line]
    assert len(rows) == 3 and all(" 30 " in row and " 0 " in row for row in rows)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"offsets/2": b"v9\n{}\n1"}, "offsets/2: unsupported log version v9 (this tool reads up to v2)"),
        ({"offsets/2": b"v1\n{}\n{"}, "offsets/2: line 3 is not JSON (column 2: Expecting property name"),
        (
            {"offsets/2": b'v1\n{}\n{"orders":{"0":-1}}'},
            "offsets/2: line 3: offset of orders [0] is negative (-1)",
        ),
        ({"offsets/2": b"v1\n{}\n\x001"}, "offsets/2: NUL byte at offset 6 where none belongs"),
        ({"offsets/2": b"v1\n{}\n\xc3("}, "offsets/2: not UTF-8 (byte 0xc3 at offset 6)"),
        ({"offsets/2": b""}, "offsets/2: empty file (truncated write?)"),
        ({"commits/2": b"v7\n{}"}, "commits/2: unsupported log version v7 (this tool reads up to v3)"),
        (
            {"offsets/.2.crc": b"crc\x00\x00\x00\x02\x00\x00\x00\x00\x00"},
            "offsets/2: does not match its checksum",
        ),
        ({"offsets/.2.crc": b"nope"}, "offsets/.2.crc: not a Hadoop checksum file"),
        ({"sources/0/0": b'\x00v2\n{"orders":{"0":0}}'}, "sources/0/0: unsupported log version v2"),
    ],
    ids=[
        "unknown-version",
        "bad-json",
        "negative-offset",
        "nul-byte",
        "not-utf8",
        "empty",
        "commit-version",
        "wrong-crc",
        "bad-crc-file",
        "initial-version",
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, bytes], message: str
) -> None:
    chk_files = checkpoint_files()
    if not any(k.endswith(".crc") for k in files):
        chk_files = {k: v for k, v in chk_files.items() if not k.endswith(".crc")}
    root = write_checkpoint(tmp_path / "chk", {**chk_files, **files})
    before = tree(root)
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {root}/{message}") and err.count("\n") == 1
    assert tree(root) == before


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda r: None, "{r}: does not exist; no checkpoint here"),
        (lambda r: r.mkdir(), "{r}: is empty; no checkpoint here"),
        (lambda r: write_checkpoint(r, {"offsets/0": b"v1\n{}\n1"}), "{r}/metadata: missing"),
        (lambda r: write_checkpoint(r).joinpath("offsets/3").mkdir(), "{r}/offsets/3: is a directory"),
    ],
    ids=["missing", "empty", "no-metadata", "directory"],
)
def test_not_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: object, message: str
) -> None:
    root = tmp_path / "chk"
    setup(root)  # type: ignore[operator]
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert (code, out) == (2, "")
    assert err.startswith("Error: " + message.format(r=root)) and err.count("\n") == 1


def test_backups_and_restore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    original = tree(root)
    backup = rewrite_offsets(open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}})

    code, out, _ = run(capsys, "checkpoint", "backups", str(root), "--output", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["id"], row["reason"], row["files"], row["absent"]) == (
        backup.id,
        "rewrite-offsets",
        ["offsets/2", "offsets/.2.crc"],
        [],
    )
    code, out, _ = run(capsys, "checkpoint", "backups", str(root))
    assert (code, out) == (0, f"{backup.id}  {backup.created}  rewrite-offsets  offsets/2 offsets/.2.crc\n")

    rewritten = tree(root)
    code, out, err = run(capsys, "checkpoint", "restore", str(root))
    assert (code, out) == (0, "would restore offsets/2\nwould restore offsets/.2.crc\n")
    assert err == "dry run: nothing was written; add --execute to restore\n"
    assert tree(root) == rewritten

    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--backup", backup.id, "--execute")
    assert (code, out) == (0, "restored offsets/2\nrestored offsets/.2.crc\n")
    assert err.startswith("the previous files were backed up as ")
    assert {k: v for k, v in tree(root).items() if not k.startswith("_recovery/")} == original

    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--backup", "nope")
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {root}: no backup 'nope' (have: ")


def test_restore_without_backups_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--execute")
    assert (code, out, err) == (1, "", f"Error: {root}: no backups found\n")


def test_cli_does_not_import_spark_or_arrow() -> None:
    code = (
        "import sys; from recovery.cli import cli; "
        "bad = [m for m in ('pyspark', 'pyarrow', 'pandas', 'deltalake') if m in sys.modules]; "
        "print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
