"""Offset ledgers: conf mapping, the table edge, and the CLI on a real broker and a real Delta table
(deltalake; no JVM). The planning core on a ledger is in test_ledger_plan.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from recovery.core.model import TopicPartition
from recovery.delta.ledger_conf import LedgerColumns, LedgerConf, load_conf, make_conf
from recovery.delta.ledger_model import METADATA_KEY, LedgerRow
from recovery.delta.ledger_table import append_rows, create_ledger, read_ledger
from recovery.errors import ConfigError, InvalidInput, PlanOutdated
from recovery.local import topics

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOW_US = 1_700_000_000_000_000


def test_conf_maps_columns_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "ledger.toml"
    path.write_text(
        '[ledger]\ntable = "/t/x"\npipeline = "p"\n[ledger.columns]\nend_offset = "next_offset"\nnote = ""\n'
    )
    conf = load_conf(path)
    assert conf.columns.end_offset == "next_offset" and conf.columns.note == ""
    assert load_conf(path, table="/t/y").table == "/t/y"


def test_example_conf_is_valid() -> None:
    conf = load_conf(Path(__file__).parents[2] / "conf" / "ledger.example.toml")
    assert isinstance(conf, LedgerConf)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"table": "/t"}, "name the pipeline"),
        ({"table": "/t", "pipeline": "p", "colums": {}}, "colums: Extra inputs are not permitted"),
        ({"table": "/t", "pipeline": "p", "columns": {"end_offset": 3}}, "columns.end_offset"),
    ],
    ids=["pipeline-missing", "typo", "bad-type"],
)
def test_bad_conf_names_the_problem(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_conf(values)


# -- deltalake ---------------------------------------------------------------------------------------


def _row(batch: int, tp: TopicPartition, start: int, end: int, pipeline: str = "orders-hourly") -> LedgerRow:
    return LedgerRow(pipeline, batch, tp, start, end, NOW_US + batch, "job", f"batch {batch}")


def test_latest_row_per_partition_wins(tmp_path: Path) -> None:
    table = str(tmp_path / "ledger")
    create_ledger(table)
    conf = make_conf({"table": table, "pipeline": "orders-hourly"})
    append_rows(conf, [_row(0, T0, 0, 10), _row(0, T1, 0, 12), _row(0, T0, 0, 99, pipeline="other")])
    append_rows(conf, [_row(1, T0, 10, 20)])
    ledger = read_ledger(conf)
    assert (ledger.version, ledger.next_batch_id) == (2, 2)
    assert ledger.positions == {T0: 20, T1: 12}
    assert ledger.entries[0].committed_at == "2023-11-14T22:13:20.000Z"


def test_users_table_with_other_column_names(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    table = str(tmp_path / "offsets")
    data = pa.table({"run": [1, 2], "tpc": ["orders", "orders"], "part": [0, 0], "next_offset": [5, 9]})
    write_deltalake(table, data)
    columns = LedgerColumns(
        pipeline=None,
        batch_id="run",
        topic="tpc",
        partition="part",
        start_offset=None,
        end_offset="next_offset",
        committed_at=None,
        written_by=None,
        note=None,
    )
    conf = LedgerConf(table=table, columns=columns)
    assert read_ledger(conf).positions == {T0: 9}
    append_rows(conf, [_row(3, T0, 9, 12)])
    assert read_ledger(conf).positions == {T0: 12}
    with pytest.raises(InvalidInput, match=r"no column 'batch_id', 'end_offset', 'partition', 'topic' \("):
        read_ledger(LedgerConf(table=table, columns=LedgerColumns(pipeline=None)))


def test_append_refuses_when_the_ledger_moved_on(tmp_path: Path) -> None:
    table = str(tmp_path / "ledger")
    create_ledger(table)
    conf = make_conf({"table": table, "pipeline": "orders-hourly"})
    append_rows(conf, [_row(0, T0, 0, 10)])
    with pytest.raises(PlanOutdated, match="version 1, the plan was made at 0"):
        append_rows(conf, [_row(1, T0, 10, 20)], expected_version=0)


# -- the CLI on the real broker ------------------------------------------------------------------------


@pytest.mark.integration
def test_validate_and_repair_a_ledger_after_retention_loss(
    tmp_path: Path,
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    cli: Callable[..., Any],
) -> None:
    topic = new_topic(partitions=2)
    produce(topic, 40, partitions=2)  # offsets 0-19 in each partition
    table = str(tmp_path / "ledger")
    create_ledger(table)
    conf = make_conf({"table": table, "pipeline": "orders-hourly"})
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    append_rows(conf, [_row(0, p0, 0, 5), _row(0, p1, 0, 5)])
    topics.delete_records(bootstrap, topic, {0: 12})  # retention took offsets 0-11 of partition 0
    base = ["ledger", "validate", table, "--pipeline", "orders-hourly", "-b", bootstrap]

    validated = cli(*base, "--output", "json")
    assert validated.exit_code == 1, validated.stderr
    rows = json.loads(validated.stdout)["partitions"]
    # The keys recovery/cli/ledger.py documents.
    assert set(json.loads(validated.stdout)) == {
        "table",
        "pipeline",
        "version",
        "batch_id",
        "isolation",
        "needs_action",
        "pending_batch",
        "partitions",
    }
    assert json.loads(validated.stdout)["pending_batch"] is None
    assert {k for k in rows[0] if not k.startswith(("runway", "oldest_unread"))} == {
        "topic",
        "partition",
        "verdict",
        "ledger_offset",
        "batch_end",
        "log_start_offset",
        "log_end_offset",
        "records_lost",
        "spark_error",
        "spark_says",
        "silently_skipped",
        "detail",
        "records_lost_upper_bound",
        "notes",
    }
    assert [(r["partition"], r["verdict"], r["ledger_offset"], r["records_lost"]) for r in rows] == [
        (0, "BELOW_LOG_START", 5, 7),
        (1, "OK", 5, 0),
    ]

    repair = ["ledger", "repair", table, "--pipeline", "orders-hourly", "-b", bootstrap]
    dry = cli(*repair)
    assert dry.exit_code == 1, dry.stderr  # changes pending
    assert "% dry run: nothing was written" in dry.stderr
    assert DeltaTable(table).version() == 1

    done = cli(*repair, "--execute", "--output", "json")
    assert done.exit_code == 0, done.stderr
    body = json.loads(done.stdout)
    assert set(body) == {
        "table",
        "pipeline",
        "from_version",
        "batch_id",
        "strategy",
        "isolation",
        "partitions",
        "moves",
        "rows",
        "dropped",
        "totals",
        "refused",
        "pending_batch",
        "executed",
        "completed_version",
        "version",
    }
    assert set(body["moves"][0]) == {
        "topic",
        "partition",
        "verdict",
        "old",
        "new",
        "lost",
        "skipped",
        "replayed",
        "reason",
        "lost_unknown",
        "upper_bound",
    }
    assert (body["executed"], body["version"], body["totals"]["lost"]) == (True, 2, 7)
    history = DeltaTable(table).history(1)[0]
    recorded = json.loads(history[METADATA_KEY])
    assert recorded["moves"] == [
        {"topic": topic, "partition": 0, "old": 5, "new": 12, "verdict": "BELOW_LOG_START"}
    ]

    shown = cli("ledger", "show", table, "--pipeline", "orders-hourly", "--output", "json")
    assert [
        (r["partition"], r["offset"], r["batch_id"], r["written_by"]) for r in json.loads(shown.stdout)
    ] == [
        (0, 12, 1, "stream-recovery"),
        (1, 5, 0, "job"),
    ]
    assert cli(*base).exit_code == 0
    # Time travel is the rollback: the version before the correction still has the old offsets.
    assert read_ledger(conf).positions[p0] == 12
    assert DeltaTable(table, version=1).to_pyarrow_table().num_rows == 2


def test_empty_pipeline_column_means_the_table_has_none() -> None:
    """The error for a missing pipeline suggests columns.pipeline = "": that must be accepted."""
    conf = make_conf({"table": "/t", "columns": {"pipeline": ""}})
    assert conf.pipeline is None and conf.columns.pipeline == ""


def test_ledger_of_several_pipelines_needs_one_named(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Without --pipeline, a at 100 and b at 5 would read back as one position of 5."""
    table = str(tmp_path / "ledger")
    create_ledger(table)
    append_rows(make_conf({"table": table, "pipeline": "a"}), [_row(0, T0, 0, 100, pipeline="a")])
    append_rows(make_conf({"table": table, "pipeline": "b"}), [_row(0, T0, 0, 5, pipeline="b")])
    before = DeltaTable(table).version()
    for args in (["show"], ["validate", "-b", "127.0.0.1:1"], ["repair", "-b", "127.0.0.1:1", "--execute"]):
        result = cli("ledger", args[0], table, *args[1:])
        assert result.exit_code == 2, (args, result.stderr)
        assert (
            f"Error: --pipeline is needed: column 'pipeline' of {table} holds pipelines a, b; name one"
            in (result.stderr)
        )
    assert DeltaTable(table).version() == before
    shown = cli("ledger", "show", table, "--pipeline", "a", "--output", "json")
    assert [r["offset"] for r in json.loads(shown.stdout)] == [100]


def test_a_table_without_a_pipeline_column_needs_no_pipeline(tmp_path: Path, cli: Callable[..., Any]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    table = str(tmp_path / "ledger")
    write_deltalake(
        table, pa.table({"batch_id": [0], "topic": ["orders"], "partition": [0], "end_offset": [7]})
    )
    shown = cli("ledger", "show", table, "--output", "json")
    assert shown.exit_code == 0, shown.stderr
    assert [r["offset"] for r in json.loads(shown.stdout)] == [7]


@pytest.mark.integration
def test_repair_whose_only_moves_drop_partitions_needs_action(
    tmp_path: Path, bootstrap: str, new_topic: Callable[..., str], cli: Callable[..., Any]
) -> None:
    topic = new_topic(partitions=1)
    table = str(tmp_path / "ledger")
    create_ledger(table)
    conf = make_conf({"table": table, "pipeline": "orders-hourly"})
    # Partition 0 is healthy; partition 3 does not exist (the topic lost partitions).
    append_rows(conf, [_row(0, TopicPartition(topic, 0), 0, 0), _row(0, TopicPartition(topic, 3), 0, 5)])
    for extra in ([], ["--execute"]):
        result = cli("ledger", "repair", table, "--pipeline", "orders-hourly", "-b", bootstrap, *extra)
        assert result.exit_code == 1, result.stderr
        assert "% nothing was written: the only changes are partitions that are gone" in result.stderr
        assert "nothing to change" not in result.stderr
    assert DeltaTable(table).version() == 1
