"""The model of Spark's restart, shape by shape (issue 14), as pure values: each test is a failure
shape observed on the real rig, and what Spark 4.x did there."""

from __future__ import annotations

from dataclasses import replace

from recovery.core.model import (
    COULD_NOT_READ,
    OFFSET_CHANGED,
    PARTITIONS_DELETED,
    CheckpointFile,
    CheckpointView,
    ClusterView,
    Isolation,
    OffsetRange,
    Policy,
    SinkFacts,
    SourcePosition,
    TopicPartition,
    Verdict,
)
from recovery.core.plan import assess, decide_repair

F = CheckpointFile.parse
T = "orders"
P = [TopicPartition(T, p) for p in range(4)]
BATCH_MS = 1_000_000


def committed(batch: int, *positions: int, ids: dict[str, str] | None = None) -> CheckpointView:
    start = {P[p]: v for p, v in enumerate(positions)}
    source = SourcePosition("0", F(f"offsets/{batch}"), start, start_read_by_ms=BATCH_MS)
    return CheckpointView("/chk", "qid", batch + 1, False, (source,), ids or {})


def uncommitted(
    batch: int, start: list[int], end: list[int], sink: SinkFacts | None = None
) -> CheckpointView:
    source = SourcePosition(
        "0",
        F(f"offsets/{batch - 1}"),
        {P[p]: v for p, v in enumerate(start)},
        F(f"offsets/{batch}"),
        {P[p]: v for p, v in enumerate(end)},
        start_read_by_ms=BATCH_MS,
        end_read_by_ms=BATCH_MS + 1000,
    )
    return CheckpointView("/chk", "qid", batch, True, (source,), sink=sink)


def cluster(*ranges: tuple[int, int], **extra: object) -> ClusterView:
    parts = {P[p]: OffsetRange(s, e) for p, (s, e) in enumerate(ranges)}
    return ClusterView(parts, **extra)  # type: ignore[arg-type]


# -- recreated with fewer partitions --------------------------------------------------------------


def test_fewer_partitions_means_the_whole_topic_was_recreated() -> None:
    # the checkpoint read 3 partitions to 100; the topic now has 2 partitions with 60 records each
    findings = assess(committed(0, 100, 100, 100), cluster((0, 60), (0, 60)))
    assert [(f.verdict, f.spark_error) for f in findings] == [
        (Verdict.TOPIC_RECREATED, OFFSET_CHANGED),
        (Verdict.TOPIC_RECREATED, OFFSET_CHANGED),
        (Verdict.PARTITION_GONE, PARTITIONS_DELETED),
    ]
    assert all(f.needs_action for f in findings)
    assert [f.silently_skipped for f in findings][:2] == [60, 60]


def test_fewer_partitions_with_more_records_is_not_ok_and_counts_the_skipped_records() -> None:
    findings = assess(committed(0, 20, 20, 20), cluster((0, 40), (0, 40)))
    assert [f.verdict for f in findings] == [
        Verdict.TOPIC_RECREATED,
        Verdict.TOPIC_RECREATED,
        Verdict.PARTITION_GONE,
    ]
    assert [f.silently_skipped for f in findings] == [20, 20, 0]  # the new records below 20
    assert "fewer than the checkpoint knows" in findings[0].detail


def test_a_loss_budget_of_zero_refuses_a_recreated_topic() -> None:
    plan = decide_repair(
        committed(0, 20, 20, 20), cluster((0, 40), (0, 40)), policy=Policy(max_loss_records=0)
    )
    assert plan.refused and "recreated" in plan.refused
    assert plan.lost_unknown
    assert [(m.tp.partition, m.old, m.new) for m in plan.moves] == [(0, 20, 0), (1, 20, 0), (2, 20, None)]


# -- a re-run batch whose stored end is below its start -------------------------------------------


def test_rerun_with_stored_end_below_the_position_is_offset_changed() -> None:
    # Spark failed once on a topic recreated with 10 records: it had written offsets/1 = 10
    (f,) = assess(uncommitted(1, [100], [10]), cluster((0, 10)))
    assert (f.verdict, f.spark_error) == (Verdict.BEYOND_LOG_END, OFFSET_CHANGED)
    assert f.silently_skipped == 10  # failOnDataLoss=false: range dropped, next batch from 10


def test_rerun_with_stored_end_below_the_position_inside_the_log_is_a_rewritten_log() -> None:
    (f,) = assess(uncommitted(1, [100], [10]), cluster((0, 150)))
    assert (f.verdict, f.spark_error) == (Verdict.TOPIC_RECREATED, OFFSET_CHANGED)


def test_rerun_reading_from_past_the_log_end_fails_reading() -> None:
    (f,) = assess(uncommitted(1, [100], [120]), cluster((0, 10)))
    assert (f.verdict, f.spark_error, f.silently_skipped) == (Verdict.BEYOND_LOG_END, COULD_NOT_READ, 10)


# -- BEYOND_LOG_END counts what failOnDataLoss=false skips, as repair does -------------------------


def test_beyond_log_end_counts_the_records_now_in_the_partition_as_skipped() -> None:
    view, now = committed(0, 100, 100, 100), cluster((0, 10), (0, 10), (0, 10))
    findings = assess(view, now)
    assert [f.silently_skipped for f in findings] == [10, 10, 10]
    assert decide_repair(view, now).skipped == 30  # clamp to the log end skips the same records


# -- idempotent sinks ---------------------------------------------------------------------------


def test_a_sink_holding_the_rerun_batch_makes_spark_skip_it_without_reading() -> None:
    # batch 1 [100, 120) is uncommitted, but the Delta sink holds it; retention then deleted < 110
    view = uncommitted(1, [100], [120], sink=SinkFacts("/sink", committed_batch=1))
    (f,) = assess(view, cluster((110, 150)))
    assert (f.verdict, f.spark_error, f.records_lost) == (Verdict.OK, None, 0)
    assert f.position == 120 and any("skips it without reading Kafka" in n for n in f.notes)


def test_a_sink_holding_the_rerun_batch_counts_only_records_never_read() -> None:
    view = uncommitted(1, [100], [120], sink=SinkFacts("/sink", committed_batch=1))
    (f,) = assess(view, cluster((139, 150)))
    assert (f.verdict, f.records_lost, f.spark_error) == (Verdict.BELOW_LOG_START, 19, COULD_NOT_READ)
    plan = decide_repair(view, cluster((139, 150)))
    assert plan.lost == 19
    assert [(str(c.file), c.old, c.new) for c in plan.changes] == [("offsets/1", 120, 139)]
    assert (plan.batch_id, plan.rerun, plan.sink_skips_batch) == (1, True, 1)


def test_a_sink_without_the_batch_changes_nothing() -> None:
    view = uncommitted(1, [100], [120], sink=SinkFacts("/sink", committed_batch=0))
    (f,) = assess(view, cluster((139, 150)))
    assert (f.records_lost, f.notes) == (39, ())


def test_without_sink_the_finding_says_the_outcome_depends_on_it() -> None:
    (f,) = assess(uncommitted(1, [100], [120]), cluster((110, 150)))
    assert (f.verdict, f.records_lost) == (Verdict.BELOW_LOG_START, 10)
    assert "depends on the sink" in f.notes[0] and "runs" in f.notes[0]


# -- read_committed -----------------------------------------------------------------------------


def test_read_committed_losses_are_upper_bounds() -> None:
    (f,) = assess(committed(0, 100), cluster((127, 200), isolation=Isolation.READ_COMMITTED))
    assert (f.records_lost, f.upper_bound) == (27, True)
    (g,) = assess(committed(0, 100), cluster((127, 200)))
    assert g.upper_bound is False


def test_position_within_an_open_transaction() -> None:
    now = cluster((0, 90), isolation=Isolation.READ_COMMITTED, high_watermarks={P[0]: 105})
    (f,) = assess(committed(0, 100), now)
    assert (f.verdict, f.spark_error, f.silently_skipped, f.records_lost) == (
        Verdict.OPEN_TRANSACTION,
        OFFSET_CHANGED,
        0,
        0,
    )
    assert "abort" in f.detail and f.needs_action
    plan = decide_repair(committed(0, 100), now)
    (m,) = plan.moves
    assert (m.old, m.new, m.lost, m.skipped, m.replayed) == (100, 90, 0, 0, 10)


def test_past_the_high_watermark_under_read_committed_is_beyond_log_end() -> None:
    now = cluster((0, 90), isolation=Isolation.READ_COMMITTED, high_watermarks={P[0]: 95})
    (f,) = assess(committed(0, 100), now)
    assert f.verdict is Verdict.BEYOND_LOG_END


# -- recreation evidence without topic ids -----------------------------------------------------


def test_a_record_below_the_position_newer_than_the_batch_means_the_topic_was_rewritten() -> None:
    now = cluster((0, 150), newer_than_read={("0", P[0]): 0})
    (f,) = assess(committed(0, 100), now)
    assert (f.verdict, f.spark_error, f.silently_skipped) == (Verdict.TOPIC_RECREATED, None, 100)
    assert f.needs_action


def test_timestamp_evidence_says_whose_clock_it_is() -> None:
    """CreateTime is the producer's clock (a fast one looks the same): the verdict stays, a note says
    what it rests on; LogAppendTime is the broker's: no note. Not looked up: the note hedges."""
    newer = {("0", P[0]): 0}
    (unknown,) = assess(committed(0, 100), cluster((0, 150), newer_than_read=newer))
    assert unknown.verdict is Verdict.TOPIC_RECREATED
    assert "producer's clock, unless the topic sets LogAppendTime" in " ".join(unknown.notes)
    assert "topic ids never recorded for orders" in unknown.notes[-1]
    create = cluster((0, 150), newer_than_read=newer, timestamp_types={T: "CreateTime"})
    (f,) = assess(committed(0, 100), create)
    assert f.verdict is Verdict.TOPIC_RECREATED and "newer by its CreateTime" in f.detail
    assert "the records' CreateTime (the producer's clock)" in f.notes[-1]
    broker = cluster((0, 150), newer_than_read=newer, timestamp_types={T: "LogAppendTime"})
    (g,) = assess(committed(0, 100), broker)
    assert g.verdict is Verdict.TOPIC_RECREATED and "newer by its LogAppendTime" in g.detail
    assert g.notes == ()


WITHIN_ALLOWANCE = (
    "topic ids never recorded for orders: a recreation with at least as many records as the position, "
    "within 10 min after the batch that read up to it, cannot be ruled out (run "
    "`repair_checkpoint(execute=True)` once while healthy to record them)"
)
NOT_COMPARED = (
    "topic ids never recorded for orders: a recreation with at least as many records as the position "
    "(no record timestamps compared) cannot be ruled out (run `repair_checkpoint(execute=True)` once "
    "while healthy to record them)"
)


def test_records_newer_than_the_batch_above_the_position_are_normal() -> None:
    """OK; but a topic recreated within the clock-skew allowance and filled past the position looks
    the same, so the note says what the timestamps could not rule out."""
    (f,) = assess(committed(0, 100), cluster((0, 150), newer_than_read={("0", P[0]): 100}))
    assert (f.verdict, f.notes) == (Verdict.OK, (WITHIN_ALLOWANCE,))


def test_no_record_newer_than_the_batch_keeps_the_note_that_recreation_cannot_be_ruled_out() -> None:
    """The time lookup ran and found no record newer than the batch (it answers the log end): a
    topic recreated soon after the last batch looks exactly so, hence OK, exit 0, and the note."""
    (f,) = assess(committed(0, 100), cluster((0, 150), newer_than_read={("0", P[0]): 150}))
    assert (f.verdict, f.notes, f.needs_action) == (Verdict.OK, (WITHIN_ALLOWANCE,), False)
    committed_view = cluster(
        (0, 150),
        newer_than_read={("0", P[0]): 160},  # the high watermark, past the last stable offset
        isolation=Isolation.READ_COMMITTED,
        high_watermarks={P[0]: 160},
    )
    (g,) = assess(committed(0, 100), committed_view)
    assert (g.verdict, g.notes) == (Verdict.OK, (WITHIN_ALLOWANCE,))


def test_no_record_newer_than_the_batch_is_no_evidence_even_past_the_log_end() -> None:
    # the lookup answers the log end (10) when nothing is newer: not a record below the position
    (f,) = assess(committed(0, 100), cluster((0, 10), newer_than_read={("0", P[0]): 10}))
    assert f.verdict is Verdict.BEYOND_LOG_END


def test_when_neither_ids_nor_timestamps_can_tell_the_finding_says_so() -> None:
    (f,) = assess(committed(0, 100), cluster((0, 150)))
    assert (f.verdict, f.notes) == (Verdict.OK, (NOT_COMPARED,))
    (g,) = assess(committed(0, 100, ids={T: "abc"}), cluster((0, 150), topic_ids={T: "abc"}))
    assert g.notes == ()


def test_recorded_ids_still_win() -> None:
    view = committed(0, 100, ids={T: "old"})
    (f,) = assess(view, cluster((0, 150), topic_ids={T: "new"}))
    assert f.verdict is Verdict.TOPIC_RECREATED and f.silently_skipped == 100
    assert replace(f, notes=()) == f
