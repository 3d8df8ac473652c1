"""The ledger job's protocol (recovery.delta.ingest) without Spark: the data table is written with
deltalake exactly as the job's Spark append records it (txn appId/version, ``userMetadata``), so
overlapping runs and crash recovery are specified on real Delta tables in a second.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from recovery.core.model import GateMode, TopicPartition
from recovery.delta import ingest
from recovery.delta.ingest import recover_crashed_batch
from recovery.delta.ledger_batches import META_KEY, append_ledger_rows, batch_rows, recorded_batch
from recovery.delta.ledger_conf import LedgerConf, make_conf
from recovery.delta.ledger_model import LedgerRow
from recovery.delta.ledger_table import append_rows, create_ledger, read_ledger
from recovery.errors import DeltaError, LedgerJobStopped, StateError
from recovery.kafka.config import KafkaConfig
from recovery.local import topics

REPO = Path(__file__).resolve().parents[2]
APP = "orders-hourly"


def _ledger(tmp_path: Path) -> LedgerConf:
    create_ledger(str(tmp_path / "ledger"))
    return make_conf({"table": str(tmp_path / "ledger"), "pipeline": APP})


def _rows(topic: str, batch: int, start: int, end: int) -> tuple[LedgerRow, ...]:
    return batch_rows(make_conf({"table": "/x", "pipeline": APP}), batch, topic, {"0": start}, {"0": end})


def _data_commit(table: Path, batch: int, start: int, end: int) -> None:
    """What the job's Spark append commits for a batch of partition 0."""
    record = {META_KEY: {"app_id": APP, "batch_id": batch, "start": {"0": start}, "end": {"0": end}}}
    write_deltalake(
        str(table),
        pa.table({"offset": list(range(start, end))}, schema=pa.schema([pa.field("offset", pa.int64())])),
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata={"userMetadata": json.dumps(record)},
            app_transactions=[Transaction(APP, batch)],
        ),
    )


def test_second_of_two_overlapping_runs_writes_no_ledger_rows(tmp_path: Path) -> None:
    """Runs A and B both read the ledger at version 0 as batch 0; A records [0, 10) first. B's data
    append was skipped by Delta (same txnVersion), so B recording its end 20 would lose [10, 20)."""
    conf = _ledger(tmp_path)
    read_at = read_ledger(conf).version
    append_ledger_rows(conf, 0, _rows("orders", 0, 0, 10), read_at=read_at)
    with pytest.raises(LedgerJobStopped, match="another run") as stopped:
        append_ledger_rows(conf, 0, _rows("orders", 0, 0, 20), read_at=read_at)
    assert isinstance(stopped.value, StateError) and "\n" not in str(stopped.value)
    assert read_ledger(conf).positions == {TopicPartition("orders", 0): 10}


def test_ledger_rows_need_the_ledger_txn_below_the_batch(tmp_path: Path) -> None:
    conf = _ledger(tmp_path)
    append_ledger_rows(conf, 0, _rows("orders", 0, 0, 10), read_at=read_ledger(conf).version)
    # Read after A's append (so the version matches), but batch 0 is already recorded.
    with pytest.raises(LedgerJobStopped, match="already records batch 0 of orders-hourly"):
        append_ledger_rows(conf, 0, _rows("orders", 0, 0, 20), read_at=read_ledger(conf).version)
    assert read_ledger(conf).positions == {TopicPartition("orders", 0): 10}


def test_recorded_batch_lookup(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert recorded_batch(str(data), APP, 0) is None  # no data table yet: nothing recorded
    _data_commit(data, 0, 0, 10)
    assert (recorded_batch(str(data), APP, 0) or {}).get("end") == {"0": 10}
    assert recorded_batch(str(data), APP, 1) is None
    # A txn without the record: a one-line StateError, not a RuntimeError with a traceback.
    write_deltalake(
        str(data),
        pa.table({"offset": [99]}),
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction(APP, 1)]),
    )
    with pytest.raises(LedgerJobStopped, match="no commit records batch 1") as stopped:
        recorded_batch(str(data), APP, 1)
    assert isinstance(stopped.value, StateError) and "\n" not in str(stopped.value)


def test_an_unreadable_data_table_is_not_taken_for_a_missing_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _data_commit(data, 0, 0, 10)
    (data / "_delta_log" / f"{0:020d}.json").write_text("not json\n")
    with pytest.raises(DeltaError):
        recorded_batch(str(data), APP, 0)


@pytest.mark.integration
def test_a_crashed_batch_is_completed_before_the_gate_clamps(
    tmp_path: Path, bootstrap: str, new_topic: Callable[..., str], produce: Callable[..., int]
) -> None:
    """Batch 1 read [10, 30) into the data table, then the run died; retention then took 0-19. The
    gate must see the ledger at 30 (nothing lost), not clamp 10 -> 20 as batch 1 and re-read 20-29."""
    topic = new_topic(partitions=1)
    produce(topic, 40, partitions=1)
    conf, data = _ledger(tmp_path), tmp_path / "data"
    _data_commit(data, 0, 0, 10)
    append_ledger_rows(conf, 0, _rows(topic, 0, 0, 10), read_at=read_ledger(conf).version)
    _data_commit(data, 1, 10, 30)  # the crash: no ledger rows for batch 1
    topics.delete_records(bootstrap, topic, {0: 20})

    kafka = KafkaConfig(bootstrap, timeout_s=20)
    recovered = ingest.prepare_run(conf, kafka, topic=topic, data_table=str(data), gate=GateMode.CLAMP)
    assert recovered == 1
    state = read_ledger(conf)
    assert (state.positions, state.next_batch_id) == ({TopicPartition(topic, 0): 30}, 2)
    assert [e.written_by for e in state.entries] == ["ledger_ingest"]  # no correction row
    assert recover_crashed_batch(conf, str(data), topic) is None  # done once


def test_a_crashed_batch_whose_id_a_correction_took_stops_the_job(tmp_path: Path) -> None:
    conf, data = _ledger(tmp_path), tmp_path / "data"
    _data_commit(data, 0, 0, 10)
    append_ledger_rows(conf, 0, _rows("orders", 0, 0, 10), read_at=read_ledger(conf).version)
    _data_commit(data, 1, 10, 30)  # crash, then a `ledger repair` appended batch 1:
    append_rows(conf, [LedgerRow(APP, 1, TopicPartition("orders", 0), 10, 20, 0, "stream-recovery", "")])
    before = DeltaTable(conf.table).version()
    with pytest.raises(LedgerJobStopped, match="holds batch 1 of orders-hourly, which"):
        recover_crashed_batch(conf, str(data), "orders")
    assert DeltaTable(conf.table).version() == before


@pytest.mark.integration
def test_a_crashed_batch_is_not_taken_for_loss_and_repair_leaves_ledger_and_data_agreeing(
    tmp_path: Path,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    cli: Callable[..., Any],
) -> None:
    """Batch 1 read [10, 30) into the data table, then the run died; retention then took 0-19. The
    ledger alone says 10 records lost; the data table's app transaction says they are there."""
    topic = new_topic(partitions=1)
    produce(topic, 40, partitions=1)
    conf, data = _ledger(tmp_path), tmp_path / "data"
    _data_commit(data, 0, 0, 10)
    append_ledger_rows(conf, 0, _rows(topic, 0, 0, 10), read_at=read_ledger(conf).version)
    _data_commit(data, 1, 10, 30)  # the crash: no ledger rows for batch 1
    topics.delete_records(bootstrap, topic, {0: 20})
    base = ("ledger", "validate", conf.table, "--pipeline", APP, "-b", bootstrap, "--output", "json")

    blind = cli(*base)  # without the data table the ledger cannot tell
    assert blind.exit_code == 1
    assert json.loads(blind.stdout)["partitions"][0]["records_lost"] == 10

    seen = cli(*base, "--data-table", str(data))
    assert seen.exit_code == 0, seen.stdout
    body = json.loads(seen.stdout)
    assert body["pending_batch"] == {
        "data_table": str(data),
        "batch_id": 1,
        "end": [{"topic": topic, "partition": 0, "offset": 30}],
    }
    assert [(p["verdict"], p["ledger_offset"], p["records_lost"]) for p in body["partitions"]] == [
        ("OK", 30, 0)
    ]
    assert body["batch_id"] == 2
    table = cli(*base[:-2], "--data-table", str(data))
    assert "batch 1 of orders-hourly is in" in table.stderr + table.stdout

    repair = ("ledger", "repair", conf.table, "--pipeline", APP, "-b", bootstrap, "--data-table", str(data))
    dry = cli(*repair, "--output", "json")
    assert dry.exit_code == 1 and json.loads(dry.stdout)["executed"] is False
    assert DeltaTable(conf.table).version() == 1  # nothing written
    done = cli(*repair, "--execute", "--output", "json")
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["completed_version"], result["version"], result["moves"]) == (2, None, [])
    state = read_ledger(conf)
    assert (state.positions, state.next_batch_id) == ({TopicPartition(topic, 0): 30}, 2)
    assert [e.written_by for e in state.entries] == ["ledger_ingest"]  # the batch's own rows
    assert recover_crashed_batch(conf, str(data), topic) is None  # ledger and data agree
    assert cli(*base, "--data-table", str(data)).exit_code == 0


def test_the_job_is_its_own_command_and_does_not_import_the_cli() -> None:
    code = (
        "import runpy, sys\n"
        "sys.path.insert(0, 'jobs')\n"
        "sys.argv = ['ledger_ingest.py', '--help']\n"
        "try:\n"
        "    runpy.run_path('jobs/ledger_ingest.py', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('recovery.cli')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.startswith("Usage: ledger_ingest.py [OPTIONS]")
    assert out.stdout.rstrip().endswith("[]")
