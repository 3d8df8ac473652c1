"""A real standalone Spark cluster on loopback: one master, one worker, from pyspark's own distribution.

Start it, submit a job to ``cluster.master_url``, stop it::

    with LocalSparkCluster() as cluster:
        subprocess.run(cluster.submit_command("jobs/kafka_to_delta.py", "-b", ...), env=cluster.submit_env())

or from a shell (``make cluster``): ``python -m recovery.local.spark_cluster`` prints
``MASTER=spark://127.0.0.1:<port>`` and a spark-submit example, and serves until Ctrl-C or end of input.

Steps, as Spark's ``sbin/start-master.sh`` and ``sbin/start-worker.sh`` do them, minus the daemon
scripts: ``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` from the
installed pyspark (its ``jars/`` are a full Spark distribution), bound to 127.0.0.1 on free ports,
small heaps, logs in a temp dir; ready when the master's JSON page (``/json/``, MasterWebUI) lists
the worker ALIVE. ``stop()`` sends SIGTERM (the daemons' shutdown hooks kill their executors), then
SIGKILL after a grace period, and removes the temp dir.

As with the rig's Kafka broker (recovery.local.broker), no daemon outlives the process that started
it: each is launched under ``setpriv --pdeathsig KILL`` (spark-class execs java, keeping the signal),
and an ``atexit`` hook stops them on a normal exit. Executors exit with their worker (Spark's
WorkerWatcher).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from recovery.errors import RigError
from recovery.local.broker import free_port
from recovery.local.process import die_with_parent, terminate

# The daemons only schedule: small heaps and the client compiler keep them light on a small machine.
_DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"


def spark_home() -> Path:
    """The installed pyspark, which is a Spark distribution (``bin/``, ``jars/``)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise RigError(f"{home}: pyspark has no bin/spark-class or jars/; reinstall it (make venv)")
    return home


class LocalSparkCluster:
    """A standalone Spark master and one worker on 127.0.0.1, in a temp dir of their own.

    ``worker_cores`` and ``worker_memory`` are what the worker offers to executors (slots, not pinned
    CPUs); ``daemon_memory`` is the heap of the master and worker JVMs themselves.
    """

    def __init__(
        self,
        *,
        worker_cores: int = 2,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        start_timeout: float = 120.0,
    ) -> None:
        self._cores = worker_cores
        self._memory = worker_memory
        self._daemon_memory = daemon_memory
        self._start_timeout = start_timeout
        self._master: subprocess.Popen[bytes] | None = None
        self._worker: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self.port = 0
        self.ui_port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        if not self.port:
            raise RigError("the Spark cluster is not started")
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RigError("the Spark cluster is not started")
        return self._workdir

    def start(self) -> LocalSparkCluster:
        if self._master is not None:
            return self
        self._workdir = Path(tempfile.mkdtemp(prefix="stream-recovery-spark-cluster-"))
        (self._workdir / "conf").mkdir()
        atexit.register(self.stop)
        try:
            # Ports are chosen, then bound by the JVM a moment later; a start that lost its port to
            # another process is tried again on new ones (as the broker's is).
            for attempt in range(3):
                self.port, self.ui_port = free_port(), free_port()
                self._master = self._launch(
                    "master", "org.apache.spark.deploy.master.Master", *self._master_args()
                )
                try:
                    self._wait(lambda status: status.get("status") == "ALIVE", "the master to start")
                    break
                except RigError:
                    if attempt == 2 or "Address already in use" not in self.log_tail("master"):
                        raise
                    self._terminate("_master")
            self._worker = self._launch(
                "worker",
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1",
                "--webui-port", "0",
                "--cores", str(self._cores),
                "--memory", self._memory,
                "--work-dir", str(self._workdir / "work"),
                self.master_url,
            )  # fmt: skip
            self._wait(
                lambda status: status.get("aliveworkers", 0) not in (0, None), "the worker to register"
            )
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._terminate("_worker")
        self._terminate("_master")
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def status(self) -> dict[str, object]:
        """The master's JSON status page (workers, cores, running and completed applications)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:
            data = json.load(answer)
        if not isinstance(data, dict):
            raise RigError(f"{self.ui_url}/json/: not a JSON object")
        return data

    # -- submitting jobs ----------------------------------------------------------------------------

    def submit_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for ``spark-submit``: this Python for the driver and executors, loopback."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            **(extra or {}),
        }

    def submit_command(
        self,
        script: str | Path,
        *args: str,
        conf: Mapping[str, str] | None = None,
        py_files: Sequence[str | Path] = (),
    ) -> list[str]:
        """``spark-submit --master spark://…`` of a Python ``script`` with the rig's Kafka connector and
        Delta jars (client mode: the driver runs here, executors on the worker)."""
        return submit_command(self.master_url, script, *args, conf=conf, py_files=py_files)

    # -- internals ------------------------------------------------------------------------------------

    def _master_args(self) -> list[str]:
        return ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)]

    def _launch(self, name: str, main_class: str, *args: str) -> subprocess.Popen[bytes]:
        workdir = self.workdir
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(workdir / "conf"),  # no stray spark-defaults.conf from the machine
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(workdir / "local"),
            "SPARK_DAEMON_MEMORY": self._daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": _DAEMON_JAVA_OPTS,
            "SPARK_NO_DAEMONIZE": "1",
        }
        with (workdir / f"{name}.log").open("ab") as out:  # the JVM holds its own copy
            return subprocess.Popen(
                [*die_with_parent(), str(spark_home() / "bin" / "spark-class"), main_class, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # Ctrl-C reaches us; we stop the daemons cleanly
            )

    def _wait(self, ready: Callable[[dict[str, object]], bool], what: str) -> None:
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            for name in ("master", "worker"):
                proc = getattr(self, f"_{name}")
                if proc is not None and proc.poll() is not None:
                    raise RigError(f"the Spark {name} exited during start-up:\n{self.log_tail(name)}")
            with contextlib.suppress(OSError, ValueError, RigError):
                if ready(self.status()):
                    return
            time.sleep(0.5)
        raise RigError(
            f"timed out after {self._start_timeout:.0f}s waiting for {what}:\n"
            f"{self.log_tail('master')}\n{self.log_tail('worker')}"
        )

    def log_path(self, name: str) -> Path:
        """``master`` or ``worker``: the daemon's log (stdout and log4j's console output)."""
        return self.workdir / f"{name}.log"

    def log_tail(self, name: str, lines: int = 30) -> str:
        if self._workdir is None or not self.log_path(name).exists():
            return ""
        return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])

    def _terminate(self, attr: str) -> None:
        proc: subprocess.Popen[bytes] | None = getattr(self, attr)
        setattr(self, attr, None)
        terminate(proc)


def submit_command(
    master_url: str,
    script: str | Path,
    *args: str,
    conf: Mapping[str, str] | None = None,
    py_files: Sequence[str | Path] = (),
) -> list[str]:
    """The ``spark-submit`` command line for ``script`` on ``master_url``, with the Kafka connector and
    Delta from ``make jars`` (``--jars``: the driver serves them to the executors) and Delta's SQL
    extension and catalog. ``conf`` adds or overrides ``--conf`` settings."""
    from recovery.local.spark import spark_jars

    settings = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "512m",
        "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **(conf or {}),
    }
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", master_url,
        "--deploy-mode", "client",
        "--jars", ",".join(str(p) for p in spark_jars()),
    ]  # fmt: skip
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    if py_files:
        command += ["--py-files", ",".join(str(p) for p in py_files)]
    return [*command, str(script), *args]


def shell_lines(command: Sequence[str]) -> str:
    """``command`` quoted for a POSIX shell, one option and its value per continued line."""
    lines: list[list[str]] = [[command[0]]]
    for arg in command[1:]:
        if len(lines[-1]) == 1 and lines[-1][0].startswith("-") and not arg.startswith("-"):
            lines[-1].append(arg)
        else:
            lines.append([arg])
    return " \\\n    ".join(" ".join(shlex.quote(a) for a in line) for line in lines)


def main() -> None:
    """``python -m recovery.local.spark_cluster`` (``make cluster``): start a master and a worker,
    print the master URL and a spark-submit example, stop on Ctrl-C or end of input."""
    repo = Path(__file__).resolve().parents[2]
    with LocalSparkCluster() as cluster:
        example = cluster.submit_command(
            repo / "jobs" / "kafka_to_delta.py",
            "-b", "127.0.0.1:PORT", "--topic", "orders", "--table", "/tmp/orders",
            "--checkpoint", "/tmp/chk/orders", "--monitor-group", "spark-orders-monitor",
            "--metrics-port", "9108",
        )  # fmt: skip
        print(f"MASTER={cluster.master_url}", flush=True)
        print(f"% master UI {cluster.ui_url}; logs {cluster.workdir}", file=sys.stderr)
        print(
            "% submit a job (a broker: `.venv/bin/python -m recovery.local.broker` prints BROKERS=...):\n"
            + shell_lines(example),
            file=sys.stderr,
        )
        print("% Ctrl-C or end of input stops the cluster", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()


if __name__ == "__main__":
    main()
