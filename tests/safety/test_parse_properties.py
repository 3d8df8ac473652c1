"""Arbitrary bytes in any file Spark reads on restart: the strict reader returns a value or raises
CheckpointFormatError (one line naming the file), never any other exception."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from chk_builder import checkpoint_files, write_checkpoint
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recovery.checkpoint import format as fmt
from recovery.checkpoint import open_checkpoint
from recovery.checkpoint.crc import checksum_file
from recovery.errors import CheckpointFormatError

GOOD = checkpoint_files(batches=3, committed=3)
READ_ON_RESTART = ["metadata", "offsets/1", "offsets/2", "commits/2", "sources/0/0"]

PARSERS: list[Callable[[bytes], object]] = [
    lambda b: fmt.parse_stream_metadata(b, path="metadata"),
    lambda b: fmt.parse_offset_log(b, batch_id=2, path="offsets/2"),
    lambda b: fmt.parse_commit_log(b, batch_id=2, path="commits/2"),
    lambda b: fmt.parse_initial_offsets(b, path="sources/0/0"),
    lambda b: fmt.parse_kafka_offsets(b.decode("utf-8", "replace"), path="x"),
]


def _one_line(exc: CheckpointFormatError, path: str) -> None:
    message = str(exc)
    assert "\n" not in message and message.startswith(path), message


def mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """The file's bytes cut, with bytes flipped, inserted or replaced: near-misses of real files."""
    n = len(data)
    return st.one_of(
        st.integers(0, n).map(lambda i: data[:i]),
        st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(
            lambda t: data[: t[0]] + bytes([t[1]]) + data[t[0] + 1 :]
        ),
        st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=8)).map(
            lambda t: data[: t[0]] + t[1] + data[t[0] :]
        ),
        st.binary(max_size=200),
    )


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400), st.integers(0, len(PARSERS) - 1))
def test_arbitrary_bytes_parse_or_raise_a_format_error(data: bytes, which: int) -> None:
    try:
        PARSERS[which](data)
    except CheckpointFormatError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(READ_ON_RESTART).flatmap(lambda rel: st.tuples(st.just(rel), mutations(GOOD[rel]))))
def test_near_misses_of_real_files_parse_or_raise(case: tuple[str, bytes]) -> None:
    rel, data = case
    parser = {
        "metadata": PARSERS[0],
        "offsets/1": PARSERS[1],
        "offsets/2": PARSERS[1],
        "commits/2": PARSERS[2],
        "sources/0/0": PARSERS[3],
    }[rel]
    try:
        parser(data)
    except CheckpointFormatError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(READ_ON_RESTART).flatmap(lambda rel: st.tuples(st.just(rel), mutations(GOOD[rel]))),
    st.booleans(),
)
def test_a_checkpoint_with_any_damaged_file_opens_or_is_refused(
    tmp_path: Path, case: tuple[str, bytes], fix_crc: bool
) -> None:
    rel, data = case
    files = dict(GOOD)
    files[rel] = data
    if fix_crc:
        parent, _, name = rel.rpartition("/")
        files[f"{parent}/.{name}.crc" if parent else f".{name}.crc"] = checksum_file(data)
    root = write_checkpoint(tmp_path / uuid.uuid4().hex, files)
    try:
        chk = open_checkpoint(str(root))
    except CheckpointFormatError as exc:
        _one_line(exc, str(root))
        return
    chk.restart_state()
    for source in chk.latest_offsets().kafka_sources:  # type: ignore[union-attr]
        assert source.kafka is not None
        assert all(0 <= o < 2**63 for o in source.kafka.offsets.values())
