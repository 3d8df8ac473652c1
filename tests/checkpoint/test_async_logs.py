"""Logs with gaps, as async progress tracking writes them (issue 25; the rig's: offsets 0, 2, 3, 4):
Spark with the option restarts from the previous batch on disk, and so does the toolkit's reading;
where N-1 is on disk both modes agree and the gap is only said."""

from __future__ import annotations

from pathlib import Path

from chk_builder import checkpoint_files, write_checkpoint

from recovery.checkpoint import open_checkpoint
from recovery.core.model import CheckpointFile, TopicPartition
from recovery.core.restart import Level, NextRun, plan_restart
from recovery.resume import checkpoint_view


def test_where_batch_n_minus_1_is_on_disk_the_gap_is_only_said() -> None:
    state = plan_restart([0, 2, 3, 4], [0, 2, 3])
    assert (state.next_run, state.start, state.previous, state.asynchronous) == (
        NextRun.RERUN_BATCH,
        CheckpointFile.offsets(3),
        3,
        True,
    )
    assert [(i.level, i.message) for i in state.issues if "gaps" in i.message] == [
        (
            Level.INFO,
            "offsets/ has gaps (missing 1), as async progress tracking leaves them; Spark restarts from "
            "offsets/3 either way",
        ),
        (Level.INFO, "commits/ has gaps (missing 1)"),
    ]


def test_where_it_is_not_the_previous_batch_on_disk_is_read(tmp_path: Path) -> None:
    files = checkpoint_files(batches=10, committed=6)  # batch b at 10 * (b + 1)
    gone = [
        f"{log}/{name}"
        for log in ("offsets", "commits")
        for b in (1, 2, 3, 6, 7, 8)
        for name in (b, f".{b}.crc")
    ]
    root = write_checkpoint(tmp_path / "chk", {k: v for k, v in files.items() if k not in gone})
    chk = open_checkpoint(str(root))
    state = chk.restart_state()
    assert (state.next_run, state.batch_id, state.start, state.previous) == (
        NextRun.RERUN_BATCH,
        9,
        CheckpointFile.offsets(5),
        5,
    )
    (warning,) = [i for i in state.issues if i.level is Level.WARNING]
    assert (
        "restarted without asyncProgressTrackingEnabled, Spark fails (batch 8 doesn't exist)"
        in warning.message
    )
    view, _ = checkpoint_view(chk)
    (source,) = view.sources
    assert (str(source.start_file), str(source.end_file)) == ("offsets/5", "offsets/9")
    assert dict(source.start)[TopicPartition("orders", 0)] == 60
    assert dict(source.end)[TopicPartition("orders", 0)] == 100
