"""Where a checkpoint resumes, read from files on disk (spec §5.1-5.2), and which topic ids a repair
records. No Kafka needed: these read checkpoints only, or take values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recovery.apply import _healthy_topic_ids
from recovery.checkpoint import open_checkpoint
from recovery.core.model import (
    CheckpointFile,
    CheckpointView,
    ClusterView,
    OffsetRange,
    SourcePosition,
    Strategy,
    TopicPartition,
)
from recovery.core.plan import decide_repair
from recovery.core.specs import parse_topic_partitions
from recovery.resume import checkpoint_view

MS = 1795329069884  # batchTimestampMs: the records below a batch's offsets were in Kafka by then
META = f'{{"batchWatermarkMs":0,"batchTimestampMs":{MS},"conf":{{}}}}'
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
F = CheckpointFile.parse


def write_checkpoint(
    root: Path, offsets: dict[int, list[str]], commits: list[int], initial: str | None
) -> Path:
    """A Spark-shaped checkpoint: ``offsets[N]`` are the source lines of offsets/N (v1)."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text('{"id":"8e2c1f3a-0000-4000-8000-000000000001"}')
    for batch, lines in offsets.items():
        (root / "offsets" / str(batch)).write_text("\n".join(["v1", META, *lines]))
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    if initial is not None:
        (root / "sources/0").mkdir(parents=True)
        (root / "sources/0/0").write_bytes(b"\x00v1\n" + initial.encode())
    return root


def view_of(root: Path) -> CheckpointView:
    return checkpoint_view(open_checkpoint(str(root)))[0]


@pytest.mark.parametrize(
    ("offsets", "commits", "expected"),
    [
        (
            {0: ['{"t":{"0":5}}', "3"], 1: ["-", "4"]},
            [0, 1],
            SourcePosition("0", F("offsets/0"), {T0: 5}, start_read_by_ms=MS),
        ),
        (
            {0: ["-", "3"], 1: ["-", "4"]},
            [0, 1],
            SourcePosition("0", F("sources/0/0"), {T0: 2}),
        ),
        (
            {0: ["-", "3"], 1: ['{"t":{"0":9}}', "4"]},
            [0],
            SourcePosition("0", F("sources/0/0"), {T0: 2}, F("offsets/1"), {T0: 9}, end_read_by_ms=MS),
        ),
        (
            {0: ['{"t":{"0":5}}', "3"], 1: ["-", "4"]},
            [0],
            SourcePosition("0", F("offsets/0"), {T0: 5}, start_read_by_ms=MS),
        ),
    ],
    ids=[
        "committed-dash-resumes-from-previous-batch",
        "committed-dash-twice-resumes-from-initial-offsets",
        "rerun-with-dash-start-starts-from-initial-offsets",
        "rerun-with-dash-end-has-no-data-for-the-source",
    ],
)
def test_a_dash_source_line_resumes_where_spark_resumes_it(
    tmp_path: Path, offsets: dict[int, list[str]], commits: list[int], expected: SourcePosition
) -> None:
    view = view_of(write_checkpoint(tmp_path, offsets, commits, initial='{"t":{"0":2}}'))
    assert view.sources == (expected,)  # source 1 (a rate source: "3", "4") is not Kafka


def test_an_unreadable_topic_id_record_is_reported_not_fatal(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path, {0: ['{"t":{"0":5}}']}, [0], initial=None)
    (root / "_recovery").mkdir()
    (root / "_recovery/topic-ids.json").write_text("{not json")
    view, issues = checkpoint_view(open_checkpoint(str(root)))
    assert view.recorded_topic_ids == {}
    assert [i.message for i in issues if "topic-ids.json is unreadable" in i.message]


def test_only_topics_left_healthy_get_their_id_recorded() -> None:
    """A recreated topic out of --topic scope keeps its old id, so the next validate still sees it."""
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    view = CheckpointView(
        "/chk", "q", 3, False, (SourcePosition("0", F("offsets/2"), {a0: 10, b0: 5}),), {"a": "old"}
    )
    cluster = ClusterView({a0: OffsetRange(0, 50), b0: OffsetRange(20, 30)}, {"a": "new", "b": "bee"})
    plan = decide_repair(view, cluster, Strategy(scope=parse_topic_partitions("b")))
    assert [m.tp for m in plan.moves] == [b0]
    assert _healthy_topic_ids(plan, cluster) == {"b": "bee"}
    assert json.dumps(_healthy_topic_ids(decide_repair(view, cluster), cluster)) == '{"a": "new", "b": "bee"}'
