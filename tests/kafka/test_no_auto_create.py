"""On a cluster that creates topics on demand (``auto.create.topics.enable=true``, a common broker
setting), the toolkit never creates one: librdkafka's admin client is a producer, whose metadata
request for a topic by name would create it (the dead-leader retries ask for topics by name)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from recovery.kafka.admin import admin_for
from recovery.kafka.config import KafkaConfig
from recovery.local.broker import LocalKafkaBroker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def creating() -> Iterator[str]:
    with LocalKafkaBroker(config={"auto.create.topics.enable": "true"}) as broker:
        yield broker.bootstrap_servers


def test_asking_for_a_missing_topic_by_name_does_not_create_it(creating: str) -> None:
    client = admin_for(KafkaConfig(creating)).client
    answer = client.list_topics("never-created", timeout=10)
    assert answer.topics["never-created"].error is not None  # unknown, and left so
    for _ in range(6):  # a topic created on demand appears within a second or two
        time.sleep(0.5)
        assert "never-created" not in client.list_topics(timeout=10).topics
