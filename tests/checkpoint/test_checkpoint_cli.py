"""``stream-recovery checkpoint show|backups|restore``: exit codes, exact messages, JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from chk_builder import META, QUERY_ID, checkpoint_files, tree, write_checkpoint

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.cli import main
from recovery.core.model import TopicPartition


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
        {"path": "offsets/1", "size": len(checkpoint_files()["offsets/1"]), "crc": "ok"},
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
    assert code == 0
    assert out == (
        "SOURCE  KIND   TOPIC   PARTITION  OFFSET  INITIAL\n"
        "0       kafka  orders          0      30  0\n"
        "0       kafka  orders          1      30  0\n"
        "0       kafka  orders          2      30  0\n"
    )
    assert err == (
        f"% checkpoint {root} (query {QUERY_ID})\n"
        "% offsets/ 0..2 (3 files); commits/ 0..2 (3 files)\n"
        "% sources of batch 2 (offsets/2, batch timestamp 2026-11-22T06:00:12.050Z)\n"
        "% next run: batch 3 starts from offsets/2; its end is read fresh from the source\n"
        "% read commits/2: 29 bytes, .crc ok\n"
        "% read metadata: 45 bytes, .crc ok\n"
        f"% read offsets/1: {len(checkpoint_files()['offsets/1'])} bytes, .crc ok\n"
        f"% read offsets/2: {len(checkpoint_files()['offsets/2'])} bytes, .crc ok\n"
        "% read sources/0/0: 34 bytes, .crc ok\n"
    )


def test_show_a_kafka_and_a_rate_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = checkpoint_files(batches=1, committed=0, crc=False)
    files["offsets/0"] = f'v1\n{META}\n{{"orders":{{"1":5}}}}\n7'.encode()
    root = write_checkpoint(tmp_path / "chk", files)
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert code == 0
    assert out == (
        "SOURCE  KIND    TOPIC   PARTITION  OFFSET  INITIAL  TEXT\n"
        "0       kafka   orders          1       5  0\n"
        "1       opaque                                      7\n"
    )
    assert "% next run: batch 0 runs from the initial offsets (sources/<i>/0) to offsets/0\n" in err


def test_show_exits_2_when_spark_would_refuse_to_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # offsets/2 alone (0 and 1 gone, no gap between batches on disk): Spark needs offsets/1
    files = checkpoint_files(committed=1)
    files = {k: v for k, v in files.items() if not k.startswith("offsets/") or k.endswith("2")}
    root = write_checkpoint(tmp_path / "chk", files)
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert (code, out) == (2, "")
    assert err == (
        f"Error: {root}/offsets/1 is missing: Spark needs it to restart from batch 2 "
        "(The offset log for batch 1 doesn't exist); Spark cannot restart from it\n"
    )
    code, out, _ = run(capsys, "checkpoint", "show", str(root), "--output", "json")
    assert (code, out) == (2, "")


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
    # Spark reads sources/0/0 only for a batch with no start offset: batch 0, its commit lost
    first = "sources/0/0" in files
    chk_files = checkpoint_files(batches=1, committed=0) if first else checkpoint_files()
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
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {TopicPartition("orders", 0): 1}}}, force=True
    )

    code, out, err = run(capsys, "checkpoint", "backups", str(root), "--output", "json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        {
            "id": backup.id,
            "created": backup.created,
            "reason": "rewrite-offsets",
            "files": ["offsets/2", "offsets/.2.crc"],
            "absent": [],
            "location": f"{root}/_recovery/backups/{backup.id}",
        }
    ]
    code, out, err = run(capsys, "checkpoint", "backups", str(root))
    id_width, created_width = len(backup.id), len(backup.created)
    assert (code, err) == (0, "")
    assert out == (
        f"{'ID'.ljust(id_width)}  {'CREATED'.ljust(created_width)}  REASON           "
        "FILES                     ABSENT\n"
        f"{backup.id}  {backup.created}  rewrite-offsets  offsets/2 offsets/.2.crc\n"
    )

    rewritten = tree(root)
    table = "PATH            CHANGE\noffsets/2       restore\noffsets/.2.crc  restore\n"
    code, out, err = run(capsys, "checkpoint", "restore", str(root))
    assert (code, out) == (1, table)  # a dry run with changes pending, as repair's
    assert err == f"% dry run of backup {backup.id}: nothing was written; add --execute to restore\n"
    assert tree(root) == rewritten

    code, out, err = run(
        capsys, "checkpoint", "restore", str(root), "--backup", backup.id, "--execute", "--force"
    )
    assert (code, out) == (0, table)
    assert err.startswith(f"% restored backup {backup.id}; the previous files were backed up as ")
    assert {k: v for k, v in tree(root).items() if not k.startswith("_recovery/")} == original

    code, out, err = run(
        capsys, "checkpoint", "restore", str(root), "--backup", backup.id, "--output", "json"
    )
    assert code == 0  # nothing left to restore
    assert json.loads(out) == {
        "backup": backup.id,
        "executed": False,
        "written": [],
        "removed": [],
        "unchanged": ["offsets/2", "offsets/.2.crc"],
        "safety_backup": None,
    }
    assert err == f"% nothing to restore: the files already match backup {backup.id}\n"

    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--backup", "nope")
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {root}: no backup 'nope' (have: ")


def test_backups_of_a_checkpoint_without_any(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    code, out, err = run(capsys, "checkpoint", "backups", str(root))
    assert (code, out, err) == (0, "ID  CREATED  REASON  FILES  ABSENT\n", f"% no backups of {root}\n")
    code, out, err = run(capsys, "checkpoint", "backups", str(root), "--output", "json")
    assert (code, out, err) == (0, "[]\n", "")


def test_restore_without_backups_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk")
    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--execute")
    assert (code, out, err) == (1, "", f"Error: {root}: no backups found\n")


@pytest.mark.parametrize("command", ["backups", "restore"])
def test_no_checkpoint_at_the_path_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    root = tmp_path / "nope"
    code, out, err = run(capsys, "checkpoint", command, str(root))
    assert (code, out, err) == (2, "", f"Error: {root}: does not exist; no checkpoint here\n")
    assert not root.exists()


def test_cli_does_not_import_spark_or_arrow() -> None:
    code = (
        "import sys; from recovery.cli import cli; "
        "bad = [m for m in ('pyspark', 'pyarrow', 'pandas', 'deltalake') if m in sys.modules]; "
        "print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_validate_names_a_missing_checkpoint_before_bad_client_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # validate starts its Kafka client early (it connects while the rest is imported): bad client
    # settings still come second, as the checkpoint is read first.
    root = tmp_path / "nope"
    code, out, err = run(capsys, "validate", str(root), "-b", "127.0.0.1:1", "-X", "bogus.prop=1")
    assert (code, out, err) == (2, "", f"Error: {root}: does not exist; no checkpoint here\n")
    root.mkdir()
    write_checkpoint(root)
    code, out, err = run(capsys, "validate", str(root), "-b", "127.0.0.1:1", "-X", "bogus.prop=1")
    assert (code, out) == (2, "") and err.startswith("Error: Kafka client settings are invalid")
