"""Ids the rig generates are ones Kafka's own tools accept."""

from __future__ import annotations

import base64
import uuid

from recovery.local.broker import kafka_uuid


def test_cluster_ids_never_start_with_a_dash_so_kafka_storage_does_not_read_them_as_options() -> None:
    # One id in 64 would start with "-" if drawn naively; 5000 draws make a miss all but impossible.
    ids = [kafka_uuid() for _ in range(5000)]
    assert not [text for text in ids if text.startswith("-")]
    for text in ids[:50]:
        assert len(text) == 22
        assert len(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")).bytes) == 16
