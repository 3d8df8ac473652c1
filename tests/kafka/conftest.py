"""Helpers for the Kafka edge tests: a CLI runner, a Kafka config for the rig, transactional writes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaException, Producer

from recovery.kafka.config import KafkaConfig


@pytest.fixture
def kafka(bootstrap: str) -> KafkaConfig:
    return KafkaConfig(bootstrap, timeout_s=20)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def transactional(bootstrap: str) -> Iterator[Callable[..., Producer]]:
    """``transactional(txn_id)``: a transactional producer (initialised); all are closed at the end."""
    made: list[Producer] = []

    def make(txn_id: str) -> Producer:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "log_level": 0})
        producer.init_transactions(30)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        # Leave no transaction open (it would hold the partition's last stable offset back).
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(10)
