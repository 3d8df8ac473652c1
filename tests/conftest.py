"""Shared fixtures: the real rig (Kafka broker, Spark with the Kafka connector and Delta, an S3 API
server), unique topic names, record helpers, and the Spark checkpoint fixture corpus.

The broker and the SparkSession are session-scoped: started once, on first use, and stopped at the
end. Nothing is mocked; a test that needs a service gets the real one started here.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from recovery.errors import RecoveryError
from recovery.local import topics
from recovery.local.broker import LocalKafkaBroker, free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_ENV = "STREAM_RECOVERY_FIXTURES"


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Print the versions actually used at the start of the run."""
    from recovery.local.jars import versions

    try:
        return ["rig versions: " + ", ".join(f"{k} {v}" for k, v in versions().items())]
    except RecoveryError as exc:
        return [f"rig versions: unknown ({exc})"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


# -- Kafka --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def broker() -> Iterator[LocalKafkaBroker]:
    with LocalKafkaBroker() as running:
        yield running


@pytest.fixture(scope="session")
def bootstrap(broker: LocalKafkaBroker) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (Kafka allows [a-zA-Z0-9._-], 249 chars)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:80].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def new_topic(bootstrap: str, topic_name: str) -> Callable[..., str]:
    """``new_topic(partitions=3, config={...}, suffix="")`` creates a real topic and returns its name."""

    def create(partitions: int = 3, config: Mapping[str, str] | None = None, suffix: str = "") -> str:
        name = topic_name + suffix
        topics.create_topic(bootstrap, name, partitions, config)
        return name

    return create


@pytest.fixture
def produce(bootstrap: str) -> Callable[..., int]:
    """``produce(topic, count, partitions=3, start=0, timestamp_ms=None)``: keyed records k<i> -> v<i>."""

    def send(
        topic: str,
        count: int,
        *,
        partitions: int = 3,
        start: int = 0,
        timestamp_ms: int | None = None,
    ) -> int:
        records = topics.keyed_records(count, partitions=partitions, start=start, timestamp_ms=timestamp_ms)
        return topics.produce(bootstrap, topic, records)

    return send


# -- Spark --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from recovery.local.spark import local_spark

    session = local_spark("stream-recovery-tests")
    yield session
    session.stop()


# -- S3 -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 API server (moto in server mode, over HTTP on loopback)."""
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


# -- the Spark checkpoint corpus (../shared) -----------------------------------------------------


def fixture_corpus() -> Path | None:
    """The real-checkpoint corpus: $STREAM_RECOVERY_FIXTURES, else ../shared/fixtures/spark-checkpoints."""
    configured = os.environ.get(FIXTURES_ENV)
    path = Path(configured) if configured else REPO_ROOT.parent / "shared/fixtures/spark-checkpoints"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def spark_fixtures() -> Path:
    path = fixture_corpus()
    if path is None:
        # The one acceptable skip: the corpus lives outside the repository, beside the project.
        pytest.skip(
            f"Spark checkpoint corpus not found (set {FIXTURES_ENV} or place it at "
            "../shared/fixtures/spark-checkpoints)"
        )
    return path
