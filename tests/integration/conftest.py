from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from streaming_job import Job

from recovery.local.jars import versions


@pytest.fixture
def job(spark: SparkSession, bootstrap: str, tmp_path: Path) -> Callable[..., Job]:
    """``job(topic_or_topics, **kafka_source_options)``: a streaming job rooted in this test's tmp dir."""

    def make(topic: str | list[str], **options: str) -> Job:
        return Job(spark, bootstrap, topic, tmp_path, dict(options))

    return make


@pytest.fixture(scope="session", autouse=True)
def _versions_in_results(record_testsuite_property: Callable[[str, object], None]) -> None:
    """The versions this run used, as properties of a JUnit report (`make test-matrix`'s table)."""
    for name, value in versions().items():
        record_testsuite_property(name, value)
