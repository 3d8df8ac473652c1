"""A streaming job under test, and helpers shared by the end-to-end tests: run a real Kafka -> Delta
query, copy it to restart without repair, call the CLI, read the Delta table's rows."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from recovery.cli import cli
from recovery.local.pipeline import run_once, start_kafka_to_delta
from recovery.local.spark import error_conditions, failure_conditions

NOW = int(time.time()) * 1000


@dataclass
class Job:
    """One streaming job under test: its topic(s), checkpoint and Delta table."""

    spark: SparkSession
    bootstrap: str
    topic: str | list[str]
    root: Path
    options: dict[str, str]
    # start_kafka_to_delta's further arguments, kept by copies (source_names, writer_options)
    start_args: dict[str, Any] = field(default_factory=dict)

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def table(self) -> Path:
        return self.root / "table"

    def _arguments(self, **extra: Any) -> dict[str, Any]:
        """start_kafka_to_delta's keyword arguments for this job; ``extra`` overrides ``start_args``."""
        return dict(
            bootstrap=self.bootstrap,
            topic=self.topic,
            table=str(self.table),
            checkpoint=str(self.checkpoint),
            options=self.options,
            **{**self.start_args, **extra},
        )

    def run(self, **extra: Any) -> None:
        """Run until everything available now is processed."""
        run_once(self.spark, **self._arguments(**extra))

    def start(self, **extra: Any) -> StreamingQuery:
        """Start the query and return it, running (``processing_time=...`` keeps it running)."""
        return start_kafka_to_delta(self.spark, **self._arguments(**extra))

    def rows(self) -> list[tuple[str, int, int]]:
        """(topic, partition, offset) of every row, sorted; duplicates kept."""
        frame = self.spark.read.format("delta").load(str(self.table))
        return sorted((r.topic, r.partition, r.offset) for r in frame.collect())

    def copy(self, name: str) -> Job:
        """A copy of checkpoint and table, to restart without repair and leave the original as it was."""
        twin = Job(self.spark, self.bootstrap, self.topic, self.root / name, self.options, self.start_args)
        shutil.copytree(self.checkpoint, twin.checkpoint)
        shutil.copytree(self.table, twin.table)
        return twin

    def lenient(self, name: str) -> Job:
        """A copy restarted with failOnDataLoss=false: what Spark silently skips instead of failing."""
        twin = self.copy(name)
        twin.options = {**self.options, "failOnDataLoss": "false"}
        return twin

    def uncommit(self, batch: int) -> None:
        """Remove commits/<batch>: a crash after the sink committed the batch, before Spark did."""
        (self.checkpoint / "commits" / str(batch)).unlink()
        (self.checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)

    def restart_conditions(self) -> set[str]:
        """Restart; return the source's error condition (the deepest in the cause chain, below
        STREAM_FAILED and task-failure wrappers; on Spark 3.5 the one its message is), or nothing if
        the query ran."""
        try:
            self.run()
        except StreamingQueryException as exc:
            return {failure_conditions(error_conditions(exc))[-1]}
        return set()

    def restart_failure(self) -> list[tuple[str, str | None, str]]:
        """Restart; return the failure's cause chain (Java class, condition, message)."""
        try:
            self.run()
        except StreamingQueryException as exc:
            return error_conditions(exc)
        raise AssertionError("the query ran")

    def cli(self, *args: str, expect: int) -> dict[str, Any]:
        result = CliRunner().invoke(
            cli, [*args, str(self.checkpoint), "-b", self.bootstrap, "--output", "json"]
        )
        # An exception escaping the command also exits 1 here (no `run` boundary): never an answer.
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        assert not escaped and result.exit_code == expect, (result.exit_code, result.output, result.exception)
        return json.loads(result.stdout)

    def validate(self, *args: str, expect: int) -> dict[str, Any]:
        return self.cli("validate", *args, expect=expect)

    def repair(self, *args: str, expect: int = 0) -> dict[str, Any]:
        return self.cli("repair", *args, "--execute", "--active-within", "0", expect=expect)


def offsets(topic: str, per_partition: dict[int, Iterable[int]]) -> list[tuple[str, int, int]]:
    return sorted((topic, p, o) for p, offs in per_partition.items() for o in offs)


def verdicts(report: dict[str, Any]) -> dict[tuple[str, int], tuple[str, str | None, int]]:
    return {
        (r["topic"], r["partition"]): (r["verdict"], r["spark_error"], r["records_lost"])
        for r in report["partitions"]
    }


def predicted(report: dict[str, Any]) -> set[str]:
    return {r["spark_error"] for r in report["partitions"] if r["spark_error"]}


def tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in path.rglob("*")
        if p.is_file()
    }
