"""A rewrite that fails part-way puts every file back; extra bookkeeping files share the backup set."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from chk_builder import tree, write_checkpoint

from recovery.checkpoint import open_checkpoint, restore_backup, rewrite_offsets
from recovery.core.model import TopicPartition
from recovery.errors import InvalidInput

O0 = TopicPartition("orders", 0)


def checkpoint_proper(root: Path) -> dict[str, bytes]:
    """Every file but the tool's own ``_recovery/`` (where the backup sets live)."""
    return {rel: data for rel, data in tree(root).items() if not rel.startswith("_recovery/")}


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Files made immutable (chattr +i): even root cannot rename over them, a real write failure."""
    held: list[Path] = []
    yield held
    for path in held:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_failed_write_puts_back_the_files_already_replaced(tmp_path: Path, immutable: list[Path]) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=3, committed=2)
    before = tree(root)
    subprocess.run(["chattr", "+i", str(root / "offsets/2")], check=True)
    immutable.append(root / "offsets/2")

    # EPERM is a local disk/permission problem: bad input (exit 2), one line, nothing half-written.
    with pytest.raises(InvalidInput, match=r"rewriting failed .*the original files were put back") as failed:
        rewrite_offsets(open_checkpoint(str(root)), {1: {0: {O0: 15}}, 2: {0: {O0: 25}}}, force=True)

    # offsets/1 (written first) is back, byte for byte, with its .crc; no temp file is left behind.
    assert checkpoint_proper(root) == before
    assert "backup" in str(failed.value)


def test_extra_files_are_backed_up_with_the_offsets_and_restored_with_them(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "chk", batches=2, committed=2)
    for path in [*(root / "offsets").glob("*"), *(root / "commits").glob("*")]:
        os.utime(path, (0, 0))  # a stopped query's files: restore refuses to write under a live one
    before = tree(root)

    backup = rewrite_offsets(
        open_checkpoint(str(root)), {1: {0: {O0: 5}}}, extra={"_recovery/ids.json": b"{}\n"}, force=True
    )
    assert (root / "_recovery/ids.json").read_bytes() == b"{}\n"
    assert "_recovery/ids.json" in backup.absent

    restore_backup(str(root), backup.id, execute=True)
    assert checkpoint_proper(root) == before
    assert not (root / "_recovery/ids.json").exists()
