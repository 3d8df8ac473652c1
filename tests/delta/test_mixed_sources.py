"""A checkpoint with a Kafka source and a Delta source: ``validate`` (through
``recovery.delta.api.delta_source_issues``) covers the Delta one too, or says it did not check it;
real Delta tables written by deltalake and a hand-made checkpoint (no JVM; the last test uses the
rig's broker for the Kafka source)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from recovery.checkpoint import Level
from recovery.cli import cli
from recovery.cli.flags import in_cli_words
from recovery.delta.api import delta_source_issues

# The batch ran now: the records below its position are older than it (no recreation evidence).
META = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000) + 60_000, "conf": {}})


def _table(path: Path, versions: int) -> str:
    for i in range(versions):
        write_deltalake(
            str(path),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.logRetentionDuration": "interval 0 seconds"},
        )
    table = DeltaTable(str(path))
    table.create_checkpoint()
    table.cleanup_metadata()  # versions 0-3 gone from the log
    return str(table.metadata().id)


def _mixed_checkpoint(path: Path, table_id: str, version: int, *, topic: str = "orders") -> None:
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text('{"id":"5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e01"}')
    delta = {
        "sourceVersion": 1,
        "reservoirId": table_id,
        "reservoirVersion": version,
        "index": -1,
        "isStartingVersion": False,
    }
    kafka = {topic: {"0": 5}}
    body = f"v1\n{META}\n{json.dumps(kafka)}\n{json.dumps(delta, separators=(',', ':'))}"
    (path / "offsets" / "0").write_text(body)
    (path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_delta_source_beside_kafka_is_judged_or_said_unchecked(tmp_path: Path) -> None:
    table = tmp_path / "t"
    table_id = _table(table, 5)
    chk = tmp_path / "chk"
    _mixed_checkpoint(chk, table_id, 2)

    (unchecked,) = delta_source_issues(str(chk))
    assert unchecked.level is Level.ERROR
    assert "Delta source 1 not checked" in unchecked.message
    assert f"`plan_delta_source({str(chk)!r}, tables={{'1': 'TABLE'}})`" in unchecked.message
    # the CLI's words for it
    assert "give --delta-table 1=TABLE, or run `stream-recovery delta-source validate" in in_cli_words(
        unchecked.message
    )

    (judged,) = delta_source_issues(str(chk), {"1": str(table)})
    assert judged.level is Level.ERROR
    # Only offsets/0: Spark rebuilds the snapshot of version 1, which the cleaned log cannot give.
    assert "SNAPSHOT_GONE" in judged.message
    assert "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE" in judged.message
    assert f"`repair_delta_source({str(chk)!r}, tables={{'1': {str(table)!r}}})`" in judged.message
    assert f"`stream-recovery delta-source repair {chk} --table 1={table}`" in in_cli_words(judged.message)


def test_a_healthy_delta_source_beside_kafka_is_info_and_kafka_only_has_none(tmp_path: Path) -> None:
    table = tmp_path / "t"
    table_id = _table(table, 5)
    chk = tmp_path / "chk"
    _mixed_checkpoint(chk, table_id, 5)  # the next version: nothing unread, nothing gone
    (ok,) = delta_source_issues(str(chk), {"1": str(table)})
    assert ok.level is Level.INFO
    # a first batch rebuilds the snapshot of version 4 (its checkpoint): 0 s of log retention
    assert ok.message.startswith(
        f"Delta source 1 ({table}): OK; runway due (delta.logRetentionDuration=0s: log cleanup may "
        "delete version 4 (to rebuild its snapshot)"
    )

    kafka_only = tmp_path / "k"
    (kafka_only / "offsets").mkdir(parents=True)
    (kafka_only / "commits").mkdir()
    (kafka_only / "metadata").write_text('{"id":"5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e02"}')
    (kafka_only / "offsets" / "0").write_text(f'v1\n{META}\n{{"orders":{{"0":5}}}}')
    assert delta_source_issues(str(kafka_only)) == ()


@pytest.mark.integration
def test_validate_covers_kafka_and_delta_sources_of_one_checkpoint(
    tmp_path: Path, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    topic = new_topic(partitions=1)
    produce(topic, 10, partitions=1)
    table = tmp_path / "t"
    table_id = _table(table, 5)
    broken, healthy = tmp_path / "broken", tmp_path / "healthy"
    _mixed_checkpoint(broken, table_id, 2, topic=topic)
    _mixed_checkpoint(healthy, table_id, 5, topic=topic)

    def validate(chk: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        args = ["validate", str(chk), "-b", bootstrap, "--no-runway", "--output", "json", *extra]
        result = CliRunner().invoke(cli, args)
        return result.exit_code, json.loads(result.stdout)

    code, body = validate(healthy)  # the Kafka source is fine; the Delta one was not checked
    assert code == 1 and [p["verdict"] for p in body["partitions"]] == ["OK"]
    assert any("Delta source 1 not checked" in i["message"] for i in body["issues"])
    code, body = validate(healthy, "--delta-table", f"1={table}")
    assert code == 0, body["issues"]
    code, body = validate(broken, "--delta-table", f"1={table}")
    assert code == 1
    assert any("DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE" in i["message"] for i in body["issues"])
