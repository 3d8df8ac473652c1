"""``checkpoint show`` on a checkpoint of 100,000 partitions: the table is summarised (one line per
topic, a bounded number of lines on stdout and stderr), ``--all`` and ``--output json`` hold every
partition. Timings are not asserted here: benchmarks/checkpoint_scale.py measures them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chk_builder import META, QUERY_ID, write_checkpoint
from hypothesis import given, settings
from hypothesis import strategies as st

from recovery.checkpoint.crc import checksum_file, crc_name
from recovery.cli import main
from recovery.cli.render import json_text
from recovery.cli.report.checkpoint import PAGE_ROWS

TOPICS = {"orders": 60_000, "payments": 40_000}  # 100,000 partitions


def kafka_json(offset: int) -> str:
    """Partition p of each topic at ``offset + p`` (so the summary has distinct min and max)."""
    return json.dumps(
        {topic: {str(p): offset + p for p in range(count)} for topic, count in TOPICS.items()},
        separators=(",", ":"),
    )


def big_checkpoint(root: Path) -> Path:
    files = {"metadata": f'{{"id":"{QUERY_ID}"}}'.encode()}
    for batch in (0, 1):
        files[f"offsets/{batch}"] = f"v1\n{META}\n{kafka_json(1000 * (batch + 1))}".encode()
    files["commits/0"] = b'v1\n{"nextBatchWatermarkMs":0}'
    files["sources/0/0"] = b"\x00v1\n" + kafka_json(0).encode()
    for rel, data in list(files.items()):
        parent, _, name = rel.rpartition("/")
        files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    return write_checkpoint(root, files)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return big_checkpoint(tmp_path_factory.mktemp("scale") / "chk")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_table_is_summarised_by_topic(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "checkpoint", "show", str(big))
    assert code == 0
    assert out.splitlines() == [
        "SOURCE  KIND   TOPIC     PARTITIONS  MIN_OFFSET  MAX_OFFSET  MIN_INITIAL  MAX_INITIAL",
        "0       kafka  orders         60000        2000       61999            0        59999",
        "0       kafka  payments       40000        2000       41999            0        39999",
    ]
    assert len(err.splitlines()) < 15  # context lines only, never one per partition
    assert err.splitlines()[-1] == (
        f"% 100000 partitions in 2 topics: one line per topic (more than {PAGE_ROWS}); "
        "add --all for one line per partition, or --output json"
    )


def test_all_lists_every_partition(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "checkpoint", "show", str(big), "--all")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + 100_000
    assert lines[0].split() == ["SOURCE", "KIND", "TOPIC", "PARTITION", "OFFSET", "INITIAL"]
    assert lines[1].split() == ["0", "kafka", "orders", "0", "2000", "0"]
    assert lines[-1].split() == ["0", "kafka", "payments", "39999", "41999", "39999"]
    assert len(err.splitlines()) < 15 and "one line per topic" not in err


def test_json_is_complete(big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "checkpoint", "show", str(big), "--output", "json")
    assert (code, err) == (0, "")
    body = json.loads(out)
    assert out == json.dumps(body, indent=2) + "\n"  # the fast encoder writes json.dumps' text
    (source,) = body["sources"]
    assert len(source["offsets"]) == len(source["initial_offsets"]) == 100_000
    assert source["offsets"][0] == {"topic": "orders", "partition": 0, "offset": 2000}
    assert source["offsets"][-1] == {"topic": "payments", "partition": 39999, "offset": 41999}
    assert source["initial_offsets"][-1] == {"topic": "payments", "partition": 39999, "offset": 39999}


def test_small_checkpoint_table_is_not_summarised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_checkpoint(tmp_path / "chk", partitions=PAGE_ROWS)
    code, out, err = run(capsys, "checkpoint", "show", str(root))
    assert code == 0 and len(out.splitlines()) == 1 + PAGE_ROWS
    assert "one line per topic" not in err


@pytest.mark.parametrize(
    "value",
    [
        {"rows": [{"a": 1, "b": "x\n},\n    {"}, {"c": None, "d": 1.5}], "empty": [], "flat": [1, "2"]},
        [{"a": {}}, {"b": [1, {"c": True}]}],
        {"k": ({"x": 1},), "n": {1: 2}, "e": {}},
        [[1, 2], [], [{"a": "é"}]],
        # validate's partition rows: empty lists and objects among scalars
        [{"a": 1, "notes": [], "e": {}}, {"a": 2, "notes": ["x"], "e": {}}, {"e": {}, "a": 3}],
        [{"notes": [], "a": None}, {"notes": [], "a": "}},"}],
        [[], {}, [[]], [{}]],
        # control characters, escaped as json.dumps escapes them
        [{"a": "\x000", "notes": ["x"]}, {"a": "\x0099", "notes": ["y", "z"]}],
        [{"a": [[], []], "b": [1, "]"], "c": {"d": [2]}}, {"a": ["[", "],\n  ["]}],
        # escaped as json.dumps escapes them: DEL, a character beyond the BMP, a non-string key
        {"del": "\x7f", "clef": "\U0001d11e", "é": "\x00\x1f", 7: None, True: [], None: 1.5},
        # what orjson refuses, json.dumps writes: an integer beyond 64 bits, a lone surrogate
        [2**70, "\ud800"],
    ],
)
def test_json_text_matches_json_dumps(value: object) -> None:
    assert json_text(value) == json.dumps(value, indent=2)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from("abc"), _JSON, max_size=3), max_size=4) | _JSON)
def test_json_text_matches_json_dumps_for_any_value(value: object) -> None:
    assert json_text(value) == json.dumps(value, indent=2)


def test_emit_json_writes_text_to_a_stdout_without_a_binary_buffer() -> None:
    import contextlib
    import io

    from recovery.cli.render import emit_json

    body = {"a": [1, "é"], "b": None}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        emit_json(body)
    assert out.getvalue() == json.dumps(body, indent=2) + "\n"


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.floats(allow_nan=False, allow_infinity=False), st.lists, max_leaves=10))
def test_json_text_writes_floats_with_their_value(value: object) -> None:
    # A float's spelling may differ from json.dumps's (1e-5 for 1e-05), never its value.
    assert json.loads(json_text(value)) == value
