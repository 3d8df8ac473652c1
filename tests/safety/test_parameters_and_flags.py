"""One bad value, two audiences (issue 28): a Python caller reads the parameter it passed, a CLI
user the flag they typed, each in one line, exit code 2. The broker named here does not exist: every
value is refused before a connection is tried."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from chk_builder import checkpoint_files, tree, write_checkpoint

from recovery import KafkaConfig, StrategyRequest, repair_checkpoint, starting_offsets, validate_checkpoint
from recovery.cli import main
from recovery.cli.flags import FLAGS, in_flag_words
from recovery.core.runway import parse_runway_warn
from recovery.core.specs import parse_time
from recovery.errors import ExitCode, InvalidInput, OffsetSpecError, RecoveryError
from recovery.fleet import validate_fleet
from recovery.kafka.groups import load_offsets_file

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = KafkaConfig("127.0.0.1:1", timeout_s=1)
NO_BROKER = ["-b", "127.0.0.1:1", "--timeout", "1"]
ISO = "give an ISO-8601 date-time such as 2026-11-22T06:00:00Z, or epoch milliseconds"
DURATION = "expected ISO-8601 like PT30M, P1DT2H or PT90S"
TIME = "expected earliest, latest, max-timestamp, epoch milliseconds or ISO-8601 such as 2026-11-22T06:00:00Z"
RUNWAY = "expected a duration such as PT6H, 6h, 1h30m or P1D"
NO_PORT = "has no port (HOST:PORT, as broker:9092)"
TWICE = "orders [0] is also on line 1 (one offset per partition)"


@dataclass(frozen=True)
class World:
    checkpoint: str
    bad_csv: str


@pytest.fixture
def world(tmp_path: Path) -> World:
    chk = write_checkpoint(tmp_path / "chk", checkpoint_files(partitions=1, batches=1, committed=1))
    bad = tmp_path / "bad.csv"
    bad.write_text("orders,0,5\norders,0,6\n")
    return World(str(chk), str(bad))


@dataclass(frozen=True)
class Case:
    call: Callable[[World], object]  # the library call with the bad value
    python: str  # what its caller reads
    argv: Callable[[World], list[str]]  # the same value through the CLI
    cli: str  # the one Error: line its user reads


CASES = {
    "runway_warn_s": Case(
        lambda w: validate_checkpoint(w.checkpoint, NOWHERE, runway_warn_s=-1),
        "runway_warn_s must be positive, not -1s",
        lambda w: ["validate", w.checkpoint, *NO_BROKER, "--runway-warn", "-1"],
        f"Error: Invalid value for '--runway-warn': '-1': {RUNWAY}",
    ),
    "runway_warn": Case(
        lambda w: parse_runway_warn("6 hours"),
        f"runway_warn '6 hours': {RUNWAY}",
        lambda w: ["validate", w.checkpoint, *NO_BROKER, "--runway-warn", "6 hours"],
        f"Error: Invalid value for '--runway-warn': '6 hours': {RUNWAY}",
    ),
    "to_datetime": Case(
        lambda w: repair_checkpoint(w.checkpoint, NOWHERE, StrategyRequest(to_datetime="yesterday")),
        f"to_datetime 'yesterday': {ISO}",
        lambda w: ["repair", w.checkpoint, *NO_BROKER, "--to-datetime", "yesterday"],
        f"Error: --to-datetime 'yesterday': {ISO}",
    ),
    "by_duration": Case(
        lambda w: repair_checkpoint(w.checkpoint, NOWHERE, StrategyRequest(by_duration="30m")),
        f"by_duration '30m': {DURATION}",
        lambda w: ["repair", w.checkpoint, *NO_BROKER, "--by-duration", "30m"],
        f"Error: --by-duration '30m': {DURATION}",
    ),
    "by_duration-starting-offsets": Case(
        lambda w: StrategyRequest(by_duration="P30000D").timestamp_ms(1_795_000_000_000),
        "by_duration 'P30000D': reaches back before 1970-01-01; no record is that old",
        lambda w: ["starting-offsets", *NO_BROKER, "-t", "orders", "--by-duration", "P30000D"],
        "Error: --by-duration 'P30000D': reaches back before 1970-01-01; no record is that old",
    ),
    "kind": Case(
        lambda w: repair_checkpoint(w.checkpoint, NOWHERE, StrategyRequest(shift_by=1, to_offset=3)),
        "kind clamp does not go with shift_by, to_offset",
        lambda w: ["repair", w.checkpoint, *NO_BROKER, "--shift-by", "1", "--to-offset", "3"],
        "Error: --strategy clamp does not go with --shift-by, --to-offset",
    ),
    "time": Case(
        lambda w: parse_time("yesterday"),
        f"time 'yesterday': {TIME}",
        lambda w: ["offsets", "-t", "orders", *NO_BROKER, "--time", "yesterday"],
        f"Error: Invalid value for '--time': --time 'yesterday': {TIME}",
    ),
    "time-as-from": Case(
        lambda w: parse_time("yesterday"),
        f"time 'yesterday': {TIME}",
        lambda w: ["read-to-end", "-t", "orders", *NO_BROKER, "--from", "yesterday"],
        f"Error: Invalid value for '--from': --from 'yesterday': {TIME}",
    ),
    "bootstrap_servers": Case(
        lambda w: KafkaConfig("broker"),
        f"bootstrap_servers: 'broker' {NO_PORT}",
        lambda w: ["offsets", "-t", "orders", "-b", "broker"],
        f"Error: --bootstrap-server: 'broker' {NO_PORT}",
    ),
    "overrides": Case(
        lambda w: KafkaConfig.from_options("b:1", overrides=["acks"]),
        "overrides acks...: expected prop=val (the value is not shown)",
        lambda w: ["offsets", "-t", "orders", *NO_BROKER, "-X", "acks"],
        "Error: -X acks...: expected prop=val (the value is not shown)",
    ),
    "parallel": Case(
        lambda w: validate_fleet(w.checkpoint, parallel=0),
        "parallel must be at least 1, not 0",
        lambda w: ["fleet", "validate", w.checkpoint, "--parallel", "0"],
        "Error: Invalid value for '--parallel': 0 is not in the range x>=1.",
    ),
    "from_file": Case(
        lambda w: repair_checkpoint(w.checkpoint, NOWHERE, StrategyRequest(from_file=w.bad_csv)),
        "from_file {csv}:2: " + TWICE,
        lambda w: ["repair", w.checkpoint, *NO_BROKER, "--from-file", w.bad_csv],
        "Error: --from-file {csv}:2: " + TWICE,
    ),
    "path-of-group-set": Case(
        lambda w: load_offsets_file(w.bad_csv),
        "path {csv}:2: " + TWICE,
        lambda w: ["group", "set", "g", *NO_BROKER, "--from-file", w.bad_csv],
        "Error: --from-file {csv}:2: " + TWICE,
    ),
    "source_id-and-sink": Case(
        lambda w: starting_offsets(NOWHERE, sink="/lake/t", topics=["orders"], timestamp_ms=0),
        "source_id and sink go with checkpoint",
        lambda w: ["starting-offsets", *NO_BROKER, "-t", "orders", "--to-datetime", "0", "--sink", "/lake/t"],
        "Error: --source and --sink go with --from-checkpoint",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_python_caller_reads_the_parameter_it_passed(name: str, world: World) -> None:
    case = CASES[name]
    with pytest.raises(RecoveryError) as refused:
        case.call(world)
    assert isinstance(refused.value, InvalidInput)
    assert str(refused.value) == case.python.format(csv=world.bad_csv)
    assert refused.value.exit_code is ExitCode.INVALID_INPUT
    assert not any(flag in str(refused.value) for flag in FLAGS.values() if flag.startswith("--"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_cli_user_reads_the_flag_they_typed(
    name: str, world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    before = tree(Path(world.checkpoint))
    with pytest.raises(SystemExit) as exited:
        main(case.argv(world))
    out, err = capsys.readouterr()
    assert (exited.value.code, out) == (2, ""), err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert errors == [case.cli.format(csv=world.bad_csv)]
    # One line, or Click's usage lines above the one line for a value Click itself refused.
    assert err == errors[0] + "\n" or (err.startswith("Usage: ") and err.endswith(errors[0] + "\n"))
    assert not any(parameter in err for parameter in FLAGS if "_" in parameter)
    assert tree(Path(world.checkpoint)) == before


# -- the mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (InvalidInput("scope ordrs: no such topic", parameter="scope"), "--topic ordrs: no such topic"),
        (OffsetSpecError("no_match 'fail': nothing", parameter="no_match"), "--no-match 'fail': nothing"),
        (InvalidInput("scopes x: ...", parameter="scope"), "scopes x: ..."),
        (InvalidInput("/chk: scope x", parameter="scope"), "/chk: scope x"),
        (InvalidInput("--time x: ...", parameter="--time"), "--time x: ..."),
        (InvalidInput("timestamp_ms -1: ...", parameter="timestamp_ms"), "timestamp_ms -1: ..."),
        (InvalidInput("scope x: ..."), "scope x: ..."),
    ],
    ids=["mapped", "state-error", "longer-word", "not-first", "a-flag-already", "no-flag", "untagged"],
)
def test_only_a_message_that_starts_with_its_parameter_gets_the_flag(
    error: RecoveryError, shown: str
) -> None:
    assert in_flag_words(error) == shown


def _tagged_parameters() -> set[str]:
    """Every name the library outside the CLI tags an error with: the string constants in a
    ``parameter=`` argument, and the string default of a function argument passed as one."""
    found: set[str] = set()
    for path in (ROOT / "recovery").rglob("*.py"):
        if path.parent.name in ("cli", "local"):
            continue
        tree_ = ast.parse(path.read_text())
        for function in ast.walk(tree_):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = function.args
            positional = arguments.posonlyargs + arguments.args
            defaults = {
                a.arg: d
                for a, d in [
                    *zip(
                        positional[len(positional) - len(arguments.defaults) :],
                        arguments.defaults,
                        strict=True,
                    ),
                    *((a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d),
                ]
            }
            for call in ast.walk(function):
                for keyword in call.keywords if isinstance(call, ast.Call) else ():
                    if keyword.arg != "parameter":
                        continue
                    for node in ast.walk(keyword.value):
                        if isinstance(node, ast.Name) and isinstance(defaults.get(node.id), ast.Constant):
                            node = defaults[node.id]
                        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
                            found.add(node.value)
    return found


# Tagged, yet never reaching the CLI's error boundary under that name: the CLI passes its flag as
# the parser's name, or has already checked the value in its own words.
NOT_FROM_THE_CLI = {
    "path": "load_offsets_file: the CLI passes --from-file/--compare; resolve_strategy passes from_file",
    "runway_warn": "parse_runway_warn: the CLI's --runway-warn callback calls it (no name)",
    "time": "parse_time: the CLI's TIME type passes its flag",
    "timestamp_ms": "the CLI hands the library only times it parsed and checked itself",
}


def test_every_parameter_the_library_names_has_a_flag_or_never_reaches_the_cli() -> None:
    tagged = _tagged_parameters()
    assert {"runway_warn_s", "scope", "from_file", "bootstrap_servers", "no_match"} <= tagged  # found
    assert tagged - set(FLAGS) - set(NOT_FROM_THE_CLI) == set()
    assert set(NOT_FROM_THE_CLI) <= tagged, "a listed name is no longer tagged: drop it"


@pytest.mark.slow  # a Python process per case
@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["-b", "nope"], "Error: --bootstrap-server: 'nope' has no port (HOST:PORT, as broker:9092)\n"),
        (["-b", "h:1", "-X", "foo"], "Error: -X foo...: expected prop=val (the value is not shown)\n"),
    ],
    ids=["bootstrap-server", "X"],
)
def test_a_job_names_its_own_flags_without_loading_the_cli(
    argv: list[str], line: str, tmp_path: Path
) -> None:
    job = Path(__file__).resolve().parents[2] / "jobs" / "lag_export.py"
    done = subprocess.run(
        [sys.executable, str(job), *argv, str(tmp_path / "chk")], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line)
