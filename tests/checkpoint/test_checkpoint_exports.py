"""``recovery.checkpoint`` exports exactly its public names, sorted."""

from __future__ import annotations

import recovery.checkpoint


def test_all_is_sorted_and_importable() -> None:
    names = recovery.checkpoint.__all__
    assert names == sorted(names)
    assert all(hasattr(recovery.checkpoint, name) for name in names)
    public = {n for n in vars(recovery.checkpoint) if not n.startswith("_")}
    modules = {"crc", "format", "reader", "restart", "rewrite", "store"}
    assert public - modules == set(names)
