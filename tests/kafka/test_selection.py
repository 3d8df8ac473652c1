"""Which selections need the cluster's topic listing (``recovery.kafka.selection``; pure)."""

from __future__ import annotations

import pytest

from recovery.core.specs import parse_topic_partitions
from recovery.kafka.selection import exact_names


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("orders", {"orders"}),
        ("orders:0-3", {"orders"}),
        ("orders,billing_v2:1", {"orders", "billing_v2"}),
        ("orders.eu", None),  # '.' is a regex: it also matches orders-eu
        ("orders-.*", None),
        (":1", None),  # every topic
    ],
)
def test_only_literal_names_skip_the_topic_listing(spec: str, names: set[str] | None) -> None:
    found = exact_names(parse_topic_partitions(spec))

    assert found == (frozenset(names) if names is not None else None)
