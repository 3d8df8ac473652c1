"""The least-privilege table (README "Access", docs/access.md), run: every command that talks to
Kafka, as a principal holding exactly the ACLs the table names (it works), then as one holding all
but one of them (it stops with exit 3, names that ACL, and writes nothing), then without the ACLs
that only add a column (it works, and says what it could not read). Over SASL_SSL with
SCRAM-SHA-512 and certificates the rig makes (recovery.local.secured)."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from boundary import boundary
from click.testing import CliRunner
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from example_rig import RIG

from recovery.local import topics
from recovery.local.secured import SecuredKafkaBroker

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "acl-Pa55-never-printed"
TIMEOUT_S = 20
RECORDS = 10  # per partition, 2 partitions


@dataclass(frozen=True)
class Acl:
    """One ACL as the table writes it: ``Describe on topic``; ``name`` is filled in per run."""

    operation: str  # AclOperation name: DESCRIBE, READ, DESCRIBE_CONFIGS, ALTER_CONFIGS
    resource: str  # TOPIC, GROUP, BROKER (the cluster)

    def __str__(self) -> str:
        words = {"DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "AlterConfigs"}
        op = words.get(self.operation, self.operation.capitalize())
        where = {"TOPIC": "topic", "GROUP": "group", "BROKER": "the cluster"}[self.resource]
        return f"{op} on {where}"


DESCRIBE_TOPIC = Acl("DESCRIBE", "TOPIC")
READ_TOPIC = Acl("READ", "TOPIC")
DESCRIBE_CONFIGS = Acl("DESCRIBE_CONFIGS", "TOPIC")
ALTER_CONFIGS = Acl("ALTER_CONFIGS", "TOPIC")
DESCRIBE_GROUP = Acl("DESCRIBE", "GROUP")
READ_GROUP = Acl("READ", "GROUP")
DESCRIBE_CLUSTER = Acl("DESCRIBE", "BROKER")


@dataclass
class Run:
    """One command run's world: its own topic, group, checkpoint and client settings."""

    broker: SecuredKafkaBroker
    root: Path
    topic: str
    group: str
    user: str

    @property
    def checkpoint(self) -> str:
        return str(self.root / "chk")

    def kafka(self, *, timeout: bool = True) -> list[str]:
        args = ["-b", self.broker.sasl_ssl_servers]
        args += ["--timeout", str(TIMEOUT_S)] if timeout else []
        for key, value in self.broker.sasl_ssl_settings(self.user, PASSWORD).items():
            args += ["-X", f"{key}={value}"]
        return args

    def needs(self, acl: Acl) -> str:
        """How the commands name ``acl`` of this run: ``needs Describe on topic acl-3``."""
        name = {"TOPIC": f" {self.topic}", "GROUP": f" {self.group}", "BROKER": ""}[acl.resource]
        return f"needs {acl}{name}"


@dataclass(frozen=True)
class Case:
    command: str
    argv: Callable[[Run], list[str]]
    needs: tuple[Acl, ...]
    # ACLs that only add a column, and what a run without each says instead.
    adds: dict[Acl, str] = field(default_factory=dict)
    position: int = 5  # where the checkpoint stands in each partition
    setup: Callable[[Run], None] = field(default=lambda run: None)
    # Exit code without a needed ACL when not 3: 1 where a command refuses per topic (hold, release).
    refused: dict[Acl, int] = field(default_factory=dict)
    # A needed ACL whose absence Kafka hides instead of refusing: the exit code and what is said.
    hidden: dict[Acl, tuple[int, str]] = field(default_factory=dict)
    # What a run with every ACL it needs did to Kafka or the checkpoint (asserted; None: it only reads).
    effect: Callable[[Run], None] | None = None


# Kafka grants DESCRIBE with READ (and WRITE, DELETE, ALTER), DESCRIBE_CONFIGS with ALTER_CONFIGS
# (AclEntry.supportedOperations / the Authorizer's implied operations). A principal that loses one
# of these keeps what it implied: "one fewer" takes away that operation only.
IMPLIED = {
    READ_TOPIC: (DESCRIBE_TOPIC,),
    READ_GROUP: (DESCRIBE_GROUP,),
    ALTER_CONFIGS: (DESCRIBE_CONFIGS,),
}


def _group_offsets(run: Run) -> None:
    """A group with committed offsets (the super user commits them)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": run.broker.bootstrap_servers, "group.id": run.group, "log_level": 0}
    )
    consumer.commit(offsets=[TopicPartition(run.topic, p, 3) for p in (0, 1)], asynchronous=False)
    consumer.close()


def _offsets_file(run: Run) -> None:
    (run.root / "offsets.csv").write_text(f"{run.topic},0,4\n{run.topic},1,4\n")


def _short_retention(run: Run) -> None:
    topics.alter_topic_config(run.broker.bootstrap_servers, run.topic, {"retention.ms": "3600000"})


def _size_limited(run: Run) -> None:
    topics.alter_topic_config(run.broker.bootstrap_servers, run.topic, {"retention.bytes": str(64 << 20)})


def _held(run: Run) -> None:
    _short_retention(run)
    argv = ["retention", "hold", run.checkpoint, "--keep", "2h", "--execute"]
    result = invoke([*argv, "-b", run.broker.bootstrap_servers])
    assert result.exit_code == 0, result.output


def _fleet_conf(run: Run) -> None:
    settings = run.broker.sasl_ssl_settings(run.user, PASSWORD)
    del settings["sasl.password"]
    properties = "".join(f'"{k}" = "{v}"\n' for k, v in settings.items())
    (run.root / "conf.toml").write_text(
        f'[cluster.secured]\nbootstrap_servers = "{run.broker.sasl_ssl_servers}"\ntimeout = "{TIMEOUT_S}s"\n'
        f"[cluster.secured.properties]\n{properties}"
        '[cluster.secured.properties_env]\n"sasl.password" = "ACL_TEST_PASSWORD"\n'
        f'[job.orders]\ncluster = "secured"\ncheckpoint = "{run.checkpoint}"\n'
    )


def _repaired(run: Run) -> None:
    text = (Path(run.checkpoint) / "offsets" / "0").read_text()
    assert f'"{run.topic}":{{"0":{RECORDS},"1":{RECORDS}}}' in text, text  # 15 moved down to the end


def _committed(run: Run) -> None:
    admin = AdminClient({"bootstrap.servers": run.broker.bootstrap_servers, "log_level": 0})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(run.group)])[run.group].result(
        30
    )
    assert sorted((k.partition, k.offset) for k in result.topic_partitions) == [(0, 4), (1, 4)]


def _retention_ms(run: Run) -> int:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": run.broker.bootstrap_servers, "log_level": 0})
    resource = ConfigResource(ConfigResource.Type.TOPIC, run.topic)
    return int(admin.describe_configs([resource])[resource].result(30)["retention.ms"].value)


def _raised(run: Run) -> None:
    assert _retention_ms(run) > 3_600_000


def _put_back(run: Run) -> None:
    assert _retention_ms(run) == 3_600_000


RUNWAY_UNKNOWN = "runway unknown for"
CASES = [
    Case("offsets", lambda r: ["offsets", "--topic", r.topic], (DESCRIBE_TOPIC,)),
    Case("read-to-end", lambda r: ["read-to-end", "--topic", r.topic, "-q"], (READ_TOPIC,)),
    Case(
        "validate",
        lambda r: ["validate", r.checkpoint],
        (DESCRIBE_TOPIC,),
        adds={DESCRIBE_CONFIGS: RUNWAY_UNKNOWN, READ_TOPIC: RUNWAY_UNKNOWN},
    ),
    Case(
        "validate, a size-limited topic",
        lambda r: ["validate", r.checkpoint],
        (DESCRIBE_TOPIC,),
        adds={
            DESCRIBE_CONFIGS: RUNWAY_UNKNOWN,
            READ_TOPIC: RUNWAY_UNKNOWN,
            DESCRIBE_CLUSTER: "retention.bytes=67108864: not estimated",
        },
        setup=_size_limited,
    ),
    Case(
        "repair",
        lambda r: ["repair", r.checkpoint, "--execute", "--force"],
        (DESCRIBE_TOPIC,),
        position=15,
        effect=_repaired,
    ),
    Case(
        "starting-offsets",
        lambda r: ["starting-offsets", "--from-checkpoint", r.checkpoint],
        (DESCRIBE_TOPIC,),
    ),
    Case(
        "starting-offsets --group",
        lambda r: ["starting-offsets", "--group", r.group, "--topic", r.topic],
        (DESCRIBE_GROUP, DESCRIBE_TOPIC),
        setup=_group_offsets,
        hidden={DESCRIBE_TOPIC: (2, "or none these client settings may Describe")},
    ),
    Case(
        "group show",
        lambda r: ["group", "show", r.group],
        (DESCRIBE_GROUP, DESCRIBE_TOPIC),
        setup=_group_offsets,
        hidden={DESCRIBE_TOPIC: (0, "no committed offsets")},
    ),
    Case(
        "group set",
        lambda r: ["group", "set", r.group, "--from-file", str(r.root / "offsets.csv"), "--execute"],
        (READ_GROUP, READ_TOPIC),
        setup=_offsets_file,
        effect=_committed,
    ),
    Case(
        "retention hold",
        lambda r: ["retention", "hold", r.checkpoint, "--keep", "2h", "--execute"],
        (READ_TOPIC, ALTER_CONFIGS, DESCRIBE_CLUSTER),
        setup=_short_retention,
        refused=dict.fromkeys((READ_TOPIC, ALTER_CONFIGS, DESCRIBE_CLUSTER), 1),
        effect=_raised,
    ),
    Case(
        "retention release",
        lambda r: ["retention", "release", r.checkpoint, "--now", "--execute"],
        (DESCRIBE_TOPIC, ALTER_CONFIGS),
        setup=_held,
        refused={ALTER_CONFIGS: 1},
        effect=_put_back,
    ),
    Case(
        "jobs/lag_export.py --group",
        lambda r: ["jobs/lag_export.py", r.checkpoint, "--group", r.group],
        (READ_GROUP, READ_TOPIC),
    ),
    Case(
        "fleet validate",
        lambda r: ["fleet", "validate", str(r.root / "conf.toml")],
        (DESCRIBE_TOPIC,),
        setup=_fleet_conf,
    ),
]


class Outcome(NamedTuple):
    exit_code: int
    output: str  # stdout and stderr


def invoke(argv: list[str], world: Run | None = None) -> Outcome:
    """The CLI in this process; as ``world``'s user, if given (else as the rig's super user).
    ``jobs/lag_export.py ...``: that job, as a process of its own."""
    if world is None:
        result = CliRunner().invoke(boundary, argv)
        return Outcome(result.exit_code, result.output)
    if argv[0].startswith("jobs/"):
        done = subprocess.run(
            [sys.executable, str(REPO / argv[0]), *argv[1:], *world.kafka(timeout=False)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Outcome(done.returncode, done.stdout + done.stderr)
    kafka = [] if argv[0] == "fleet" else world.kafka()  # fleet reads its conf/ file
    result = CliRunner().invoke(boundary, argv + kafka, env={"ACL_TEST_PASSWORD": PASSWORD})
    return Outcome(result.exit_code, result.output)


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafkaBroker]:
    with SecuredKafkaBroker() as broker:
        yield broker


_names = itertools.count()


def prepare(broker: SecuredKafkaBroker, tmp_path: Path, case: Case, grants: tuple[Acl, ...]) -> Run:
    n = next(_names)
    world = Run(broker, tmp_path / f"run{n}", f"acl-{n}", f"acl-group-{n}", f"acl-user-{n}")
    world.root.mkdir()
    topics.create_topic(broker.bootstrap_servers, world.topic, 2)
    topics.produce(broker.bootstrap_servers, world.topic, topics.keyed_records(2 * RECORDS, partitions=2))
    RIG.write_local(Path(world.checkpoint), RIG.checkpoint_files(world.topic, [[case.position] * 2]))
    case.setup(world)
    broker.add_user(world.user, PASSWORD)
    for acl in grants:
        name = {"TOPIC": world.topic, "GROUP": world.group, "BROKER": "kafka-cluster"}[acl.resource]
        broker.allow(world.user, acl.resource, name, acl.operation)
    return world


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.integration
@pytest.mark.parametrize("case", CASES, ids=[c.command for c in CASES])
def test_each_command_works_with_exactly_its_acls_and_stops_without_one(
    secured: SecuredKafkaBroker, tmp_path: Path, case: Case
) -> None:
    granted = case.needs + tuple(case.adds)
    world = prepare(secured, tmp_path, case, granted)
    result = invoke(case.argv(world), world)
    said = f"{case.command} with {acls(granted)}: {result.output}"
    assert result.exit_code == 0 and RUNWAY_UNKNOWN not in result.output, said
    assert "Traceback" not in result.output and PASSWORD not in result.output, said
    if case.effect is not None:
        case.effect(world)

    for missing in case.needs:
        world = prepare(secured, tmp_path, case, without(granted, missing))
        before = tree_digest(world.root)
        started = time.monotonic()
        result = invoke(case.argv(world), world)
        took = time.monotonic() - started
        said = f"{case.command} without {missing}: {result.output}"
        assert "Traceback" not in result.output and PASSWORD not in result.output, said
        if missing in case.hidden:
            code, says = case.hidden[missing]
            assert result.exit_code == code and says in result.output, said
            continue
        refused_exit = case.refused.get(missing, 3)
        assert result.exit_code == refused_exit, said
        assert world.needs(missing) in result.output, said
        assert took < TIMEOUT_S / 2, f"{said}: said after {took:.1f}s, not at once"
        if refused_exit == 3:
            assert tree_digest(world.root) == before, f"{said}: the checkpoint was written"

    for missing, says in case.adds.items():
        world = prepare(secured, tmp_path, case, without(granted, missing))
        result = invoke(case.argv(world), world)
        said = f"{case.command} without {missing}: {result.output}"
        assert result.exit_code == 0, said
        assert says in result.output and world.needs(missing) in result.output, said
        assert "Traceback" not in result.output and PASSWORD not in result.output, said


def without(granted: tuple[Acl, ...], missing: Acl) -> tuple[Acl, ...]:
    """``granted`` less ``missing`` and every ACL that implies it, plus what ``missing`` implied."""
    kept = [a for a in granted if a != missing and missing not in IMPLIED.get(a, ())]
    return tuple(dict.fromkeys([*kept, *IMPLIED.get(missing, ())]))


def acls(grants: tuple[Acl, ...]) -> str:
    return ", ".join(map(str, grants)) or "no ACL"


def _row(case: Case) -> str:
    return f"| `{case.command}` | {', '.join(map(str, case.needs))} |"


@pytest.mark.parametrize("doc", ["README.md", "docs/access.md"])
def test_the_documented_table_is_the_one_run_here(doc: str) -> None:
    text = (REPO / doc).read_text()
    table = text[text.index("<!-- acl-table:start -->") : text.index("<!-- acl-table:end -->")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row[: len(_row(case))] for row, case in zip(rows, CASES, strict=False)] == [
        _row(case) for case in CASES
    ], f"{doc}: the rows differ from CASES (command and the ACLs it needs, in this order)"
    for row, case in zip(rows, CASES, strict=True):
        added = row[len(_row(case)) :]
        assert all(str(acl) in added for acl in case.adds), f"{doc}: {row} lacks an ACL of {case.adds}"


@pytest.mark.integration
def test_group_set_refuses_before_writing_when_one_topic_lacks_read(
    secured: SecuredKafkaBroker, tmp_path: Path
) -> None:
    """Kafka would commit the partitions of the topic it may Read and refuse the other's: a group
    half-written. The command asks first, and writes nothing."""
    case = next(c for c in CASES if c.command == "group set")
    world = prepare(secured, tmp_path, case, case.needs)
    other = f"{world.topic}-other"
    topics.create_topic(secured.bootstrap_servers, other, 1)
    topics.produce(secured.bootstrap_servers, other, topics.keyed_records(RECORDS, partitions=1))
    secured.allow(world.user, "TOPIC", other, "DESCRIBE")  # may see it, may not Read it
    (world.root / "offsets.csv").write_text(f"{world.topic},0,4\n{world.topic},1,4\n{other},0,4\n")

    result = invoke(case.argv(world), world)

    assert result.exit_code == 3, result.output
    assert f"needs Read on topic {other}" in result.output and "nothing was written" in result.output
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers, "log_level": 0})
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(world.group)])
    assert [k for k in committed[world.group].result(30).topic_partitions or () if k.offset >= 0] == []
