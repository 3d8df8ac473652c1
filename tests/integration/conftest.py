from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from streaming_job import Job


@pytest.fixture
def job(spark: SparkSession, bootstrap: str, tmp_path: Path) -> Callable[..., Job]:
    """``job(topic_or_topics, **kafka_source_options)``: a streaming job rooted in this test's tmp dir."""

    def make(topic: str | list[str], **options: str) -> Job:
        return Job(spark, bootstrap, topic, tmp_path, dict(options))

    return make
