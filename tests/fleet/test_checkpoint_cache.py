"""``fleet serve`` reads a local checkpoint again only once something its reading saw changed
(recovery.validate.CheckpointCache; no broker: the cache sits before any Kafka request)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fleet_helpers import example_rig

from recovery.errors import CheckpointFormatError
from recovery.validate import CheckpointCache, Validation


def test_a_checkpoint_is_read_again_only_once_it_changed(tmp_path: Path) -> None:
    rig = example_rig()
    root = tmp_path / "chk"
    files = rig.checkpoint_files("orders", [[5, 5], [9, 9]])
    rig.write_local(root, files)
    # kept once its files are older than recent_s (a change within the clock's tick shows no new time)
    cache = CheckpointCache(recent_s=0.1)
    request = Validation(str(root))
    assert cache.prepared(request) is not cache.prepared(request)  # too new to be kept
    time.sleep(0.2)
    first = cache.prepared(request)
    assert first.view.batch_id == 2 and cache.prepared(request) is first  # nothing changed: kept

    # Spark commits a new batch: new files in offsets/ and commits/ (as Spark does: by rename)
    more = rig.checkpoint_files("orders", [[5, 5], [9, 9], [12, 12]])
    for rel in ("offsets/2", "commits/2"):
        (root / f"{rel}.tmp").write_bytes(more[rel])
        os.replace(root / f"{rel}.tmp", root / rel)
    time.sleep(0.2)
    second = cache.prepared(request)
    assert second is not first and second.view.batch_id == 3
    assert cache.prepared(request) is second

    # a file rewritten in place, same size: its times change
    text = (root / "offsets/2").read_bytes()
    (root / "offsets/2").write_bytes(text.replace(b'"0":12', b'"0":13'))
    time.sleep(0.2)
    third = cache.prepared(request)
    assert third is not second
    assert {tp.partition: o for s in third.view.sources for tp, o in s.start.items()} == {0: 13, 1: 12}

    # other parameters: read anew; a broken checkpoint: its error, and nothing kept
    assert cache.prepared(Validation(str(root), runway_warn_s=60)) is not third
    (root / "metadata").write_text("not json")
    with pytest.raises(CheckpointFormatError):
        cache.prepared(request)
    with pytest.raises(CheckpointFormatError):
        cache.prepared(request)
