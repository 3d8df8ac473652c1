"""A malformed hold record is bad input naming the file and the field, never guessed from: nothing
may be put back from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from recovery.errors import CheckpointFormatError
from recovery.hold import read_holds

ENTRY = '"values":{"retention.ms":{"original":null,"held":"7"}},"held_at_ms":1,"by":"a","why":"b"'


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{not json", "the file"),
        ("[" * 5000 + "]" * 5000, "the file"),
        ('{"version":true,"topics":{}}', "version"),
        ('{"version":2,"topics":{}}', "version 2 is not 1"),
        ('{"version":1,"topics":{"t":{' + ENTRY + ',"protect_until":{"0":1e400}}}}', "protect_until.0"),
        ('{"version":1,"topics":{"t":{' + ENTRY + ',"protect_until":{"x":1}}}}', "protect_until.x"),
        ('{"version":1,"topics":{"t":{' + ENTRY + ',"protect_until":{"0":true}}}}', "protect_until.0"),
        ('{"version":1,"topics":{"t":{' + ENTRY.replace('"7"', "null") + ',"protect_until":{}}}}', "held"),
        ('{"version":1,"topics":{"t":{' + ENTRY + ',"protect_until":{},"extra":1}}}', "extra"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_file_and_field(
    tmp_path: Path, text: str, field: str
) -> None:
    (tmp_path / "_recovery").mkdir()
    (tmp_path / "_recovery/retention-hold.json").write_text(text)
    with pytest.raises(CheckpointFormatError) as raised:
        read_holds(str(tmp_path))
    message = str(raised.value)
    assert message.startswith(f"{tmp_path}/_recovery/retention-hold.json: ") and "\n" not in message
    assert field in message


def test_a_well_formed_record_reads_back(tmp_path: Path) -> None:
    (tmp_path / "_recovery").mkdir()
    (tmp_path / "_recovery/retention-hold.json").write_text(
        '{"version":1,"topics":{"t":{' + ENTRY + ',"protect_until":{"0":12}}}}'
    )
    (record,) = read_holds(str(tmp_path)).values()
    assert (record.topic, dict(record.protect_until), record.values["retention.ms"].original) == (
        "t",
        {0: 12},
        None,
    )
