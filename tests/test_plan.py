"""The planning core, values in and values out: findings, Spark's predicted outcome, repair plans."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery.core.model import (
    ADDED_NOT_FROM_ZERO,
    COULD_NOT_READ,
    OFFSET_CHANGED,
    PARTITIONS_DELETED,
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Move,
    OffsetChange,
    OffsetRange,
    OnBeyondEnd,
    Policy,
    SourcePosition,
    Strategy,
    StrategyKind,
    TopicPartition,
    Verdict,
)
from recovery.core.plan import assess, clamp, decide_repair
from recovery.core.specs import parse_topic_partitions

F = CheckpointFile.parse

O0, O1, O2, O3 = (TopicPartition("orders", p) for p in range(4))


def committed(batch: int = 7, **offsets: int) -> CheckpointView:
    """A checkpoint whose batch ``batch`` is committed: Spark starts batch+1 from offsets/<batch>."""
    start = {TopicPartition("orders", int(k[1:])): v for k, v in offsets.items()}
    return CheckpointView(
        "/chk", "qid", batch + 1, False, (SourcePosition("0", F(f"offsets/{batch}"), start),)
    )


def uncommitted(
    batch: int, start: dict[TopicPartition, int], end: dict[TopicPartition, int]
) -> CheckpointView:
    start_file = F(f"offsets/{batch - 1}" if batch else "sources/0/0")
    source = SourcePosition("0", start_file, start, F(f"offsets/{batch}"), end)
    return CheckpointView("/chk", "qid", batch, True, (source,))


def cluster(
    *ranges: tuple[int, int], topic: str = "orders", ids: dict[str, str] | None = None
) -> ClusterView:
    parts = {TopicPartition(topic, p): OffsetRange(s, e) for p, (s, e) in enumerate(ranges)}
    return ClusterView(parts, ids or {})


# -- findings ------------------------------------------------------------------------------------


def test_positions_inside_the_log_are_ok() -> None:
    findings = assess(committed(p0=100, p1=50), cluster((0, 200), (50, 50)))
    assert [f.verdict for f in findings] == [Verdict.OK, Verdict.OK]
    assert not any(f.needs_action for f in findings)


def test_position_below_log_start_loses_records_and_spark_cannot_read_the_range() -> None:
    (finding,) = assess(committed(p0=100), cluster((250, 900)))
    assert finding.verdict is Verdict.BELOW_LOG_START
    assert finding.records_lost == 150
    assert finding.spark_error == COULD_NOT_READ
    assert finding.silently_skipped == 150


def test_position_beyond_log_end_after_a_committed_batch_makes_spark_report_offset_changed() -> None:
    (finding,) = assess(committed(p0=334), cluster((0, 10)))
    assert finding.verdict is Verdict.BEYOND_LOG_END
    assert finding.spark_error == OFFSET_CHANGED
    assert finding.records_lost == 0


def test_position_beyond_log_end_in_a_rerun_batch_fails_reading_the_stored_range() -> None:
    (finding,) = assess(uncommitted(3, {O0: 300}, {O0: 334}), cluster((0, 10)))
    assert finding.verdict is Verdict.BEYOND_LOG_END
    assert finding.spark_error == COULD_NOT_READ


def test_stored_end_of_a_rerun_batch_past_the_log_end_is_beyond_log_end() -> None:
    (finding,) = assess(uncommitted(3, {O0: 5}, {O0: 40}), cluster((0, 10)))
    assert (finding.verdict, finding.position, finding.batch_end) == (Verdict.BEYOND_LOG_END, 5, 40)


def test_missing_partition_of_an_existing_topic_is_partition_gone() -> None:
    findings = assess(committed(p0=1, p1=2, p2=3), cluster((0, 5), (0, 5)))
    assert [(f.tp, f.verdict, f.spark_error) for f in findings][2] == (
        O2,
        Verdict.PARTITION_GONE,
        PARTITIONS_DELETED,
    )


def test_missing_topic_is_topic_gone() -> None:
    (finding,) = assess(committed(p0=1), ClusterView({}))
    assert (finding.verdict, finding.spark_error) == (Verdict.TOPIC_GONE, PARTITIONS_DELETED)


@pytest.mark.parametrize(
    ("log_start", "error", "lost"),
    [(0, None, 0), (17, ADDED_NOT_FROM_ZERO, 17)],
    ids=["from-zero-is-read-by-spark", "not-from-zero-fails"],
)
def test_added_partition(log_start: int, error: str | None, lost: int) -> None:
    findings = assess(committed(p0=5), cluster((0, 5), (log_start, 40)))
    new = findings[1]
    assert (new.tp, new.verdict, new.spark_error, new.records_lost) == (
        O1,
        Verdict.NEW_PARTITION,
        error,
        lost,
    )


def test_recreated_topic_in_range_is_invisible_to_spark_but_found_by_topic_id() -> None:
    view = committed(p0=30)
    view = CheckpointView(
        view.location, view.query_id, view.batch_id, False, view.sources, {"orders": "old-id"}
    )
    (finding,) = assess(view, cluster((0, 100), ids={"orders": "new-id"}))
    assert finding.verdict is Verdict.TOPIC_RECREATED
    assert finding.spark_error is None  # Spark runs, and silently skips the new topic's first 30 records
    assert finding.silently_skipped == 30
    assert finding.needs_action


def test_unreadable_offsets_are_transient() -> None:
    state = ClusterView({}, unavailable=frozenset({O0}))
    (finding,) = assess(committed(p0=5), state)
    assert finding.verdict is Verdict.TRANSIENT


# -- repair: clamp (follower-style) -------------------------------------------------------------


def test_offset_below_log_start_is_clamped_to_log_start() -> None:
    plan = decide_repair(committed(p0=100), cluster((250, 900)))
    assert plan.moves == (
        Move("0", O0, Verdict.BELOW_LOG_START, old=100, new=250, lost=150, reason=plan.moves[0].reason),
    )
    assert plan.changes == (OffsetChange(F("offsets/7"), "0", O0, 100, 250),)
    assert (plan.lost, plan.skipped, plan.replayed) == (150, 0, 0)
    assert plan.refused is None


def test_offset_beyond_log_end_is_truncated_to_log_end_by_default() -> None:
    plan = decide_repair(committed(p0=334), cluster((0, 10)))
    # Worst case counted: if the topic was recreated, its 10 records are never read.
    assert [(m.old, m.new, m.replayed, m.skipped) for m in plan.moves] == [(334, 10, 0, 10)]


def test_truncating_to_the_log_end_counts_against_the_loss_budget() -> None:
    plan = decide_repair(committed(p0=5000), cluster((100, 1000)), policy=Policy(max_loss_records=0))
    assert plan.refused == "the plan loses 900 records in all, over the budget of 0"


def test_offset_beyond_log_end_can_reread_a_recreated_topic_from_earliest() -> None:
    plan = decide_repair(committed(p0=334), cluster((0, 10)), Strategy(on_beyond_end=OnBeyondEnd.EARLIEST))
    assert [(m.old, m.new, m.replayed) for m in plan.moves] == [(334, 0, 10)]


def test_healthy_partitions_are_left_alone_by_clamp() -> None:
    plan = decide_repair(committed(p0=100, p1=3), cluster((250, 900), (0, 5)))
    assert [c.tp for c in plan.changes] == [O0]


def test_gone_partitions_are_dropped_and_new_ones_added_at_their_log_start() -> None:
    plan = decide_repair(committed(p0=1, p2=3), cluster((0, 5), (9, 40)))
    # Kafka never removes partitions: p2 gone means the topic was recreated, so p0 is re-read too
    assert sorted((c.tp.partition, c.old, c.new) for c in plan.changes) == [
        (0, 1, 0),
        (1, None, 9),
        (2, 3, None),
    ]
    added = next(m for m in plan.moves if m.tp == O1)
    assert (added.lost, added.skipped) == (9, 0)


def test_uncommitted_batch_clamps_both_ends_monotonically() -> None:
    view = uncommitted(4, {O0: 100, O1: 10}, {O0: 180, O1: 60})
    plan = decide_repair(view, cluster((150, 900), (0, 40)))
    assert set(plan.changes) == {
        OffsetChange(F("offsets/3"), "0", O0, 100, 150),
        OffsetChange(F("offsets/4"), "0", O1, 60, 40),
    }
    assert tuple(map(str, plan.files)) == ("offsets/3", "offsets/4")


def test_moving_the_start_of_a_rerun_batch_back_empties_that_batch() -> None:
    """A sink that already committed batch N skips its re-run; widening N would lose the records."""
    view = uncommitted(7, {O0: 5000}, {O0: 5200})
    plan = decide_repair(view, cluster((0, 900)), Strategy(on_beyond_end=OnBeyondEnd.EARLIEST))
    assert set(plan.changes) == {
        OffsetChange(F("offsets/6"), "0", O0, 5000, 0),
        OffsetChange(F("offsets/7"), "0", O0, 5200, 0),
    }


def test_partition_only_in_a_rerun_batch_end_past_the_log_end_is_repaired() -> None:
    view = uncommitted(3, {O0: 5}, {O0: 9, O1: 80})
    findings = assess(view, cluster((0, 10), (0, 50)))
    assert (findings[1].verdict, findings[1].spark_error) == (Verdict.NEW_PARTITION, COULD_NOT_READ)
    plan = decide_repair(view, cluster((0, 10), (0, 50)))
    assert set(plan.changes) == {
        OffsetChange(F("offsets/2"), "0", O1, None, 0),
        OffsetChange(F("offsets/3"), "0", O1, 80, 0),
    }


def test_dropping_every_partition_of_a_source_is_refused() -> None:
    plan = decide_repair(committed(p0=1, p1=2), ClusterView({}))
    assert plan.refused is not None and "every partition of source 0 would be dropped" in plan.refused


def test_uncommitted_batch_zero_rewrites_the_initial_offsets_file() -> None:
    plan = decide_repair(uncommitted(0, {O0: 0}, {O0: 50}), cluster((20, 90)))
    assert plan.changes == (OffsetChange(F("sources/0/0"), "0", O0, 0, 20),)


def test_recreated_topic_is_reread_from_its_log_start_by_clamp() -> None:
    view = CheckpointView("/chk", "q", 8, False, committed(p0=30).sources, {"orders": "old"})
    plan = decide_repair(view, cluster((0, 100), ids={"orders": "new"}))
    assert [(m.verdict, m.old, m.new, m.replayed) for m in plan.moves] == [
        (Verdict.TOPIC_RECREATED, 30, 0, 30)
    ]


def test_transient_offsets_refuse_the_repair() -> None:
    plan = decide_repair(committed(p0=5), ClusterView({}, unavailable=frozenset({O0})))
    assert plan.refused == "offsets of orders [0] could not be read now; retry before repairing"


# -- repair: reset strategies (kafka-consumer-groups) --------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (Strategy(StrategyKind.EARLIEST), [(100, 50), (30, 0)]),
        (Strategy(StrategyKind.LATEST), [(100, 200), (30, 40)]),
        (Strategy(StrategyKind.SHIFT_BY, shift=-60), [(100, 50), (30, 0)]),
        (Strategy(StrategyKind.SHIFT_BY, shift=25), [(100, 125), (30, 40)]),
        (Strategy(StrategyKind.TO_OFFSET, offset=120), [(100, 120), (30, 40)]),
        (Strategy(StrategyKind.TO_DATETIME, targets={O0: 170, O1: 12}), [(100, 170), (30, 12)]),
        (Strategy(StrategyKind.FROM_FILE, targets={O1: 999}), [(30, 40)]),
    ],
    ids=["earliest", "latest", "shift-back", "shift-forward", "to-offset", "to-datetime", "from-file"],
)
def test_reset_strategies_clamp_into_the_log(strategy: Strategy, expected: list[tuple[int, int]]) -> None:
    plan = decide_repair(committed(p0=100, p1=30), cluster((50, 200), (0, 40)), strategy)
    assert [(m.old, m.new) for m in plan.moves] == expected


def test_scope_limits_the_partitions_that_move() -> None:
    strategy = Strategy(StrategyKind.LATEST, scope=parse_topic_partitions("orders:1"))
    plan = decide_repair(committed(p0=100, p1=30), cluster((50, 200), (0, 40)), strategy)
    assert [m.tp for m in plan.moves] == [O1]


def test_moving_forward_counts_skipped_records_and_moving_back_counts_replayed() -> None:
    forward = decide_repair(committed(p0=100), cluster((50, 200)), Strategy(StrategyKind.LATEST))
    back = decide_repair(committed(p0=100), cluster((50, 200)), Strategy(StrategyKind.EARLIEST))
    assert (forward.skipped, forward.replayed, back.skipped, back.replayed) == (100, 0, 0, 50)


# -- policy --------------------------------------------------------------------------------------


def test_loss_budget_total_refuses_the_plan() -> None:
    plan = decide_repair(
        committed(p0=100, p1=0), cluster((250, 900), (40, 50)), policy=Policy(max_loss_records=100)
    )
    assert plan.refused == "the plan loses 190 records in all, over the budget of 100"


def test_loss_budget_per_partition_names_the_partitions() -> None:
    policy = Policy(max_loss_per_partition=100)
    plan = decide_repair(committed(p0=100, p1=0), cluster((250, 900), (40, 50)), policy=policy)
    assert plan.refused == "the plan loses more than 100 records in orders [0] 150"


def test_loss_within_budget_is_allowed() -> None:
    plan = decide_repair(committed(p0=100), cluster((250, 900)), policy=Policy(150, 150))
    assert plan.refused is None


# -- properties ----------------------------------------------------------------------------------

ranges = st.tuples(st.integers(0, 1000), st.integers(0, 1000)).map(lambda t: OffsetRange(min(t), max(t)))


@given(position=st.integers(0, 2000), available=ranges)
def test_clamp_always_lands_inside_the_log(position: int, available: OffsetRange) -> None:
    plan = decide_repair(committed(p0=position), ClusterView({O0: available}))
    final = next((c.new for c in plan.changes), position)
    assert final is not None and available.start <= final <= available.end
    assert plan.lost == max(0, available.start - position)


@given(start=st.integers(0, 2000), size=st.integers(0, 500), available=ranges)
def test_rerun_batch_never_ends_before_it_starts(start: int, size: int, available: OffsetRange) -> None:
    plan = decide_repair(uncommitted(5, {O0: start}, {O0: start + size}), ClusterView({O0: available}))
    values = {"offsets/4": start, "offsets/5": start + size}
    for change in plan.changes:
        assert change.new is not None
        values[str(change.file)] = change.new
    assert values["offsets/4"] <= values["offsets/5"]
    assert clamp(values["offsets/4"], available) == values["offsets/4"]


def test_planning_core_imports_no_io() -> None:
    allowed = {"__future__", "collections", "dataclasses", "enum", "re", "typing", "recovery"}
    for module in ("plan.py", "model.py"):
        tree = ast.parse((Path(__file__).parents[1] / "recovery" / "core" / module).read_text())
        imported = {
            ((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert imported <= allowed, f"{module} imports {imported - allowed}"


def test_findings_copied_without_replace_keep_every_other_field() -> None:
    # model.copied_with builds a Finding from its __dict__, for speed: that must stay its fields and
    # nothing else (this sample names every field, so a new one fails here first).
    from dataclasses import fields, replace

    from recovery.core.model import Finding, Runway, copied_with

    sample = {
        "source_id": "1",
        "tp": O2,
        "verdict": Verdict.AT_RISK,
        "position": 7,
        "batch_end": 9,
        "available": OffsetRange(3, 12),
        "records_lost": 4,
        "spark_error": COULD_NOT_READ,
        "silently_skipped": 5,
        "detail": "d",
        "upper_bound": True,
        "notes": ("n",),
        "runway": Runway(1_000, 2_000, "r"),
    }
    f = Finding(**{field.name: sample[field.name] for field in fields(Finding)})

    changes = {"verdict": Verdict.BELOW_LOG_START, "spark_error": None, "records_lost": 1, "notes": ()}
    copy = copied_with(f, **changes)
    assert copy == replace(f, **changes)  # type: ignore[arg-type]
    assert list(vars(copy)) == [field.name for field in fields(Finding)]
    assert copied_with(f) == f


def test_every_copied_finding_names_fields_that_exist() -> None:
    # copied_with copies __dict__ without Finding.__init__, which would refuse a misspelt field: so
    # every keyword of every copied_with call in the planning core and the runway is checked here.
    from dataclasses import fields

    import recovery.core.plan
    import recovery.core.runway
    from recovery.core.model import Finding

    calls = [
        node
        for module in (recovery.core.plan, recovery.core.runway)
        for node in ast.walk(ast.parse(Path(module.__file__ or "").read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "copied_with"
    ]
    named = {kw.arg for call in calls for kw in call.keywords}
    assert len(calls) >= 8 and None not in named  # no **changes passed through
    assert named <= {field.name for field in fields(Finding)}


def test_moves_and_changes_built_without_init_are_whole() -> None:
    # plan._move and plan._change fill the __dict__ of a Move and an OffsetChange directly, for
    # speed: with exactly their fields, equal to what the dataclass would build.
    from dataclasses import fields

    view = uncommitted(3, {O0: 300, O1: 2}, {O0: 334, O1: 9})
    plan = decide_repair(view, cluster((0, 10), (5, 20)))
    assert plan.moves and len(plan.changes) >= 2
    for made, cls in [*((m, Move) for m in plan.moves), *((c, OffsetChange) for c in plan.changes)]:
        assert list(vars(made)) == [field.name for field in fields(cls)]
        assert made == cls(**vars(made))


def test_without_the_sink_a_partition_the_stored_end_lacks_gets_no_alternative() -> None:
    # The alternative (the sink holds the re-run batch) judges from the stored end: a partition
    # only the start has (a topic since deleted) has no alternative, and the others are matched by
    # partition, not by place.
    gone = TopicPartition("gone", 0)
    findings = assess(uncommitted(3, {gone: 1, O0: 5}, {O0: 40}), cluster((0, 10)))
    assert [(f.tp, f.verdict, f.spark_error) for f in findings] == [
        (gone, Verdict.TOPIC_GONE, PARTITIONS_DELETED),
        (O0, Verdict.BEYOND_LOG_END, COULD_NOT_READ),
    ]
    assert findings[0].notes == ()
    (note,) = findings[1].notes
    assert "depends on the sink" in note and OFFSET_CHANGED in note


def test_without_the_sink_each_alternative_outcome_has_its_own_note_shared_by_its_partitions() -> None:
    # O0 and O1: past the log end either way, but Spark fails differently (their note is one text);
    # O2: below the log start either way, with a different count (its own note); O3: the same
    # outcome either way (no note).
    view = uncommitted(3, {O0: 5, O1: 5, O2: 5, O3: 5}, {O0: 40, O1: 40, O2: 8, O3: 6})
    findings = assess(view, cluster((0, 10), (0, 10), (9, 10), (0, 10)))
    notes = [[n for n in f.notes if n.startswith("depends on the sink")] for f in findings]
    assert len(notes[0]) == len(notes[1]) == len(notes[2]) == 1 and notes[3] == []
    assert notes[0][0] is notes[1][0] and OFFSET_CHANGED in notes[0][0]
    assert notes[2][0] != notes[0][0] and "BELOW_LOG_START" in notes[2][0]
