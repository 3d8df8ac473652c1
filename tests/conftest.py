"""Shared fixtures: the real rig (Kafka broker, Spark with the Kafka connector and Delta, an S3 API
server), unique topic names, record helpers, and the Spark checkpoint fixture corpus.

The broker and the SparkSession are session-scoped: started once, on first use, and stopped at the
end. Nothing is mocked; a test that needs a service gets the real one started here, and is marked
``integration`` for it, so ``pytest -m "not integration"`` (``make check``) runs without any JVM.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
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


# -- the fast lane: `pytest -m "not integration"` (`make check`) ---------------------------------

# Fixtures that start a real service: a test that uses one (directly or through another fixture, e.g.
# `bootstrap`, `new_topic`, `kafka`, `job`, `s3`) needs the rig and is marked `integration`.
RIG_FIXTURES = frozenset({"broker", "spark", "s3_endpoint"})
# The Kafka edge's suites: marked `kafka`, run by `make test-kafka-matrix` on every broker version.
KAFKA_SUITES = frozenset({"kafka", "runway", "hold"})


def needs_rig(item: pytest.Item) -> bool:
    """Whether ``item`` lives in tests/integration or uses (transitively) a fixture that starts a service."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return "integration" in item.path.parts or bool(fixtures & RIG_FIXTURES)


def _line(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from recovery.local.jars import installed_spark_line

    for item in items:
        if needs_rig(item) and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)
        if KAFKA_SUITES & set(item.path.parts[-3:-1]) and "tests" in item.path.parts:
            item.add_marker(pytest.mark.kafka)
    # A test of a format or mode an older Spark line lacks is not run there (deselected: the matrix
    # says "not in this line", never "skipped" or "passed").
    since = [(i, _line(m.args[0])) for i in items if (m := i.get_closest_marker("spark_since"))]
    running = _line(installed_spark_line()) if since else ()
    older = [i for i, line in since if line > running]
    if older:
        config.hook.pytest_deselected(items=older)
        items[:] = [i for i in items if i not in older]


def _java_children(pid: int) -> set[int]:
    """Java processes descending from ``pid`` (a broker through setpriv, Spark's driver JVM)."""
    found: set[int] = set()
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # the task ended while we looked
            for child in map(int, children.read_text().split()):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                        found.add(child)
                found |= _java_children(child)
    return found


def _rig_started() -> tuple[int, bool, frozenset[int]]:
    """What says a service was started: brokers launched, Spark's JVM gateway up, java children alive."""
    context = sys.modules.get("pyspark.context")
    gateway = context is not None and context.SparkContext._gateway is not None
    return LocalKafkaBroker.launched, gateway, frozenset(_java_children(os.getpid()))


def _refuse_rig_in_fast_lane(item: pytest.Item, phase: str, before: tuple[int, bool, frozenset[int]]) -> None:
    brokers, gateway, jvms = _rig_started()
    started = [
        *(["a Kafka broker"] if brokers > before[0] else []),
        *(["Spark"] if gateway and not before[1] else []),
        *([f"a JVM (pid {', '.join(map(str, sorted(jvms - before[2])))})"] if jvms - before[2] else []),
    ]
    if started:
        pytest.fail(
            f"{item.nodeid} started {' and '.join(started)} during {phase} but is not marked integration: "
            f"use the {'/'.join(sorted(RIG_FIXTURES))} fixtures or mark it @pytest.mark.integration",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Keep the fast lane honest: a test not marked `integration` that starts a broker, Spark or any
    JVM anyway (in a fixture of its own, or in its body: see pytest_runtest_call) fails, saying why."""
    if item.get_closest_marker("integration") is not None:
        return (yield)
    before = _rig_started()
    yield
    _refuse_rig_in_fast_lane(item, "setup", before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("integration") is not None:
        return (yield)
    before = _rig_started()
    yield
    _refuse_rig_in_fast_lane(item, "the test", before)


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
