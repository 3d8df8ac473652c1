"""The Kafka commands start fast and document themselves (no broker needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from recovery.cli import cli


def test_help_does_not_import_confluent_kafka_or_heavy_libraries() -> None:
    code = (
        "import sys\n"
        "from recovery.cli import main\n"
        "try:\n    main(['offsets', '--help'])\nexcept SystemExit:\n    pass\n"
        "names = ('confluent_kafka', 'pyspark', 'pyarrow', 'pandas', 'deltalake')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "command",
    [["offsets"], ["read-to-end"], ["group", "show"], ["group", "set"]],
    ids=["offsets", "read-to-end", "group-show", "group-set"],
)
def test_each_command_has_help_with_an_example_and_documented_json_keys(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert "JSON" in result.output
    assert "-b, --bootstrap-server" in result.output and "--command-config FILE" in result.output


def test_offsets_help_lists_every_json_key() -> None:
    from recovery.cli.report.offsets import OFFSETS_JSON_KEYS

    help_text = CliRunner().invoke(cli, ["offsets", "--help"]).output
    for key in OFFSETS_JSON_KEYS:
        assert key in help_text, key


@pytest.mark.parametrize("command", ["offsets", "read-to-end"])
def test_a_command_without_topic_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "-b", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "give the partitions to look at with --topic SPEC" in result.output


def test_topic_and_topic_partitions_are_one_option_with_one_grammar() -> None:
    help_text = CliRunner().invoke(cli, ["offsets", "--help"]).output
    assert "-t, --topic, --topic-partitions SPEC" in help_text


def test_group_set_is_a_dry_run_unless_execute() -> None:
    help_text = CliRunner().invoke(cli, ["group", "set", "--help"]).output
    assert "--dry-run / --execute" in help_text


def test_group_show_documents_the_toolkit_verdicts() -> None:
    help_text = CliRunner().invoke(cli, ["group", "show", "--help"]).output
    assert "BEYOND_LOG_END" in help_text and "ABOVE_HIGH_WATERMARK" not in help_text


@pytest.mark.parametrize("automatic", [True, False], ids=["collector-on", "collector-off"])
def test_a_command_runs_without_the_cyclic_collector_and_gives_it_back(
    monkeypatch: pytest.MonkeyPatch, automatic: bool
) -> None:
    import gc

    import recovery.cli

    during: list[bool] = []

    def run(*_args: object) -> None:  # as the real one: every command ends in SystemExit
        during.append(gc.isenabled())
        raise SystemExit(0)

    monkeypatch.setattr(recovery.cli, "run", run)
    before, was_on = gc.get_threshold(), gc.isenabled()
    (gc.enable if automatic else gc.disable)()
    try:
        with pytest.raises(SystemExit):
            recovery.cli.main(["checkpoint", "--help"])
        assert during == [False]
        # Given back as it was: on when it was on, off (a caller's choice) when it was off; the
        # thresholds untouched.
        assert gc.isenabled() is automatic
        assert gc.get_threshold() == before
    finally:
        (gc.enable if was_on else gc.disable)()
