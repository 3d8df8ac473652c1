"""Every command and subcommand of the CLI, through each exit code it documents (issue 10 part 8):

    0 done / nothing to do; 1 action needed, a dry run with changes pending, or refused;
    2 bad input or usage; 3 Kafka or storage unreachable.

The commands are enumerated from the click group itself, so a new command without a row in CASES
fails ``test_every_command_has_a_case_for_every_code``. A code a command cannot give has a reason
instead of a case. Cases that need the broker run in ``test_exit_code_on_the_rig`` (integration);
the others (local files, deltalake tables, an unreachable broker or S3 endpoint) in the fast lane.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pyarrow as pa
import pytest
from chk_builder import QUERY_ID, checkpoint_files, tree, write_checkpoint
from deltalake import DeltaTable, write_deltalake
from stopped import stopped

from recovery.checkpoint import open_checkpoint, rewrite_offsets
from recovery.cli import cli, main
from recovery.core.model import TopicPartition

CODES = (0, 1, 2, 3)
# deltalake (delta-rs) takes its S3 settings from the environment: an endpoint where nothing listens.
S3_DOWN_ENV = (
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ("AWS_ACCESS_KEY_ID", "k"),
    ("AWS_SECRET_ACCESS_KEY", "s"),
    ("AWS_REGION", "us-east-1"),
    ("AWS_ALLOW_HTTP", "true"),
)
NO_BROKER = ["-b", "127.0.0.1:1", "--timeout", "1"]
DELTA_META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leaf_commands(group: click.Group = cli, prefix: str = "") -> Iterator[str]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{path} ")
        else:
            yield path


@dataclass
class World:
    """What the cases run against: made on demand in the test's tmp dir (and on the rig's broker)."""

    tmp: Path
    bootstrap: str | None = None
    new_topic: Callable[..., str] | None = None
    produce: Callable[..., int] | None = None
    _n: int = field(default=0)

    def path(self, name: str) -> Path:
        self._n += 1
        return self.tmp / f"{self._n}-{name}"

    # -- storage ---------------------------------------------------------------------------------

    def checkpoint(self, topic: str = "orders", partitions: int = 3, batches: int = 3) -> str:
        """A stopped query's checkpoint: batch b at offset 10 * (b + 1) in every partition."""
        files = checkpoint_files(topic=topic, partitions=partitions, batches=batches, committed=batches)
        return str(stopped(write_checkpoint(self.path("chk"), files)))

    def interrupted(self) -> str:
        """A checkpoint holding the intent record of a command killed before it changed anything."""
        root = Path(self.checkpoint())
        (root / "_recovery").mkdir()
        (root / "_recovery/intent.json").write_text(
            json.dumps(
                {
                    "format": 1,
                    "token": "t",
                    "command": "repair --execute",
                    "host": socket.gethostname(),
                    "pid": 4_000_000,  # above pid_max: no such process
                    "started": "2026-01-01T00:00:00Z",
                    "proc_start": None,
                    "phase": "backup",
                    "backup_id": None,
                    "backup_root": None,
                    "files": [],
                }
            )
        )
        return str(root)

    def with_backup(self) -> tuple[str, str]:
        """A rewritten checkpoint and the id of the backup set holding its originals."""
        root = self.checkpoint()
        backup = rewrite_offsets(
            open_checkpoint(root), {2: {0: {TopicPartition("orders", 1): 25}}}, force=True
        )
        return root, backup.id

    def missing(self) -> str:
        return str(self.path("nothing-here"))

    def s3_down(self) -> list[str]:
        """A checkpoint URL on an S3 endpoint where nothing listens, and the options to reach it."""
        return [
            "s3://bucket/chk",
            "--storage-option",
            f"endpoint_url=http://127.0.0.1:{free_port()}",
            "--storage-option",
            "key=k",
            "--storage-option",
            "secret=s",
            "--storage-option",
            'config_kwargs={"retries":{"max_attempts":1},"connect_timeout":1}',
        ]

    def conf_dir(self, cluster: str = "127.0.0.1:1", checkpoint: str | None = None, extra: str = "") -> str:
        directory = self.path("conf")
        directory.mkdir()
        (directory / "clusters.toml").write_text(
            f'[cluster.main]\nbootstrap_servers = "{cluster}"\ntimeout = "2s"\n'
        )
        (directory / "jobs.toml").write_text(
            f'[job.orders]\ncluster = "main"\ncheckpoint = "{checkpoint or self.checkpoint()}"\n{extra}'
        )
        return str(directory)

    def bad_conf_dir(self) -> str:
        directory = self.path("conf")
        directory.mkdir()
        (directory / "jobs.toml").write_text("[job.orders\ncluster = ")
        return str(directory)

    # -- Delta -----------------------------------------------------------------------------------

    def delta_source(self, *, clean: bool) -> tuple[str, str]:
        """A Delta table of 5 versions (log cleaned up to a checkpoint if ``clean``) and the
        checkpoint of a query that read versions 2 then 3 of it."""
        table = self.path("table")
        for i in range(5):
            write_deltalake(
                str(table),
                pa.table({"id": [i]}),
                mode="append",
                configuration={"delta.logRetentionDuration": "interval 0 seconds"},
            )
        delta = DeltaTable(str(table))
        if clean:
            delta.create_checkpoint()
            delta.cleanup_metadata()
        chk = self.path("chk")
        (chk / "offsets").mkdir(parents=True)
        (chk / "commits").mkdir()
        (chk / "metadata").write_text(f'{{"id":"{QUERY_ID}"}}')
        for batch, version in enumerate([2, 3]):
            line = json.dumps(
                {
                    "sourceVersion": 1,
                    "reservoirId": delta.metadata().id,
                    "reservoirVersion": version,
                    "index": -1,
                    "isStartingVersion": False,
                },
                separators=(",", ":"),
            )
            (chk / "offsets" / str(batch)).write_text(f"v1\n{DELTA_META}\n{line}")
            (chk / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        return str(stopped(chk)), str(table)

    def ledger(self, topic: str = "orders", end: int = 5) -> str:
        from recovery.delta.ledger_conf import make_conf
        from recovery.delta.ledger_model import LedgerRow
        from recovery.delta.ledger_table import append_rows, create_ledger

        table = str(self.path("ledger"))
        create_ledger(table)
        conf = make_conf({"table": table, "pipeline": "p"})
        rows = [
            LedgerRow("p", 0, TopicPartition(topic, p), 0, end, 1_700_000_000_000_000, "job", "b0")
            for p in (0, 1)
        ]
        append_rows(conf, rows)
        return table

    def offsets_file(self, topic: str = "orders", offset: int = 5) -> str:
        path = self.path("offsets.csv")
        path.write_text(f"{topic},0,{offset}\n{topic},1,{offset}\n")
        return str(path)

    # -- Kafka (the rig) ---------------------------------------------------------------------------

    def topic(self, *, lost_to: int | None = None) -> str:
        """A topic of 2 partitions holding offsets 0-19 each; with ``lost_to`` partition 0's log
        starts there (DeleteRecords)."""
        assert self.new_topic is not None and self.produce is not None and self.bootstrap is not None
        # Records older than the checkpoint's batch (chk_builder's batchTimestampMs): no recreation.
        # Retention off: the rig checks retention every second and would delete records this old.
        topic = self.new_topic(2, config={"retention.ms": "-1"})
        self.produce(topic, 40, partitions=2, timestamp_ms=1_700_000_000_000)
        if lost_to is not None:
            from recovery.local import topics

            topics.delete_records(self.bootstrap, topic, {0: lost_to})
        return topic

    def kafka(self) -> list[str]:
        assert self.bootstrap is not None
        return ["-b", self.bootstrap]

    def group(self, topic: str, offset: int) -> str:
        """A consumer group (no members) with ``offset`` committed in both partitions of ``topic``."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTP

        group = f"exit-codes-{topic}"
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            consumer.commit(offsets=[KafkaTP(topic, p, offset) for p in (0, 1)], asynchronous=False)
        finally:
            consumer.close()
        return group


Argv = Callable[[World], list[str]]


@dataclass(frozen=True)
class Case:
    argv: Argv
    rig: bool = False  # needs the real broker
    env: tuple[tuple[str, str], ...] = ()  # set for the run (deltalake reads S3 settings from it)


def rig(argv: Argv) -> Case:
    return Case(argv, rig=True)


def _held(w: World, topic: str = "orders", record: str | None = None) -> str:
    """A stopped query's checkpoint (offset 10 in both partitions of ``topic``) with a retention
    hold recorded that protects up to offset 20: the query has not caught up. ``record``: the
    record's text instead (malformed, say)."""
    root = Path(w.checkpoint(topic, partitions=2, batches=1))
    held = {
        "version": 1,
        "topics": {
            topic: {
                "values": {"retention.ms": {"original": None, "held": "999999999999"}},
                "protect_until": {"0": 20, "1": 20},
                "held_at_ms": 1,
                "by": "test",
                "why": "test",
            }
        },
    }
    (root / "_recovery").mkdir(exist_ok=True)
    (root / "_recovery/retention-hold.json").write_text(record or json.dumps(held))
    return str(root)


def _hold_raises(w: World) -> list[str]:
    """A dry-run hold that would raise: records of 2023, kept 10 years, held 4,000 days more."""
    assert w.new_topic is not None and w.produce is not None
    topic = w.new_topic(2, config={"retention.ms": str(3650 * 86_400_000)})
    w.produce(topic, 40, partitions=2, timestamp_ms=1_700_000_000_000)
    chk = w.checkpoint(topic, partitions=2, batches=1)
    return ["retention", "hold", chk, *w.kafka(), "--keep", "4000d", "--max-retention", "20000d"]


def _restore_pending(w: World) -> list[str]:
    root, backup = w.with_backup()
    return ["checkpoint", "restore", root, "--backup", backup]


def _restore_done(w: World) -> list[str]:
    root, backup = w.with_backup()
    return ["checkpoint", "restore", root, "--backup", backup, "--execute"]


def _rig_checkpoint(w: World, *, lost: bool) -> list[str]:
    topic = w.topic(lost_to=15 if lost else None)
    return [w.checkpoint(topic, partitions=2, batches=1), *w.kafka()]


CASES: dict[str, dict[int, Case | str]] = {
    "checkpoint backups": {
        0: Case(lambda w: ["checkpoint", "backups", w.with_backup()[0]]),
        1: "a listing: it never finds anything to act on",
        2: Case(lambda w: ["checkpoint", "backups", w.missing()]),
        3: Case(lambda w: ["checkpoint", "backups", *w.s3_down()]),
    },
    "checkpoint recover": {
        0: Case(lambda w: ["checkpoint", "recover", w.checkpoint()]),
        1: Case(lambda w: ["checkpoint", "recover", w.interrupted()]),
        2: Case(lambda w: ["checkpoint", "recover", w.missing()]),
        3: Case(lambda w: ["checkpoint", "recover", *w.s3_down()]),
    },
    "checkpoint restore": {
        0: Case(_restore_done),
        1: Case(_restore_pending),
        2: Case(lambda w: ["checkpoint", "restore", w.missing(), "--execute"]),
        3: Case(lambda w: ["checkpoint", "restore", *w.s3_down()]),
    },
    "checkpoint show": {
        0: Case(lambda w: ["checkpoint", "show", w.checkpoint()]),
        1: Case(lambda w: ["checkpoint", "show", w.interrupted()]),
        2: Case(lambda w: ["checkpoint", "show", w.missing()]),
        3: Case(lambda w: ["checkpoint", "show", *w.s3_down()]),
    },
    "conf check": {
        0: Case(lambda w: ["conf", "check", w.conf_dir()]),
        1: "reads the configuration only: nothing to act on",
        2: Case(lambda w: ["conf", "check", w.bad_conf_dir()]),
        3: "reads local files only: talks to no cluster or store",
    },
    "delta-source repair": {
        0: Case(lambda w: ["delta-source", "repair", *_delta(w, clean=False), "--execute"]),
        1: Case(lambda w: ["delta-source", "repair", *_delta(w, clean=True)]),
        2: Case(lambda w: ["delta-source", "repair", w.missing(), "--table", w.missing()]),
        3: Case(lambda w: ["delta-source", "repair", *w.s3_down(), "--table", w.missing()]),
    },
    "delta-source validate": {
        0: Case(lambda w: ["delta-source", "validate", *_delta(w, clean=False)]),
        1: Case(lambda w: ["delta-source", "validate", *_delta(w, clean=True)]),
        2: Case(lambda w: ["delta-source", "validate", w.missing(), "--table", w.missing()]),
        3: Case(lambda w: ["delta-source", "validate", *w.s3_down(), "--table", w.missing()]),
    },
    "fleet validate": {
        0: rig(lambda w: ["fleet", "validate", _fleet(w, lost=False)]),
        1: rig(lambda w: ["fleet", "validate", _fleet(w, lost=True)]),
        2: Case(lambda w: ["fleet", "validate", w.bad_conf_dir()]),
        3: Case(lambda w: ["fleet", "validate", w.conf_dir()]),
    },
    "fleet hold": {
        0: Case(lambda w: ["fleet", "hold", w.conf_dir()]),  # no job opted in: nothing to ask Kafka
        1: rig(lambda w: ["fleet", "hold", _fleet_hold_refused(w)]),
        2: Case(lambda w: ["fleet", "hold", w.bad_conf_dir()]),
        3: Case(lambda w: ["fleet", "hold", w.conf_dir(extra='hold = "2d"\n')]),
    },
    "fleet release": {
        0: Case(lambda w: ["fleet", "release", w.conf_dir()]),  # nothing recorded: nothing to ask Kafka
        1: rig(lambda w: ["fleet", "release", w.conf_dir(w.bootstrap or "", _held(w, w.topic()))]),
        2: Case(lambda w: ["fleet", "release", w.bad_conf_dir()]),
        3: Case(lambda w: ["fleet", "release", w.conf_dir(checkpoint=_held(w))]),
    },
    "fleet serve": {
        0: "a service: stopped by SIGTERM it exits 0 (tests/fleet/test_serve_rig.py)",
        1: "a service: what needs action is in its metrics and API, not its exit code",
        2: Case(lambda w: ["fleet", "serve", w.bad_conf_dir(), "--metrics-port", "0"]),
        3: "a service: an unreachable cluster is its jobs' verdict (UNREACHABLE), not an exit",
    },
    "group set": {
        0: rig(lambda w: _group_set(w, "--execute")),
        1: rig(lambda w: _group_set(w)),
        2: Case(lambda w: ["group", "set", "-b", "::garbage::", "g", "--from-file", w.offsets_file()]),
        3: Case(lambda w: ["group", "set", *NO_BROKER, "g", "--from-file", w.offsets_file(), "--execute"]),
    },
    "group show": {
        0: rig(lambda w: ["group", "show", *w.kafka(), w.group(w.topic(), 10)]),
        1: rig(lambda w: ["group", "show", *w.kafka(), w.group(w.topic(lost_to=15), 10)]),
        2: Case(lambda w: ["group", "show", "-b", "broker", "g"]),
        3: Case(lambda w: ["group", "show", *NO_BROKER, "g"]),
    },
    "ledger repair": {
        0: rig(
            lambda w: ["ledger", "repair", w.ledger(w.topic()), "--pipeline", "p", *w.kafka(), "--execute"]
        ),
        1: rig(lambda w: ["ledger", "repair", w.ledger(w.topic(lost_to=15)), "--pipeline", "p", *w.kafka()]),
        2: Case(lambda w: ["ledger", "repair", w.missing(), "--pipeline", "p", *NO_BROKER]),
        3: Case(lambda w: ["ledger", "repair", w.ledger(), "--pipeline", "p", *NO_BROKER]),
    },
    "ledger show": {
        0: Case(lambda w: ["ledger", "show", w.ledger(), "--pipeline", "p"]),
        1: "prints the ledger's rows: it judges nothing",
        2: Case(lambda w: ["ledger", "show", w.missing(), "--pipeline", "p"]),
        3: Case(lambda w: ["ledger", "show", "s3://bucket/ledger", "--pipeline", "p"], env=S3_DOWN_ENV),
    },
    "ledger validate": {
        0: rig(lambda w: ["ledger", "validate", w.ledger(w.topic()), "--pipeline", "p", *w.kafka()]),
        1: rig(
            lambda w: ["ledger", "validate", w.ledger(w.topic(lost_to=15)), "--pipeline", "p", *w.kafka()]
        ),
        2: Case(lambda w: ["ledger", "validate", w.missing(), "--pipeline", "p", *NO_BROKER]),
        3: Case(lambda w: ["ledger", "validate", w.ledger(), "--pipeline", "p", *NO_BROKER]),
    },
    "offsets": {
        0: rig(lambda w: ["offsets", *w.kafka(), "-t", w.topic()]),
        1: rig(lambda w: ["offsets", *w.kafka(), "-t", f"{w.topic()}:7"]),
        2: Case(lambda w: ["offsets", "-b", "::garbage::", "-t", "orders"]),
        3: Case(lambda w: ["offsets", *NO_BROKER, "-t", "orders"]),
    },
    "read-to-end": {
        0: rig(lambda w: ["read-to-end", *w.kafka(), "-t", w.topic(), "-q"]),
        1: rig(lambda w: ["read-to-end", *w.kafka(), "-t", f"{w.topic()}:7", "-q"]),
        2: Case(lambda w: ["read-to-end", "-b", "broker:0", "-t", "orders"]),
        3: Case(lambda w: ["read-to-end", *NO_BROKER, "-t", "orders"]),
    },
    "repair": {
        0: rig(lambda w: ["repair", *_rig_checkpoint(w, lost=False), "--execute"]),
        1: rig(lambda w: ["repair", *_rig_checkpoint(w, lost=True)]),
        2: Case(lambda w: ["repair", w.missing(), *NO_BROKER]),
        3: Case(lambda w: ["repair", w.checkpoint(), *NO_BROKER]),
    },
    "retention hold": {
        0: rig(lambda w: ["retention", "hold", *_rig_checkpoint(w, lost=False), "--keep", "1d"]),
        1: rig(_hold_raises),
        2: Case(lambda w: ["retention", "hold", w.missing(), *NO_BROKER, "--keep", "1d"]),
        3: Case(lambda w: ["retention", "hold", w.checkpoint(), *NO_BROKER, "--keep", "1d"]),
    },
    "retention release": {
        0: Case(lambda w: ["retention", "release", w.checkpoint(), *NO_BROKER]),
        1: rig(lambda w: ["retention", "release", _held(w, w.topic()), *w.kafka()]),
        2: Case(lambda w: ["retention", "release", _held(w, record="{not json"), *NO_BROKER]),
        3: Case(lambda w: ["retention", "release", _held(w), *NO_BROKER]),
    },
    "starting-offsets": {
        0: rig(
            lambda w: [
                "starting-offsets",
                *w.kafka(),
                "-t",
                w.topic(),
                "--to-datetime",
                "2020-01-01T00:00:00Z",
            ]
        ),
        1: rig(
            lambda w: [
                "starting-offsets",
                *w.kafka(),
                "-t",
                w.topic(),
                "--to-datetime",
                "2999-01-01T00:00:00Z",
                "--no-match",
                "fail",
            ]
        ),
        2: Case(lambda w: ["starting-offsets", *NO_BROKER, "--from-checkpoint", w.missing()]),
        3: Case(
            lambda w: [
                "starting-offsets",
                *NO_BROKER,
                "-t",
                "orders",
                "--to-datetime",
                "2020-01-01T00:00:00Z",
            ]
        ),
    },
    "validate": {
        0: rig(lambda w: ["validate", *_rig_checkpoint(w, lost=False)]),
        1: rig(lambda w: ["validate", *_rig_checkpoint(w, lost=True)]),
        2: Case(lambda w: ["validate", w.missing(), *NO_BROKER]),
        3: Case(lambda w: ["validate", w.checkpoint(), *NO_BROKER]),
    },
}


def _delta(w: World, *, clean: bool) -> list[str]:
    chk, table = w.delta_source(clean=clean)
    return [chk, "--table", table]


def _fleet(w: World, *, lost: bool) -> str:
    assert w.bootstrap is not None
    topic = w.topic(lost_to=15 if lost else None)
    return w.conf_dir(w.bootstrap, w.checkpoint(topic, partitions=2, batches=1))


def _fleet_hold_refused(w: World) -> str:
    """A job opted in to a hold of 4,000 days: above the default cap of 30 days, refused."""
    assert w.bootstrap is not None
    args = _hold_raises(w)
    return w.conf_dir(w.bootstrap, args[2], extra='hold = "4000d"\n')


def _group_set(w: World, *extra: str) -> list[str]:
    topic = w.topic()
    return ["group", "set", *w.kafka(), f"fresh-{topic}", "--from-file", w.offsets_file(topic), *extra]


def cases(*, on_rig: bool) -> list[tuple[str, int]]:
    return [
        (command, code)
        for command, by_code in CASES.items()
        for code, case in by_code.items()
        if isinstance(case, Case) and case.rig == on_rig
    ]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def check(
    command: str, code: int, world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[command][code]
    assert isinstance(case, Case)
    for name, value in case.env:
        monkeypatch.setenv(name, value)
    argv = case.argv(world)
    assert " ".join(argv).startswith(command), argv  # the case runs the command it is filed under
    got, out, err = run(argv, capsys)
    assert got == code, f"{' '.join(argv)}\nexit {got}, expected {code}\n{out}{err}"
    assert "Traceback" not in out + err
    if code in (2, 3) and not command.startswith("fleet"):  # fleet reports each job, in a table
        assert out == "" and err.startswith(("Error: ", "Usage: ")), err
        assert err.startswith("Usage: ") or err.count("\n") == 1, f"not one line: {err}"


def test_every_command_has_a_case_for_every_code() -> None:
    commands = set(leaf_commands())
    assert commands == set(CASES), (
        f"commands without cases: {sorted(commands - set(CASES))}; cases of no command: "
        f"{sorted(set(CASES) - commands)}"
    )
    for command, by_code in CASES.items():
        assert set(by_code) == set(CODES), command
        assert all(isinstance(c, Case) or (isinstance(c, str) and c) for c in by_code.values()), command
        assert isinstance(by_code[2], Case), f"{command}: every command can be given bad input"


@pytest.mark.parametrize(("command", "code"), cases(on_rig=False), ids=lambda v: str(v).replace(" ", "-"))
def test_exit_code(
    command: str,
    code: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check(command, code, World(tmp_path), capsys, monkeypatch)


@pytest.mark.integration
@pytest.mark.parametrize(("command", "code"), cases(on_rig=True), ids=lambda v: str(v).replace(" ", "-"))
def test_exit_code_on_the_rig(
    command: str,
    code: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check(command, code, World(tmp_path, bootstrap, new_topic, produce), capsys, monkeypatch)


@pytest.mark.integration
def test_a_topic_the_broker_does_not_have_is_action_needed_not_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bootstrap: str
) -> None:
    """The broker answered that the topic does not exist: exit 1, not 3 (unreachable; issue 10)."""
    for argv in (["offsets", "-t", "no-such-topic"], ["read-to-end", "-t", "no-such-topic", "-q"]):
        code, out, err = run([*argv, "-b", bootstrap], capsys)
        assert code == 1, out + err
        assert err == f"Error: topic no-such-topic does not exist on the cluster at {bootstrap}\n"


# -- values out of range, scopes and backup directories the command cannot use (issue 28) --------

HUGE = "99999999999999999999"  # past a signed 64-bit integer: ListOffsets cannot even carry it
LATEST_ISO = "after 9999-12-31T23:59:59.999Z (253402300799999), the latest time ISO-8601 can write"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["repair", "CHK", "--to-datetime", HUGE],
            f"Error: --to-datetime '{HUGE}': {LATEST_ISO}",
        ),
        (
            ["repair", "CHK", "--to-datetime", "253402300800000"],
            f"Error: --to-datetime '253402300800000': {LATEST_ISO}",
        ),
        (
            ["repair", "CHK", "--to-datetime", "1969-12-31T23:59:59Z"],
            "Error: --to-datetime '1969-12-31T23:59:59Z': before 1970-01-01, the earliest time a record "
            "can have",
        ),
        (
            ["repair", "CHK", "--by-duration", f"P{'9' * 400}D"],
            f"Error: --by-duration 'P{'9' * 400}D': longer than 100 years; no record is that old",
        ),
        (
            ["repair", "CHK", "--by-duration", "P30000D"],
            "Error: --by-duration 'P30000D': reaches back before 1970-01-01; no record is that old",
        ),
        (
            ["starting-offsets", "-t", "orders", "--to-datetime", HUGE],
            f"Error: --to-datetime '{HUGE}': {LATEST_ISO}",
        ),
        (
            ["offsets", "-t", "orders", "--time", HUGE],
            f"Error: Invalid value for '--time': --time '{HUGE}': {LATEST_ISO}",
        ),
        (
            ["offsets", "-t", "orders", "--time", "9223372036854775807"],
            f"Error: Invalid value for '--time': --time '9223372036854775807': {LATEST_ISO}",
        ),
    ],
    ids=[
        "to-datetime-past-int64",
        "to-datetime-past-9999",
        "to-datetime-before-1970",
        "by-duration-infinite-as-float",
        "by-duration-before-1970",
        "starting-offsets-to-datetime",
        "offsets-time-past-int64",
        "offsets-time-int64-max",
    ],
)
def test_a_time_out_of_range_is_bad_input_before_any_connection(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before Kafka is asked (the broker here does not exist): one line, exit 2, no write."""
    chk = World(tmp_path).checkpoint()
    before = tree(Path(chk))
    code, out, err = run([chk if a == "CHK" else a for a in argv] + NO_BROKER, capsys)
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    assert err.rstrip("\n").splitlines()[-1] == message
    assert err.startswith("Usage: ") or err == f"{message}\n"
    assert tree(Path(chk)) == before


@pytest.mark.integration
@pytest.mark.parametrize(
    ("scope", "message"),
    [
        (
            "{t}:99",
            "Error: the checkpoint does not read {t} [99] (it reads {t} [0], {t} [1]). Nothing was written.",
        ),
        (
            "{t}:0,7",
            "Error: the checkpoint does not read {t} [7] (it reads {t} [0], {t} [1]). Nothing was written.",
        ),
        (
            "{t}:5-",
            "Error: the checkpoint does not read partition 5- of {t} (it reads {t} [0], {t} [1]). "
            "Nothing was written.",
        ),
        (
            "{t}x",
            "Error: --topic {t}x: the checkpoint reads no such topic (closest: {t}) (it reads {t}). "
            "Nothing was written.",
        ),
    ],
    ids=["partition", "one-of-a-list", "open-range", "topic"],
)
def test_repair_scoped_to_what_the_checkpoint_does_not_read_is_bad_input(
    scope: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    """A --topic naming a partition (or topic) the checkpoint does not read is a typo, not "nothing
    to change" (README: exit 2, naming what it does read); --execute writes nothing."""
    world = World(tmp_path, bootstrap, new_topic, produce)
    topic = world.topic(lost_to=15)  # partition 0 needs a repair: a scope that matched would act
    chk = world.checkpoint(topic, partitions=2, batches=1)
    before = tree(Path(chk))
    code, out, err = run(
        ["repair", chk, *world.kafka(), "--topic", scope.format(t=topic), "--execute"], capsys
    )
    assert (code, out, err) == (2, "", message.format(t=topic) + "\n")
    assert tree(Path(chk)) == before


def _unusable_backup_dirs(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(--backup-dir, the directory that cannot be made, why): under /proc nothing can be made; a
    regular file cannot hold a directory."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return [
        ("/proc/nope", "/proc/nope", "No such file or directory"),
        (f"{a_file}/backups", f"{a_file}/backups", "Not a directory"),
    ]


def _backup_refusal(backup_dir: str, made: str, why: str, file: str) -> re.Pattern[str]:
    return re.compile(
        re.escape(f"Error: {made}: cannot create the directory ({why}) to write {backup_dir}/")
        + r"\d{8}T\d{12}Z"
        + re.escape(f"/files/{file}")
    )


def test_an_unusable_backup_dir_is_bad_input_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``delta-source repair --execute`` (no broker needed) backs up before it writes: a backup
    directory that cannot be made is one line naming it and why, exit 2, the checkpoint as it was."""
    world = World(tmp_path)
    for backup_dir, made, why in _unusable_backup_dirs(tmp_path):
        chk, table = world.delta_source(clean=True)
        before = tree(Path(chk))
        argv = ["delta-source", "repair", chk, "--table", table, "--execute", "--backup-dir", backup_dir]
        code, out, err = run(argv, capsys)
        assert (code, out) == (2, ""), err
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and _backup_refusal(backup_dir, made, why, "offsets/0").fullmatch(errors[0])
        assert err.endswith(errors[0] + "\n")
        assert tree(Path(chk)) == before


@pytest.mark.integration
def test_repair_with_an_unusable_backup_dir_is_bad_input_and_nothing_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    world = World(tmp_path, bootstrap, new_topic, produce)
    topic = world.topic(lost_to=15)
    for backup_dir, made, why in _unusable_backup_dirs(tmp_path):
        chk = world.checkpoint(topic, partitions=2, batches=1)
        before = tree(Path(chk))
        argv = ["repair", chk, *world.kafka(), "--execute", "--backup-dir", backup_dir]
        code, out, err = run(argv, capsys)
        assert (code, out) == (2, ""), err
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and _backup_refusal(backup_dir, made, why, "offsets/0").fullmatch(errors[0])
        assert err.endswith(errors[0] + "\n")
        assert tree(Path(chk)) == before


@pytest.mark.integration
def test_repair_execute_with_an_unusable_export_path_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    """``--export`` is opened before the repair runs: a path that cannot be written is one line, exit
    2, and the checkpoint as it was (the export used to be written after the checkpoint was)."""
    world = World(tmp_path, bootstrap, new_topic, produce)
    chk = world.checkpoint(world.topic(lost_to=15), partitions=2, batches=1)
    before = tree(Path(chk))
    code, out, err = run(
        ["repair", chk, *world.kafka(), "--execute", "--export", "/proc/nope/plan.csv"], capsys
    )
    assert (code, out, err) == (2, "", "Error: --export /proc/nope/plan.csv: No such file or directory\n")
    assert tree(Path(chk)) == before


@pytest.mark.integration
def test_repair_export_holds_the_positions_the_repair_wrote(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bootstrap: str,
    new_topic: Callable[..., str],
    produce: Callable[..., int],
) -> None:
    world = World(tmp_path, bootstrap, new_topic, produce)
    topic = world.topic(lost_to=15)
    chk = world.checkpoint(topic, partitions=2, batches=1)
    export = tmp_path / "plan.csv"
    export.write_text("left from an earlier run\n")
    code, out, err = run(["repair", chk, *world.kafka(), "--export", str(export)], capsys)  # dry run
    assert code == 1, err
    planned = export.read_text()
    assert planned.startswith(f"{topic},0,15\n"), planned
    code, out, err = run(["repair", chk, *world.kafka(), "--execute", "--export", str(export)], capsys)
    assert code == 0, err
    assert export.read_text() == planned
    code, out, err = run(["validate", chk, *world.kafka(), "--no-runway"], capsys)
    assert code == 0, out + err
