"""The topic ids a checkpoint's query has read, kept in ``<checkpoint>/_recovery/topic-ids.json``.

Spark ignores ``_recovery/``. A topic deleted and recreated gets a new id (KIP-516) while its offsets
may still look in range, so remembering the ids seen when the checkpoint was known to be healthy
(by ``repair --execute`` and the pre-start gate) lets a later ``validate`` tell the new topic from the
old one. Ids are kept in Kafka's own text form (URL-safe base64, as kafka-topics.sh prints them);
a record in confluent_kafka's standard base64 (written by earlier versions) is read as the same ids.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping

from recovery.checkpoint import Checkpoint, Issue, Level
from recovery.kafka.values import kafka_topic_id

TOPIC_IDS_FILE = "_recovery/topic-ids.json"

log = logging.getLogger(__name__)


def read_topic_ids(chk: Checkpoint) -> tuple[dict[str, str], tuple[Issue, ...]]:
    """The recorded ids by topic, and a warning if the record is damaged (never an error: it is our
    own bookkeeping, and must not block a recovery)."""
    data = chk.store.read(TOPIC_IDS_FILE)
    if data is None:
        return {}, ()
    try:
        recorded = json.loads(data)["topic_ids"]
        # Kafka's text form; a record written before ids were printed that way is read the same
        return {str(k): kafka_topic_id(str(v)) for k, v in recorded.items()}, ()
    except (ValueError, KeyError, TypeError, AttributeError):
        message = (
            f"{chk.store.display(TOPIC_IDS_FILE)} is unreadable: recreated topics cannot be detected "
            "by topic id; it is rewritten by the next `repair_checkpoint(execute=True)`"
        )
        return {}, (Issue(Level.WARNING, message),)


def topic_ids_file(
    chk: Checkpoint, ids: Mapping[str, str], by: str, now_ms: int
) -> tuple[dict[str, str], bytes]:
    """The record merged with ``ids``, and the file's new bytes."""
    merged = {**read_topic_ids(chk)[0], **ids}
    body = {"topic_ids": dict(sorted(merged.items())), "recorded_at_ms": now_ms, "by": by}
    return merged, (json.dumps(body, indent=2) + "\n").encode()


def record_topic_ids(chk: Checkpoint, ids: Mapping[str, str], by: str) -> dict[str, str]:
    """Remember the topic ids seen now (merged with earlier ones) under ``_recovery/``."""
    merged, data = topic_ids_file(chk, ids, by, int(time.time() * 1000))
    chk.store.write_atomic(TOPIC_IDS_FILE, data)
    log.info("%s: recorded topic ids of %s", chk.location, ", ".join(sorted(ids)) or "no topic")
    return merged
