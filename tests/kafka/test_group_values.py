"""Consumer-group judgements (no broker): verdicts in the toolkit's words, exit codes, checks, the
strict offsets-file reader, whose-group-it-is and the backup file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recovery.core.model import TopicPartition, Verdict
from recovery.errors import (
    ExitCode,
    GroupActive,
    GroupNotOurs,
    InvalidInput,
    OffsetOutsideLog,
    OffsetSpecError,
)
from recovery.kafka.group_values import (
    EXPIRED,
    MARKER,
    GroupChange,
    GroupOffsets,
    backup_rows,
    check_in_log,
    check_inactive,
    check_known,
    check_ours,
    commit_metadata,
    expired_offsets,
    group_report,
    is_ours,
    judge,
    read_offsets_file,
)
from recovery.kafka.groups import default_backup_dir, load_offsets_file, write_backup
from recovery.kafka.values import MissingPartition, MissingReason, PartitionOffsets

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
TP2 = TopicPartition("orders", 2)


def log(tp: TopicPartition, start: int, end: int) -> PartitionOffsets:
    return PartitionOffsets(tp, start, end, None, "id")


def group(
    offsets: dict[TopicPartition, int],
    state: str = "Empty",
    members: int = 0,
    metadata: dict[TopicPartition, str] | None = None,
) -> GroupOffsets:
    return GroupOffsets("billing", state, members, offsets, metadata=metadata or {})


@pytest.mark.parametrize(
    ("committed", "verdict"),
    [(10, Verdict.OK), (50, Verdict.OK), (9, Verdict.BELOW_LOG_START), (51, Verdict.BEYOND_LOG_END)],
    ids=["log-start", "high-watermark", "below", "beyond"],
)
def test_a_committed_offset_is_judged_against_the_log(committed: int, verdict: Verdict) -> None:
    assert judge(committed, log(TP0, 10, 50)) is verdict


def test_a_gone_partition_keeps_its_reason_as_verdict() -> None:
    assert judge(3, MissingPartition(TP0, MissingReason.TOPIC_GONE)) is Verdict.TOPIC_GONE
    assert judge(3, MissingPartition(TP0, MissingReason.PARTITION_GONE)) is Verdict.PARTITION_GONE


def test_group_report_statuses_lag_and_exit_code() -> None:
    now = group({TP0: 40, TP1: 60})
    ranges = {TP0: log(TP0, 10, 50), TP1: log(TP1, 0, 50), TP2: log(TP2, 0, 7)}

    report = group_report(now, ranges, expired=[TP2])

    assert [(p.tp, p.status, p.lag) for p in report.partitions] == [
        (TP0, "OK", 10),
        (TP1, "BEYOND_LOG_END", -10),
        (TP2, EXPIRED, None),
    ]
    assert report.expired == (TP2,)
    assert report.exit_code is ExitCode.ACTION_NEEDED


def test_a_healthy_group_exits_0() -> None:
    report = group_report(group({TP0: 40}), {TP0: log(TP0, 10, 50)})
    assert report.exit_code is ExitCode.OK


def test_expired_offsets_are_the_ones_the_group_lost() -> None:
    assert expired_offsets({TP0: 1, TP1: 2}, group({TP1: 2})) == (TP0,)


def test_a_dry_run_with_changes_pending_exits_1() -> None:
    dry = GroupChange(group({TP0: 5}), {TP0: 7, TP1: 0}, executed=False)
    same = GroupChange(group({TP0: 5}), {TP0: 5}, executed=False)
    done = GroupChange(group({TP0: 5}), {TP0: 7}, executed=True)

    assert (dry.pending, dry.exit_code) == ((TP0, TP1), ExitCode.ACTION_NEEDED)
    assert (same.pending, same.exit_code) == ((), ExitCode.OK)
    assert (done.pending, done.exit_code) == ((), ExitCode.OK)


def test_an_active_group_is_refused() -> None:
    check_inactive(group({}, "Dead"))
    with pytest.raises(GroupActive, match=r"group billing is Stable with 2 active member\(s\)"):
        check_inactive(group({}, "Stable", 2))


def test_offsets_outside_the_log_are_refused_with_every_reason() -> None:
    ranges = {TP0: log(TP0, 10, 50), TP1: MissingPartition(TP1, MissingReason.PARTITION_GONE)}

    check_in_log({TP0: 10}, ranges)
    with pytest.raises(OffsetOutsideLog) as refused:
        check_in_log({TP0: 51, TP1: 0, TP2: 0}, ranges)

    assert str(refused.value) == (
        "orders [0] offset 51 is outside the log [10, 50]; orders [1] does not exist (PARTITION_GONE); "
        "orders [2] does not exist (not found). Nothing was written."
    )


def test_offsets_file_with_and_without_header() -> None:
    plain = read_offsets_file(["orders,0,5", "", "orders,1,7"], "plan.csv")
    ours = read_offsets_file(
        ["topic,partition,committed_offset,log_start_offset", "orders,0,5,0"], "export.csv"
    )

    assert plain == {TP0: 5, TP1: 7}
    assert ours == {TP0: 5}


def test_a_bad_offsets_line_names_file_and_line() -> None:
    with pytest.raises(OffsetSpecError) as refused:
        read_offsets_file(["orders,0,5", "orders,x,5"], "plan.csv")

    assert str(refused.value) == "plan.csv:2: partition 'x' is not an integer"
    assert refused.value.exit_code is ExitCode.INVALID_INPUT


@pytest.mark.parametrize(
    ("content", "wrong"),
    [
        (b"", "1: no topic,partition,offset rows"),
        (b"\n  \n", "1: no topic,partition,offset rows"),
        (b"topic,partition,offset\n", "1: no topic,partition,offset rows"),
        (b"orders,0,5,7\n", "1: 4 column(s), expected 3 (topic,partition,offset)"),
        (b"orders,0\n", "1: 2 column(s), expected 3 (topic,partition,offset)"),
        (b"orders,0,5\norders;1;5\n", "2: 1 column(s), expected 3 (topic,partition,offset)"),
        (b"orders,0,-1\n", "1: offset -1 of orders [0] is out of range [0, 2^63)"),
        (
            b"orders,0,9223372036854775808\n",
            "1: offset 9223372036854775808 of orders [0] is out of range [0, 2^63)",
        ),
        (b"orders,0,1e23\n", "1: offset '1e23' is not an integer"),
        (b"orders,0,+5\n", "1: offset '+5' is not an integer"),
        (b"orders,0,5_0\n", "1: offset '5_0' is not an integer"),
        ("orders,0,\u0665\n".encode(), "1: offset '\u0665' is not an integer"),
        (b"orders,0,\n", "1: offset '' is not an integer"),
        (b"orders,0," + b"9" * 5000 + b"\n", "1: offset '" + "9" * 40 + "...' is out of range"),
        (b"orders,-1,5\n", "1: partition -1 is out of range [0, 2^31)"),
        (b"orders,2147483648,5\n", "1: partition 2147483648 is out of range [0, 2^31)"),
        (b",0,5\n", "1: '' is not a Kafka topic name"),
        (b"ord ers,0,5\n", "1: 'ord ers' is not a Kafka topic name"),
        (
            b"orders,0,5\norders,1,6\norders,0,7\n",
            "3: orders [0] is also on line 1 (one offset per partition)",
        ),
        (b"orders,0,5\n\xff\xfe,1,2\n", "2: not UTF-8 text (invalid start byte at byte 0 of the line)"),
        (b"topic,partition,lag\norders,0,5\n", "1: the header has no offset column (topic,partition,lag)"),
        (b"topic,partition,offset\norders,0,5,1\n", "2: 4 column(s), expected 3 (topic,partition,offset)"),
        (b"orders,0,5\ntopic,partition,offset\n", "2: partition 'partition' is not an integer"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_malformed_offsets_file_is_one_line_naming_file_and_line(
    tmp_path: Path, content: bytes, wrong: str
) -> None:
    path = tmp_path / "plan.csv"
    path.write_bytes(content)

    with pytest.raises(OffsetSpecError) as refused:
        load_offsets_file(str(path))

    assert str(refused.value) == f"path {path}:{wrong}"
    assert "\n" not in str(refused.value)


def test_offsets_file_forms_that_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "plan.csv"
    path.write_bytes(
        b"\xef\xbb\xbftopic,partition,offset\r\n orders , 1 , 7 \r\n\r\norders,0,9223372036854775807\n"
    )
    export = [
        "topic,partition,committed_offset,log_start_offset,high_watermark,lag,status",
        "orders,0,5,0,9,4,OK",
        "orders,1,,0,9,,EXPIRED",
    ]

    assert load_offsets_file(str(path)) == {TP1: 7, TP0: 2**63 - 1}
    assert read_offsets_file(export, "show.csv", name="--compare") == {TP0: 5}


def test_an_offsets_path_that_is_no_file_is_bad_input(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    with pytest.raises(OffsetSpecError, match=r"^path .*/missing.csv: cannot read \(No such file"):
        load_offsets_file(str(tmp_path / "missing.csv"))
    with pytest.raises(OffsetSpecError, match=r"^--compare .*/fifo: not a regular file$"):
        load_offsets_file(str(fifo), name="--compare")  # never blocks on a FIFO
    with pytest.raises(OffsetSpecError, match=r": not a regular file$"):
        load_offsets_file(str(tmp_path))


_topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
_offsets = st.dictionaries(
    st.builds(TopicPartition, _topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), min_size=1
)


@given(_offsets)
def test_a_backup_reads_back_as_the_offsets_it_saved(offsets: dict[TopicPartition, int]) -> None:
    lines = backup_rows(group(offsets)).encode().splitlines(keepends=True)
    assert read_offsets_file(lines, "backup.csv") == offsets


@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_offsets_or_one_bad_input_line(data: bytes) -> None:
    try:
        offsets = read_offsets_file(data.splitlines(keepends=True), "x.csv")
    except OffsetSpecError as exc:
        assert str(exc).startswith("x.csv:") and "\n" not in str(exc)
    else:
        assert offsets and all(0 <= v < 2**63 and tp.partition >= 0 for tp, v in offsets.items())


def test_the_marker_says_who_wrote_an_offset() -> None:
    assert commit_metadata("lag_export") == "stream-recovery:1:lag_export"
    assert commit_metadata("x").startswith(MARKER)
    assert [is_ours(m) for m in ("stream-recovery:1:group set", "", None, "stream-recovery")] == [
        True,
        False,
        False,
        False,
    ]


def test_a_group_with_foreign_commits_is_refused_unless_forced() -> None:
    ours = commit_metadata("group set")
    foreign = group({TP0: 120, TP1: 115, TP2: 100}, metadata={TP0: "", TP1: ours})
    mine = group({TP0: 120, TP1: 115}, metadata={TP0: ours, TP1: commit_metadata("lag_export")})

    assert foreign.foreign == (TP0, TP2)
    assert mine.foreign == ()
    check_ours(mine, force=False)
    check_ours(group({}), force=False)  # no commits: anybody's to write
    check_ours(foreign, force=True)
    with pytest.raises(GroupNotOurs) as refused:
        check_ours(foreign, force=False)

    assert refused.value.exit_code is ExitCode.ACTION_NEEDED
    assert str(refused.value) == (
        "group billing has committed offsets stream-recovery did not write (orders [0] at 120, "
        "orders [2] at 100): it looks like another application's group. Check the group name; to "
        "overwrite them anyway add `force=True` (their current offsets are backed up first). Nothing was "
        "written."
    )


def test_partitions_the_cluster_lacks_are_bad_input() -> None:
    ranges = {TP0: log(TP0, 0, 5), TP1: MissingPartition(TP1, MissingReason.TOPIC_GONE)}

    check_known({TP0: 1}, ranges)
    with pytest.raises(InvalidInput) as refused:
        check_known({TP0: 1, TP1: 1, TP2: 1}, ranges)

    assert refused.value.exit_code is ExitCode.INVALID_INPUT
    assert str(refused.value) == (
        "no such partition on the cluster: orders [1] (TOPIC_GONE), orders [2] (not found). "
        "Nothing was written."
    )


def test_write_backup_saves_the_offsets_whole_and_never_replaces_a_file(tmp_path: Path) -> None:
    before = GroupOffsets("team/billing", "Empty", 0, {TP1: 115, TP0: 120})

    first = write_backup(before, tmp_path / "new" / "dir")
    second = write_backup(before, tmp_path / "new" / "dir")

    assert first.read_text() == "orders,0,120\norders,1,115\n"
    assert first != second and second.read_text() == first.read_text()
    assert first.name.startswith("team_billing-") and first.suffix == ".csv"
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([first.name, second.name])
    assert load_offsets_file(str(first)) == {TP0: 120, TP1: 115}


def test_a_backup_dir_that_cannot_be_written_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")

    with pytest.raises(InvalidInput) as refused:
        write_backup(group({TP0: 1}), blocker / "sub")

    assert str(refused.value) == (
        f"backup_dir {blocker}/sub: cannot write the backup of group billing (Not a directory). "
        "Nothing was written."
    )


def test_the_default_backup_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_backup_dir() == tmp_path / "stream-recovery" / "group-backups"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_backup_dir() == tmp_path / ".local" / "state" / "stream-recovery" / "group-backups"


def test_group_commands_exit_2_on_a_bad_file_before_any_kafka_io_and_3_when_unreachable(
    tmp_path: Path,
) -> None:
    """Bad input is refused before any request (the broker address is a closed port); a good file
    then gets as far as Kafka, which does not answer: exit 3."""
    from boundary import boundary  # the real error boundary
    from click.testing import CliRunner

    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"orders,0,5\norders,0,5\n")
    good = tmp_path / "good.csv"
    good.write_bytes(b"orders,0,5\n")
    nowhere = ["-b", "127.0.0.1:1", "--timeout", "2"]
    invoke = CliRunner().invoke

    set_bad = invoke(boundary, ["group", "set", "g", *nowhere, "--from-file", str(bad), "--execute"])
    show_bad = invoke(boundary, ["group", "show", "g", *nowhere, "--compare", str(bad), "--output", "json"])
    set_unreachable = invoke(boundary, ["group", "set", "g", *nowhere, "--from-file", str(good)])

    assert (set_bad.exit_code, set_bad.stdout) == (2, "")
    assert (
        set_bad.stderr
        == f"Error: --from-file {bad}:2: orders [0] is also on line 1 (one offset per partition)\n"
    )
    assert (show_bad.exit_code, show_bad.stdout) == (2, "")
    assert show_bad.stderr.startswith(f"Error: --compare {bad}:2: ")
    assert set_unreachable.exit_code == 3, set_unreachable.output
    assert "no answer from the Kafka cluster at 127.0.0.1:1" in set_unreachable.stderr


def test_group_backups_go_to_a_local_directory() -> None:
    with pytest.raises(InvalidInput, match=r"^backup_dir s3://b/x: group backups go to a local directory$"):
        write_backup(group({TP0: 1}), "s3://b/x")
