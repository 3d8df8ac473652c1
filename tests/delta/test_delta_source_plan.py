"""The pure core for Delta source offsets and Delta sinks: values in, findings and plans out."""

from __future__ import annotations

import pytest

from recovery.checkpoint import format as fmt
from recovery.checkpoint.format import DeltaSourceOffset
from recovery.core.model import CheckpointFile
from recovery.delta.model import (
    DeltaMove,
    DeltaPlan,
    DeltaPosition,
    DeltaSourceLoss,
    DeltaSourceRead,
    DeltaStrategy,
    DeltaVerdict,
    TableLog,
    VersionFiles,
)
from recovery.delta.source import assess_source, check_sink, plan_source_repair

ID = "e6e704ca-e55c-408a-bc02-e2912dc225db"


def offset(version: int, *, index: int = -1, starting: bool = False, table_id: str = ID) -> DeltaSourceOffset:
    return DeltaSourceOffset(1, table_id, version, index, starting)


def read(start: DeltaSourceOffset | None, end: DeltaSourceOffset, *, rerun: bool = False) -> DeltaSourceRead:
    return DeltaSourceRead(
        "0",
        "/t",
        None if start is None else DeltaPosition(CheckpointFile.offsets(4), start),
        DeltaPosition(CheckpointFile.offsets(5), end),
        rerun,
    )


def log(
    commits: range, *, checkpoints: tuple[int, ...] = (), files: dict[int, VersionFiles] | None = None
) -> TableLog:
    return TableLog("/t", ID, max(commits), tuple(commits), checkpoints, files or {})


def plan(
    source: DeltaSourceRead,
    table: TableLog,
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
) -> DeltaPlan:
    return plan_source_repair(
        [source],
        {"0": table},
        strategy,
        checkpoint="/chk",
        query_id="q",
        batch_id=6,
        max_versions=max_versions,
        adopt_new_table=adopt_new_table,
    )


@pytest.mark.parametrize(
    ("commits", "checkpoints", "change", "snapshot"),
    [
        (range(0, 8), (), 0, 0),
        (range(7, 8), (7,), 7, 7),
        (range(4, 8), (3, 6), 4, 3),
        (range(5, 8), (4,), 5, 4),
    ],
    ids=["full-log", "cleaned-to-checkpoint", "checkpoint-inside-run", "checkpoint-just-before"],
)
def test_earliest_versions(commits: range, checkpoints: tuple[int, ...], change: int, snapshot: int) -> None:
    table = log(commits, checkpoints=checkpoints)
    assert (table.earliest_change, table.earliest_snapshot) == (change, snapshot)


def test_a_gap_in_the_log_starts_the_run_after_it() -> None:
    table = TableLog("/t", ID, 7, (0, 1, 2, 5, 6, 7), (4,))
    assert table.earliest_change == 5


def test_committed_batch_still_needs_its_start_version() -> None:
    """Spark calls getBatch(offsets/N-1, offsets/N) on restart even after commits/N."""
    finding = assess_source(read(offset(2), offset(5)), log(range(7, 8), checkpoints=(7,)))
    assert finding.verdict is DeltaVerdict.VERSIONS_GONE
    assert (finding.needed_from, finding.resume_from, finding.versions_lost) == (2, 5, 2)
    assert finding.spark_error == "DELTA_MISSING_FILES_UNEXPECTED_VERSION"


def test_rerun_batch_loses_from_its_start() -> None:
    finding = assess_source(read(offset(2), offset(5), rerun=True), log(range(7, 8), checkpoints=(7,)))
    assert finding.versions_lost == 5


def test_gone_versions_that_were_already_processed_lose_nothing_but_still_fail() -> None:
    finding = assess_source(read(offset(2), offset(8)), log(range(4, 8), checkpoints=(3,)))
    assert (finding.verdict, finding.versions_lost) == (DeltaVerdict.VERSIONS_GONE, 0)


def test_position_at_the_next_version_is_ok() -> None:
    finding = assess_source(read(offset(7), offset(8)), log(range(7, 8), checkpoints=(7,)))
    assert (finding.verdict, finding.spark_error) == (DeltaVerdict.OK, None)


def test_other_table_id_is_a_recreated_table() -> None:
    finding = assess_source(read(None, offset(3, table_id="old")), log(range(0, 2)))
    assert (finding.verdict, finding.spark_error) == (
        DeltaVerdict.TABLE_RECREATED,
        "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE",
    )


def test_initial_snapshot_that_cannot_be_rebuilt() -> None:
    finding = assess_source(read(None, offset(3, index=4, starting=True)), log(range(7, 8), checkpoints=(7,)))
    assert (finding.verdict, finding.spark_error) == (
        DeltaVerdict.SNAPSHOT_GONE,
        "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE",
    )


def test_first_batch_needs_the_snapshot_before_its_end() -> None:
    """DeltaSource.getBatch(None, end) rebuilds the snapshot of end.reservoirVersion - 1."""
    table = log(range(7, 9), checkpoints=(7,))
    finding = assess_source(read(None, offset(7)), table)
    assert (finding.verdict, finding.spark_error) == (
        DeltaVerdict.SNAPSHOT_GONE,
        "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE",
    )
    result = plan(read(None, offset(7)), table)
    assert result.moves == (DeltaMove("0", CheckpointFile.offsets(5), offset(7), offset(8)),)
    assert result.losses == (DeltaSourceLoss("0", versions_lost=0, versions_skipped=1, files_skipped=0),)


def test_vacuumed_files_of_versions_to_read() -> None:
    files = {2: VersionFiles(added=2, missing=2), 3: VersionFiles(added=0)}
    finding = assess_source(read(offset(1), offset(2)), log(range(0, 4), files=files))
    assert (finding.verdict, finding.files_missing, finding.spark_error) == (
        DeltaVerdict.FILES_GONE,
        2,
        "FAILED_READ_FILE.FILE_NOT_EXIST",
    )


def test_vacuumed_files_of_processed_versions_do_not_matter() -> None:
    files = {1: VersionFiles(added=2, missing=2), 2: VersionFiles(added=1)}
    assert assess_source(read(offset(1), offset(2)), log(range(0, 3), files=files)).verdict is DeltaVerdict.OK


def test_clamp_moves_both_ends_to_the_log_start() -> None:
    result = plan(read(offset(2), offset(5)), log(range(7, 8), checkpoints=(7,)))
    assert result.moves == (
        DeltaMove("0", CheckpointFile.offsets(4), offset(2), offset(7)),
        DeltaMove("0", CheckpointFile.offsets(5), offset(5), offset(7)),
    )
    assert result.losses == (DeltaSourceLoss("0", versions_lost=2, versions_skipped=0, files_skipped=0),)
    assert result.files == (CheckpointFile.offsets(4), CheckpointFile.offsets(5)) and result.refused is None


def test_clamp_keeps_an_end_that_is_still_readable() -> None:
    result = plan(read(offset(2), offset(8)), log(range(4, 8), checkpoints=(3,)))
    assert result.moves == (DeltaMove("0", CheckpointFile.offsets(4), offset(2), offset(4)),)
    assert result.losses == (DeltaSourceLoss("0", 0, 0, 0),)


def test_clamp_leaves_a_healthy_source_alone() -> None:
    result = plan(read(offset(7), offset(8)), log(range(0, 8)))
    assert result.moves == () and result.losses == ()


def test_latest_skips_what_is_still_there_and_counts_files() -> None:
    files = {v: VersionFiles(added=2) for v in range(0, 8)}
    result = plan(read(offset(4), offset(5)), log(range(0, 8), files=files), DeltaStrategy.LATEST)
    assert [m.new for m in result.moves] == [offset(8), offset(8)]
    assert result.losses == (DeltaSourceLoss("0", versions_lost=0, versions_skipped=3, files_skipped=6),)


def test_clamp_past_vacuumed_versions() -> None:
    files = {2: VersionFiles(added=2, missing=2), 3: VersionFiles(added=0)}
    result = plan(read(None, offset(2)), log(range(0, 4), files=files))
    assert result.moves == (DeltaMove("0", CheckpointFile.offsets(5), offset(2), offset(3)),)
    assert result.losses == (DeltaSourceLoss("0", versions_lost=0, versions_skipped=1, files_skipped=2),)


def test_recreated_table_is_refused_unless_adopted() -> None:
    table = log(range(0, 2))
    refused = plan(read(None, offset(3, table_id="old")), table)
    assert refused.refused is not None and "`adopt_new_table=True`" in refused.refused
    adopted = plan(read(None, offset(3, table_id="old")), table, adopt_new_table=True)
    assert adopted.refused is None
    # The whole new table: inside the initial snapshot of version 0, before its first file.
    assert adopted.moves == (
        DeltaMove("0", CheckpointFile.offsets(5), offset(3, table_id="old"), offset(0, starting=True)),
    )


def test_version_budget_refuses() -> None:
    result = plan(read(offset(2), offset(5)), log(range(7, 8), checkpoints=(7,)), max_versions=1)
    assert result.refused == "the plan loses or skips 2 versions, over the budget of 1"


@pytest.mark.parametrize(
    ("sink_version", "next_batch", "rerun", "changed", "warned"),
    [
        (None, 3, False, False, False),
        (2, 3, False, False, False),
        (3, 3, False, False, True),  # sink ahead of the checkpoint
        (5, 3, False, False, True),
        (3, 3, True, False, False),  # normal exactly-once re-run
        (3, 3, True, True, True),  # re-run batch changed by a repair: its new range is skipped
        (4, 3, True, False, True),
    ],
    ids=["never-written", "behind", "equal-next", "ahead", "rerun-same", "rerun-changed", "rerun-ahead"],
)
def test_check_sink(
    sink_version: int | None, next_batch: int, rerun: bool, changed: bool, warned: bool
) -> None:
    warning = check_sink(
        "/sink", "q", sink_version, next_batch=next_batch, rerun=rerun, rerun_changed=changed
    )
    assert (warning is not None) is warned
    if warning is not None:
        assert "DeltaSink skips batch" in warning.message and "/sink" in warning.message


def test_delta_offset_is_spelled_as_delta_spells_it() -> None:
    text = '{"sourceVersion":1,"reservoirId":"x","reservoirVersion":12,"index":-1,"isStartingVersion":false}'
    parsed = fmt.parse_source_offset("0", text, path="offsets/3", where="line 3").delta
    assert parsed is not None and fmt.delta_offset_json(parsed) == text


def test_with_delta_offset_changes_only_that_line() -> None:
    data = (
        b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n'
        b'{"sourceVersion":1,"reservoirId":"x","reservoirVersion":2,"index":-1,"isStartingVersion":false}\n'
        b'{"orders":{"0":5}}'
    )
    entry = fmt.parse_offset_log(data, batch_id=3)
    updated = fmt.with_delta_offset(entry, "0", DeltaSourceOffset(1, "x", 7, -1, False))
    assert fmt.serialize_offset_log(updated) == data.replace(b'"reservoirVersion":2', b'"reservoirVersion":7')
    with pytest.raises(ValueError, match="source 1 is not a Delta source"):
        fmt.with_delta_offset(entry, "1", DeltaSourceOffset(1, "x", 7, -1, False))


def test_initial_snapshot_offset_needs_commits_after_its_version() -> None:
    """DeltaSource reads the snapshot of v, then lists commits from v + 1: no commit v needed."""
    table = TableLog("/t", ID, 15, tuple(range(11, 16)), (10,))
    source = read(offset(10, index=5, starting=True), offset(10, index=9, starting=True))
    finding = assess_source(source, table)
    assert (finding.verdict, finding.spark_error, finding.needed_from) == (DeltaVerdict.OK, None, 11)
    assert plan(source, table).moves == ()


def test_unfinished_snapshot_that_is_gone_is_read_again_from_the_earliest_snapshot() -> None:
    """Moving past the snapshot would drop its unread files uncounted; clamp re-reads instead."""
    table = log(range(7, 9), checkpoints=(7,))
    source = read(None, offset(3, index=4, starting=True))
    result = plan(source, table)
    assert result.moves == (
        DeltaMove(
            "0", CheckpointFile.offsets(5), offset(3, index=4, starting=True), offset(7, starting=True)
        ),
    )
    assert result.losses == (DeltaSourceLoss("0", 0, 0, 0, reads_snapshot=7, rereads=True),)
    assert result.refused is None


def test_latest_past_an_unfinished_snapshot_counts_it_against_the_budget() -> None:
    table = log(range(7, 9), checkpoints=(7,))
    result = plan(read(None, offset(3, index=4, starting=True)), table, DeltaStrategy.LATEST, max_versions=5)
    assert [m.new for m in result.moves] == [offset(9)]
    # versions 4-6 gone, 7-8 skipped, and the rest of the snapshot of 3 (gone): 6 in all
    assert result.losses == (DeltaSourceLoss("0", versions_lost=4, versions_skipped=2, files_skipped=0),)
    assert result.refused == "the plan loses or skips 6 versions, over the budget of 5"


def test_an_end_past_the_table_needs_action_even_when_the_start_is_readable() -> None:
    table = log(range(0, 16))
    source = read(offset(14), offset(20))
    finding = assess_source(source, table)
    assert finding.verdict is DeltaVerdict.BEYOND_LATEST and finding.needs_action
    assert finding.spark_error is None
    assert "offsets/5 is at version 20, past the table's next version 16" in finding.detail
    result = plan(source, table)
    assert result.moves == (DeltaMove("0", CheckpointFile.offsets(5), offset(20), offset(16)),)
    assert result.losses == (DeltaSourceLoss("0", 0, 0, 0),)


def test_recreated_table_follows_the_strategy() -> None:
    table = log(range(0, 3))
    source = read(None, offset(3, table_id="old"))
    latest = plan(source, table, DeltaStrategy.LATEST, adopt_new_table=True)
    assert [m.new for m in latest.moves] == [offset(3)]
    # The old table's versions from 3 on were never read: an unknown number, never 0.
    assert latest.losses == (DeltaSourceLoss("0", 0, 3, 0, lost_unknown=True, lost_from=3),)
    clamp = plan(source, table, adopt_new_table=True)
    assert [m.new for m in clamp.moves] == [offset(0, starting=True)]
    assert clamp.losses == (DeltaSourceLoss("0", 0, 0, 0, 0, rereads=False, lost_unknown=True, lost_from=3),)
    assert clamp.lost_unknown and "an unknown number of rows lost, from version 3 of the old table" in (
        clamp.findings[0].detail
    )


def test_a_recreated_table_has_no_loss_budget_that_can_be_met() -> None:
    refused = plan(
        read(None, offset(3, table_id="old")), log(range(0, 3)), adopt_new_table=True, max_versions=100
    )
    assert refused.refused is not None and "cannot be counted" in refused.refused


def test_recreated_table_with_a_cleaned_log_is_read_from_its_earliest_snapshot() -> None:
    table = log(range(4, 6), checkpoints=(4,))
    clamp = plan(read(None, offset(3, table_id="old")), table, adopt_new_table=True)
    assert [m.new for m in clamp.moves] == [offset(4, starting=True)]
