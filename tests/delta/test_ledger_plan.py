"""The planning core on an offset ledger, the results' exit codes and the report rows: values in,
values out (no JVM, no broker, no Delta table)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from recovery.cli.report import delta as report
from recovery.core.model import (
    ClusterView,
    OffsetRange,
    Policy,
    Strategy,
    StrategyKind,
    TopicPartition,
    Verdict,
)
from recovery.core.plan import decide_repair
from recovery.delta.ledger_model import (
    METADATA_KEY,
    LedgerEntry,
    LedgerPlan,
    LedgerRepair,
    LedgerRow,
    LedgerState,
)
from recovery.delta.ledger_plan import correction_rows, ledger_view, plan_ledger_repair
from recovery.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
T0, T1, T3 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 3)
NOW_US = 1_700_000_000_000_000


def state(**offsets: int) -> LedgerState:
    entries = tuple(
        LedgerEntry(TopicPartition("orders", int(name[1:])), offset, batch_id=4)
        for name, offset in offsets.items()
    )
    return LedgerState("/t/ledger", "orders-hourly", version=9, next_batch_id=5, entries=entries)


def plan(ledger: LedgerState, cluster: ClusterView, **kw: object) -> LedgerPlan:
    return plan_ledger_repair(ledger, cluster, now_us=NOW_US, **kw)  # type: ignore[arg-type]


def test_ledger_is_one_source_starting_at_the_latest_end_offsets() -> None:
    view = ledger_view(state(p0=100, p1=40))
    assert view.batch_id == 5 and not view.rerun
    assert [dict(s.start) for s in view.sources] == [{T0: 100, T1: 40}]


def test_correction_rows_come_from_the_moves() -> None:
    ledger = state(p0=100, p1=40)
    cluster = ClusterView({T0: OffsetRange(250, 900), T1: OffsetRange(0, 50)})
    rows, dropped = correction_rows(ledger, decide_repair(ledger_view(ledger), cluster), now_us=NOW_US)
    assert rows == (
        LedgerRow(
            "orders-hourly",
            5,
            T0,
            100,
            250,
            NOW_US,
            "stream-recovery",
            "clamp (beyond the log end: latest): BELOW_LOG_START (lost 150)",
        ),
    )
    assert dropped == ()


def test_a_gone_topic_cannot_be_written_as_a_row() -> None:
    ledger = plan(state(p0=100), ClusterView({}))
    assert ledger.rows == () and [m.verdict for m in ledger.dropped] == [Verdict.TOPIC_GONE]


def test_a_topic_with_fewer_partitions_was_recreated_gone_ones_dropped_the_rest_reread() -> None:
    """Kafka never removes partitions: fewer than the ledger knows means the topic was recreated, so
    the partition that is left is re-read from its log start and the vanished one is dropped."""
    ledger = plan(state(p0=10, p3=5), ClusterView({T0: OffsetRange(0, 20)}))
    assert [(f.tp, f.verdict) for f in ledger.plan.findings] == [
        (T0, Verdict.TOPIC_RECREATED),
        (T3, Verdict.PARTITION_GONE),
    ]
    assert [(r.tp, r.start_offset, r.end_offset) for r in ledger.rows] == [(T0, 10, 0)]
    assert [m.tp for m in ledger.dropped] == [T3]
    assert ledger.needs_action and ledger.exit_code is ExitCode.ACTION_NEEDED


def test_a_partition_the_ledger_does_not_know_yet_is_judged_new() -> None:
    ledger = plan(state(p0=10), ClusterView({T0: OffsetRange(0, 20), T1: OffsetRange(7, 9)}))
    assert [(f.tp, f.verdict) for f in ledger.plan.findings] == [
        (T0, Verdict.OK),
        (T1, Verdict.NEW_PARTITION),
    ]
    assert [(r.tp, r.start_offset, r.end_offset) for r in ledger.rows] == [(T1, None, 7)]


def test_latest_strategy_moves_every_partition() -> None:
    ledger = state(p0=100, p1=40)
    cluster = ClusterView({T0: OffsetRange(0, 900), T1: OffsetRange(0, 50)})
    planned = plan(ledger, cluster, strategy=Strategy(StrategyKind.LATEST))
    assert [(r.tp, r.start_offset, r.end_offset) for r in planned.rows] == [(T0, 100, 900), (T1, 40, 50)]


def test_metadata_names_the_plan() -> None:
    planned = plan(state(p0=100), ClusterView({T0: OffsetRange(250, 900)}))
    recorded = json.loads(planned.metadata()[METADATA_KEY])
    assert (recorded["from_version"], recorded["batch_id"], recorded["lost"]) == (9, 5, 150)
    assert recorded["moves"] == [
        {"topic": "orders", "partition": 0, "old": 100, "new": 250, "verdict": "BELOW_LOG_START"}
    ]


LOSS = ClusterView({T0: OffsetRange(250, 900)})
HEALTHY = ClusterView({T0: OffsetRange(0, 900)})


@pytest.mark.parametrize(
    ("cluster", "policy", "dry_run", "version", "code"),
    [
        (HEALTHY, None, True, None, ExitCode.OK),
        (LOSS, None, True, None, ExitCode.ACTION_NEEDED),
        (LOSS, None, False, 10, ExitCode.OK),
        (LOSS, Policy(max_loss_records=10), True, None, ExitCode.ACTION_NEEDED),
        (ClusterView({}), None, False, None, ExitCode.ACTION_NEEDED),
    ],
    ids=["nothing-to-do", "dry-run-pending", "applied", "refused", "topic-gone"],
)
def test_repair_exit_code(
    cluster: ClusterView, policy: Policy | None, dry_run: bool, version: int | None, code: ExitCode
) -> None:
    result = LedgerRepair(plan(state(p0=100), cluster, policy=policy), dry_run=dry_run, version=version)
    assert result.exit_code is code


# -- report rows and lines ---------------------------------------------------------------------------


def test_validate_rows_name_the_ledger_offset() -> None:
    planned = plan(state(p0=100), LOSS)
    [row] = report.validate_body(planned)["partitions"]
    assert {k: v for k, v in row.items() if not k.startswith(("runway", "oldest_unread"))} == {
        "topic": "orders",
        "partition": 0,
        "verdict": "BELOW_LOG_START",
        "ledger_offset": 100,
        "batch_end": None,
        "log_start_offset": 250,
        "log_end_offset": 900,
        "records_lost": 150,
        "spark_error": "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE",
        "spark_says": "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE",
        "silently_skipped": 150,
        "detail": "records [100, 250) were deleted before the job read them",
        "records_lost_upper_bound": False,
        "notes": [],
    }
    assert report.validate_notes(planned) == [
        "orders [0]: records [100, 250) were deleted before the job read them",
        "action needed: see `stream-recovery ledger repair`",
    ]
    assert report.ledger_context(planned.state) == (
        "ledger /t/ledger pipeline orders-hourly at version 9: the next run is batch 5"
    )
    assert [key for key, _ in report.LEDGER_VALIDATE_COLUMNS][:5] == [
        "topic",
        "partition",
        "verdict",
        "ledger_offset",
        "log_start_offset",
    ]


def test_repair_lines_say_what_happened() -> None:
    planned = plan(state(p0=100), LOSS)
    dry = report.repair_notes(LedgerRepair(planned))
    assert dry[-2:] == [
        "strategy clamp (beyond the log end: latest): 1 partitions move, 150 records lost, 0 skipped, "
        "0 replayed",
        "dry run: nothing was written; add --execute to apply",
    ]
    done = report.repair_notes(LedgerRepair(planned, dry_run=False, version=10))
    assert (
        done[-1] == "appended 1 correction rows as batch 5 in version 10; time travel to version 9 undoes it"
    )
    gone = LedgerRepair(plan(state(p0=10, p3=5), ClusterView({T0: OffsetRange(0, 20)})), dry_run=False)
    assert report.repair_notes(gone)[-2:] == [
        "orders [3]: no ledger row can drop a partition; stop the job reading it",
        "nothing was written: the only changes are partitions that are gone (orders [3]), which a ledger "
        "row cannot express; stop the job reading them",
    ]
    body = report.repair_body(LedgerRepair(planned))
    assert body["rows"] == [
        {
            "topic": "orders",
            "partition": 0,
            "start_offset": 100,
            "end_offset": 250,
            "note": "clamp (beyond the log end: latest): BELOW_LOG_START (lost 150)",
        }
    ]
    assert (body["executed"], body["version"], body["isolation"]) == (False, None, "read_uncommitted")
    assert "source" not in body["moves"][0] and "on_restart" in body["partitions"][0]


def test_refusal_is_one_line() -> None:
    assert report.refusal_line(None) is None
    assert report.refusal_line("over budget") == "repair refused: over budget. Nothing was written."


@pytest.mark.parametrize(
    "module",
    ["delta/ledger_model.py", "delta/ledger_plan.py", "cli/report/delta.py"],
)
def test_ledger_planning_and_rendering_do_no_io(module: str) -> None:
    tree = ast.parse((REPO / "recovery" / module).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    io = {"deltalake", "pyarrow", "fsspec", "os", "time", "pydantic", "confluent_kafka", "pyspark"}
    assert not {m for m in imported if m and m.split(".")[0] in io}
    local = {m for m in imported if m and m.startswith("recovery")}
    assert local <= {
        "recovery.core.model",
        "recovery.errors",
        "recovery.core.plan",
        "recovery.core.runway",
        "recovery.checkpoint.format",
        "recovery.delta.model",
        "recovery.delta.ledger_model",
        "recovery.cli.report.findings",
    }


def test_the_correction_commits_metadata_key_is_a_stored_format() -> None:
    """Ledger correction commits already written carry this key; renaming it would hide their plans."""
    assert METADATA_KEY == "stream-recovery.plan"
