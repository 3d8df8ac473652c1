"""A topic deleted and created again soon after the last batch, on the real broker, with topic ids
never recorded (issue 28): record timestamps cannot tell (the new records are no more than the
clock-skew allowance newer than the batch), so ``validate`` says OK, exit 0, and must say that a
recreation cannot be ruled out rather than plain "healthy"."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from chk_builder import META, checkpoint_files, write_checkpoint
from stopped import stopped

from recovery.cli import main
from recovery.local import topics

BATCH_MS = int(re.search(r'"batchTimestampMs":(\d+)', META)[1])  # type: ignore[index]


def validate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["validate", *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_a_topic_recreated_soon_after_the_last_batch_is_ok_with_the_note_that_it_cannot_be_told(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    # Retention off: the rig checks retention every second and would delete records this old.
    topic = new_topic(2, config={"retention.ms": "-1"})
    produce(topic, 20, partitions=2, timestamp_ms=BATCH_MS - 60_000)  # what the batch read: 10 each
    files = checkpoint_files(topic=topic, partitions=2, batches=1, committed=1)
    chk = str(stopped(write_checkpoint(tmp_path / "chk", files)))
    topics.delete_topic(bootstrap, topic)
    topics.create_topic(bootstrap, topic, 2, {"retention.ms": "-1"})
    produce(topic, 40, partitions=2, timestamp_ms=BATCH_MS + 60_000)  # refilled a minute later

    code, out, err = validate([chk, "-b", bootstrap, "--no-runway", "--output", "json"], capsys)
    assert code == 0, out + err
    report = json.loads(out)
    rows = [(r["partition"], r["verdict"], r["notes"]) for r in report["partitions"]]
    note = (
        f"topic ids never recorded for {topic}: a recreation with at least as many records as the "
        "position, within 10 min after the batch that read up to it, cannot be ruled out (run "
        "`stream-recovery repair --execute` once while healthy to record them)"
    )
    assert rows == [(0, "OK", [note]), (1, "OK", [note])]

    code, out, err = validate([chk, "-b", bootstrap, "--no-runway"], capsys)
    assert code == 0, out + err
    assert f"% {topic} [0], {topic} [1]: {note}\n" in err
    assert err.endswith("% healthy as far as can be told (see the notes above)\n")


@pytest.mark.parametrize("batch_ms", [9_223_372_036_854_775_000, -600_001], ids=["near-long-max", "negative"])
def test_a_batch_time_no_time_lookup_can_ask_is_read_and_the_lookup_skipped(
    batch_ms: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    """Spark writes any long as ``batchTimestampMs``; the recreation lookup (that time plus the
    clock-skew allowance) is skipped where it is out of range, never refused as a bad parameter."""
    topic = new_topic(2, config={"retention.ms": "-1"})
    produce(topic, 20, partitions=2, timestamp_ms=BATCH_MS - 60_000)
    files = checkpoint_files(topic=topic, partitions=2, batches=1, committed=1)
    files = {
        rel: data.replace(
            f'"batchTimestampMs":{BATCH_MS}'.encode(), f'"batchTimestampMs":{batch_ms}'.encode()
        )
        for rel, data in files.items()
        if not rel.endswith(".crc")  # the edit would not match them; Spark reads a file without one
    }
    assert any(f'"batchTimestampMs":{batch_ms}'.encode() in data for data in files.values())
    chk = str(stopped(write_checkpoint(tmp_path / "chk", files)))

    code, out, err = validate([chk, "-b", bootstrap, "--no-runway", "--output", "json"], capsys)
    assert code == 0, out + err
    rows = [(r["partition"], r["verdict"]) for r in json.loads(out)["partitions"]]
    assert rows == [(0, "OK"), (1, "OK")]
