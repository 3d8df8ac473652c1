"""A real single-node Apache Kafka broker (KRaft, broker and controller in one JVM).

Start it, use ``broker.bootstrap_servers``, stop it::

    with LocalKafkaBroker() as broker:
        AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics()

or from a shell, as kcat's ``-M`` mock cluster does: ``python -m recovery.local.broker`` prints
``BROKERS=127.0.0.1:<port>`` and serves until Ctrl-C or end of input.

Steps, as Kafka's quickstart does them with ``kafka-storage.sh`` and ``kafka-server-start.sh``:
pick free loopback ports, write ``server.properties`` in a temp dir, format the storage with
``kafka.tools.StorageTool``, start ``kafka.Kafka``, wait until it serves metadata. ``stop()`` sends
SIGTERM (Kafka's shutdown hook), then SIGKILL after a grace period, and removes the temp dir.

No orphan broker survives a crashed test run: the JVM is started with the parent-death signal set to
SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``, through util-linux ``setpriv --pdeathsig``), so it dies
with the Python process that started it even on SIGKILL, and an ``atexit`` hook stops it on a normal
interpreter exit.

The settings make retention observable within seconds (the defaults wait 30 s before the first
retention run, check every 5 minutes and delay segment deletion by a minute).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from recovery.errors import RigError
from recovery.local.jars import artifact_version, jar_dir, kafka_set, require_jar
from recovery.local.process import die_with_parent, terminate

# Retention settings that make the log start offset move within a second or two, as in production
# but faster. Kafka 4.x refuses segments under 1 MiB (KIP-1030); topics that need small segments use
# `segment.ms` (roll by time) instead. tests/runway expects retention to delete within one check
# interval after the runway's predicted time (it reads the interval from here). The files of deleted
# segments go 0.1 s later (the log start moves at once): at 0 the broker's delete task
# (LogManager.deleteLogs) reschedules itself without a pause, and an idle broker used 8% of a core
# instead of 3%.
RETENTION_TESTABLE = {
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "1000",
    "log.segment.delete.delay.ms": "100",
    "log.segment.bytes": str(1024 * 1024),
}

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = {request_level}
"""


# Kafka's test implementation of remote storage, in the storage module's test jar (jvm/kafka.pom.xml).
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def _tiered_settings(remote: Path) -> dict[str, str]:
    """Tiered storage on the local disk: segments copied to ``remote`` within a second of rolling."""
    require_jar(kafka_set(), "kafka-storage-*-test*.jar", "LocalTieredStorage (the kafka-storage test jar)")
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "rsm.config.dir": str(remote),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        # how often segments are copied and expired remote ones deleted (default 30 s)
        "remote.log.manager.task.interval.ms": "500",
    }


@dataclass(frozen=True)
class Quorum:
    """The nodes of a cluster: its id and each node's (broker port, controller port)."""

    cluster_id: str
    ports: Mapping[int, tuple[int, int]]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kafka_uuid() -> str:
    """A Kafka ``Uuid`` string (22 chars of URL-safe base64, no padding), as ``random-uuid`` prints.

    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-``: a command-line parser would take
    such an id for an option (kafka-storage then fails with "expected one argument").
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _advertises_controller() -> bool:
    """Whether the broker may list its controller listener in ``advertised.listeners`` (Kafka 3.9+,
    KIP-853; before, the storage tool refuses a combined node that does: "must not contain KRaft
    controller listeners")."""
    version = artifact_version(kafka_set(), "kafka_2.13")
    return tuple(int(p) for p in version.split(".")[:2]) >= (3, 9)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise RigError("java not found: the embedded Kafka broker needs Java 17+ on PATH or JAVA_HOME")
    return java


class LocalKafkaBroker:
    """A real Kafka broker on 127.0.0.1, in a temp dir of its own.

    ``config`` adds or overrides broker settings (``server.properties`` keys); ``request_log_level``
    DEBUG makes the broker log every request it completes. ``tiered_storage`` turns on Kafka's tiered
    storage (KIP-405) with its own ``LocalTieredStorage`` (a directory of the broker's): topics
    created with ``remote.storage.enable=true`` copy rolled segments there, and their brokers keep
    only ``local.retention.ms`` of them.
    """

    # Brokers this process has started: the tests' fast lane (`pytest -m "not integration"`)
    # checks that none was.
    launched: ClassVar[int] = 0

    def __init__(
        self,
        *,
        config: Mapping[str, str] | None = None,
        heap: str = "512m",
        log_level: str = "INFO",
        request_log_level: str = "WARN",
        start_timeout: float = 90.0,
        quorum: Quorum | None = None,
        node_id: int = 1,
        tiered_storage: bool = False,
    ) -> None:
        # One node of a cluster (recovery.local.cluster): its ports and id come from ``quorum``.
        self._quorum = quorum
        self._node_id = node_id
        self._extra = dict(config or {})
        self._tiered = tiered_storage
        self._heap = heap
        self._log_level = log_level
        # DEBUG logs every completed request ("Completed request:{...}"): the benchmarks count them.
        self._request_log_level = request_log_level
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.port = 0
        self.controller_port = 0
        self.cluster_id = ""

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        if not self.port:
            raise RigError("the broker is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        if self._workdir is None:
            raise RigError("the broker is not started")
        return self._workdir / "server.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def launch(self) -> None:
        """Start a node of a quorum without waiting: its peers must start before any is ready."""
        assert self._quorum is not None and self._proc is None
        LocalKafkaBroker.launched += 1
        self._workdir = Path(tempfile.mkdtemp(prefix="stream-recovery-kafka-"))
        atexit.register(self.stop)
        self.port, self.controller_port = self._quorum.ports[self._node_id]
        self.cluster_id = self._quorum.cluster_id
        props = self._write_config()
        self._format(props)
        self._launch(props)

    def wait_until_ready(self) -> None:
        self._wait_until_ready()

    def kill(self) -> None:
        """SIGKILL, as a crashed machine: no controlled shutdown, its partitions' leadership moves
        only once the controller fences it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait(30)

    def restart(self) -> None:
        """Start a killed node again on its own data (its logs, its place in the quorum), as a
        crashed machine comes back; wait until it serves."""
        assert self._workdir is not None and self._proc is None, "restart() follows kill()"
        self._launch(self._workdir / "server.properties")
        self._wait_until_ready()

    def start(self) -> LocalKafkaBroker:
        if self._proc is not None:
            return self
        LocalKafkaBroker.launched += 1
        self._workdir = Path(tempfile.mkdtemp(prefix="stream-recovery-kafka-"))
        atexit.register(self.stop)
        try:
            # Ports are chosen, then bound by the JVM a moment later; another process can take one in
            # between, so a start that fails that way is tried again on new ports.
            for attempt in range(3):
                self.port, self.controller_port = free_port(), free_port()
                self.cluster_id = kafka_uuid()
                props = self._write_config()
                self._format(props)
                self._launch(props)
                try:
                    self._wait_until_ready()
                    return self
                except RigError:
                    if attempt == 2 or "Address already in use" not in self._log_tail():
                        raise
                    self._terminate()
            raise AssertionError("unreachable")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._terminate()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalKafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- fault injection (tests) -------------------------------------------------------------

    def pause(self) -> None:
        """Freeze the broker with SIGSTOP: connections stay open, nothing answers."""
        if self._proc:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc:
            self._proc.send_signal(signal.SIGCONT)

    # -- internals ---------------------------------------------------------------------------

    def _settings(self) -> dict[str, str]:
        assert self._workdir is not None
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
        voters = (
            ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in sorted(self._quorum.ports.items()))
            if self._quorum
            else f"1@127.0.0.1:{self.controller_port}"
        )
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(self._node_id),
            # Static quorum (controller.quorum.voters): formatted without --standalone.
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": listeners if _advertises_controller() else listeners.split(",")[0],
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self._workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            # pause() freezes the whole process (SIGSTOP), the controller with it. Woken after more
            # than the 9 s default, the controller fenced its own broker: FENCED_LEADER_EPOCH and
            # no topic creation for 30 s and more (tests/kafka/test_offsets.py pauses it ~8 s).
            "broker.session.timeout.ms": "60000",
            **RETENTION_TESTABLE,
        }
        if self._tiered:
            settings.update(_tiered_settings(self._workdir / "remote"))
        settings.update(self._extra)
        return settings

    def _write_config(self) -> Path:
        assert self._workdir is not None
        props = self._workdir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._settings().items()))
        (self._workdir / "log4j2.properties").write_text(
            _LOG4J2.format(
                log=self._workdir / "server.log", level=self._log_level, request_level=self._request_log_level
            )
        )
        return props

    def _java_cmd(self, main_class: str, *args: str) -> list[str]:
        assert self._workdir is not None
        return [
            _java(),
            f"-Xmx{self._heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._workdir / 'log4j2.properties'}",
            "-cp",
            f"{jar_dir(kafka_set())}/*",
            main_class,
            *args,
        ]

    def _format(self, props: Path) -> None:
        data = Path(self._settings()["log.dirs"])
        shutil.rmtree(data, ignore_errors=True)
        cmd = self._java_cmd(
            "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}", "-c", str(props)
        )
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RigError(
                f"kafka.tools.StorageTool format failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )

    def _launch(self, props: Path) -> None:
        assert self._workdir is not None
        out = open(self._workdir / "stdout.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            self._proc = subprocess.Popen(
                [*die_with_parent(), *self._java_cmd("kafka.Kafka", str(props))],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it cleanly
            )
        finally:
            out.close()

    def _wait_until_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise RigError(f"the Kafka broker exited during start-up:\n{self._log_tail()}")
            with contextlib.suppress(Exception):
                metadata = admin.list_topics(timeout=1)
                if metadata.brokers:
                    self._wait_for_producer_ids(deadline)
                    return
            time.sleep(0.2)
        raise RigError(
            f"the Kafka broker did not serve metadata within {self._start_timeout:.0f}s:\n{self._log_tail()}"
        )

    def _wait_for_producer_ids(self, deadline: float) -> None:
        """Ready means a producer can start: on a fresh KRaft broker the first InitProducerId answers
        COORDINATOR_LOAD_IN_PROGRESS until the broker has a block of producer ids from the controller
        (and librdkafka logs ``GETPID ... Failed to acquire idempotence PID`` while it retries). One
        transactional producer, silent, waits that out here, so the idempotent producers of the tests
        and the demo find the ids ready."""
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "transactional.id": "stream-recovery-rig-ready",
                "log_level": 0,
            }
        )
        try:
            producer.init_transactions(max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            raise RigError(
                f"the Kafka broker did not hand out producer ids within {self._start_timeout:.0f}s: "
                f"{exc}\n{self._log_tail()}"
            ) from exc

    def _log_tail(self, lines: int = 30) -> str:
        if self._workdir is None:
            return ""
        text = ""
        for name in ("stdout.log", "server.log"):
            path = self._workdir / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        terminate(proc)


def main() -> None:
    """``python -m recovery.local.broker``: start a broker, print ``BROKERS=host:port`` on stdout,
    stop on Ctrl-C or end of input (as kcat ``-M`` does)."""
    with LocalKafkaBroker() as broker:
        print(f"BROKERS={broker.bootstrap_servers}", flush=True)
        print(f"% broker log {broker.log_path}; Ctrl-C or end of input stops it", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()


if __name__ == "__main__":
    main()
