"""``recovery.kafka`` exports exactly its public names (httpx's test_exported_members)."""

from __future__ import annotations

import recovery.kafka


def test_all_is_sorted_and_every_name_exists() -> None:
    assert recovery.kafka.__all__ == sorted(recovery.kafka.__all__)
    for name in recovery.kafka.__all__:
        assert hasattr(recovery.kafka, name), name


def test_public_names_are_exported() -> None:
    public = {name for name in vars(recovery.kafka) if not name.startswith("_")}
    modules = {"admin", "config", "groups", "read", "specs"}
    assert public - modules == set(recovery.kafka.__all__)
