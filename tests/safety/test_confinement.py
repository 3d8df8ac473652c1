"""Restore writes and removes only plain relative paths inside the checkpoint, from a manifest it
validated; a ``_recovery`` (or ``_recovery/backups``) symlink is refused unless the backup directory
is named explicitly with --backup-dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from chk_builder import checkpoint_files, tree, write_checkpoint
from stopped import stopped

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.checkpoint.recovery_dir import LAST_WRITE_FILE
from recovery.cli import main
from recovery.core.model import TopicPartition
from recovery.errors import InvalidInput

O0 = TopicPartition("orders", 0)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def everything(top: Path) -> dict[str, object]:
    return {
        str(p.relative_to(top)): (
            os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
        )
        for p in sorted(top.rglob("*"))
    }


def with_backup(tmp_path: Path) -> tuple[Path, Path]:
    root = stopped(write_checkpoint(tmp_path / "chk", checkpoint_files(batches=3, committed=2)))
    backup = rewrite_offsets(open_checkpoint(str(root)), {2: {0: {O0: 25}}}, force=True)
    return root, root / "_recovery/backups" / backup.id


HOSTILE = [
    "../outside",
    "../../etc/passwd",
    "/tmp/absolute",
    "offsets/../../outside",
    "./offsets/2",
    "offsets//2",
    "offsets/2/",
    "_recovery/intent.json",
    "_recovery/backups/x/manifest.json",
    "s3:/bucket/x",
    "offsets\\2",
    "",
]


@pytest.mark.parametrize("where", ["files", "absent"])
@pytest.mark.parametrize("path", HOSTILE)
def test_a_manifest_naming_a_path_outside_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, where: str
) -> None:
    root, backup = with_backup(tmp_path)
    manifest = json.loads((backup / "manifest.json").read_text())
    if where == "files":
        manifest["files"].append({"path": path, "sha256": "0" * 64, "size": 1})
    else:
        manifest["absent"].append(path)
    (backup / "manifest.json").write_text(json.dumps(manifest))
    before = everything(tmp_path)
    code, out, err = run(capsys, "checkpoint", "restore", str(root), "--execute")
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {backup}/manifest.json: ") and err.count("\n") == 1, err
    assert repr(path) in err
    assert everything(tmp_path) == before


def test_a_path_through_a_symlinked_directory_is_not_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = with_backup(tmp_path)
    (root / "offsets").rename(root / "offsets-real")
    (root / "offsets").symlink_to("offsets-real")  # inside the checkpoint: Spark reads through it
    open_checkpoint(str(root))
    before = everything(tmp_path)
    code, _, err = run(capsys, "checkpoint", "restore", str(root), "--execute")
    assert code == 2 and "passes through the symlink offsets; not restoring" in err and err.count("\n") == 1
    assert everything(tmp_path) == before


@pytest.mark.parametrize("link", ["_recovery", "_recovery/backups"])
def test_a_symlinked_recovery_dir_is_refused_unless_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    root = write_checkpoint(tmp_path / "chk", checkpoint_files(batches=3, committed=2))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(elsewhere)
    before = everything(tmp_path)
    with pytest.raises(InvalidInput, match="is a symlink"):
        rewrite_offsets(open_checkpoint(str(root)), {2: {0: {O0: 25}}}, force=True)
    assert everything(tmp_path) == before
    for argv in (("checkpoint", "restore", str(root), "--execute"), ("checkpoint", "backups", str(root))):
        code, _, err = run(capsys, *argv)
        assert code == 2 and f"{root}/{link.split('/')[0]}" in err and "is a symlink" in err, err
        assert everything(tmp_path) == before


def test_an_explicit_backup_dir_may_be_a_symlink(tmp_path: Path) -> None:
    root = stopped(write_checkpoint(tmp_path / "chk", checkpoint_files(batches=3, committed=2)))
    real = tmp_path / "real-backups"
    real.mkdir()
    (tmp_path / "backups").symlink_to(real)
    before = tree(root)
    backup = rewrite_offsets(
        open_checkpoint(str(root)), {2: {0: {O0: 25}}}, backup_dir=str(tmp_path / "backups"), force=True
    )
    assert (real / backup.id / "manifest.json").exists()
    from recovery.checkpoint import restore_backup

    restore_backup(str(root), execute=True, backup_dir=str(tmp_path / "backups"))
    assert {k: v for k, v in tree(root).items() if k != LAST_WRITE_FILE} == before


def test_a_backup_dir_that_cannot_be_created_is_bad_input_and_nothing_is_written(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk", checkpoint_files(batches=3, committed=2))
    (tmp_path / "a-file").write_bytes(b"x")
    before = everything(tmp_path)
    with pytest.raises(InvalidInput) as raised:
        rewrite_offsets(
            open_checkpoint(str(root)),
            {2: {0: {O0: 25}}},
            backup_dir=str(tmp_path / "a-file/sub"),
            force=True,
        )
    message = str(raised.value)
    assert (
        message.startswith(str(tmp_path / "a-file/sub"))
        and "Not a directory" in message
        and "\n" not in message
    )
    assert everything(tmp_path) == before  # no intent record, no _recovery/, nothing half-written
