"""Shared helpers of the benchmark scripts (not a test; nothing here is imported by the package).

* :func:`broker`: the embedded Kafka broker (``recovery.local``) with the request logger at DEBUG;
* :class:`RequestLog`: counts the requests the broker completed, by API, between two marks;
* :func:`alternate`: runs two commands side by side, A B A B (who goes first alternates by round),
  as subprocesses of this process, and records wall time, CPU time and request counts;
* :func:`summarize`: medians (min-max), the A/B ratio of medians, printed and written as JSON
  under ``benchmarks/results/``, with the machine and its load.
"""

from __future__ import annotations

import collections
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STREAM_RECOVERY = str(REPO / ".venv" / "bin" / "stream-recovery")
PYTHON = str(REPO / ".venv" / "bin" / "python")

# Client-facing APIs worth counting (the broker also logs its own controller traffic: left out).
API_NAMES = {
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    9: "OffsetFetch",
    10: "FindCoordinator",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    32: "DescribeConfigs",
    60: "DescribeCluster",
    69: "ConsumerGroupDescribe",
    75: "DescribeTopicPartitions",
}
_COMPLETED = re.compile(r'Completed request:\{"isForwarded":\w+,"requestHeader":\{"requestApiKey":(\d+)')


def java_tool(main_class: str, *args: str) -> list[str]:
    """A Kafka CLI tool as its ``kafka-*.sh`` script runs it: java on the jars of the embedded
    broker's classpath (``.cache/jars/kafka``)."""
    from recovery.local.jars import jar_dir

    return ["java", "-cp", f"{jar_dir('kafka')}/*", main_class, *args]


def need(program: str, how: str) -> str:
    """The path of ``program``, or exit saying how to install it (never installs anything)."""
    path = shutil.which(program)
    if path is None:
        raise SystemExit(f"{program} is not installed; {how}")
    return path


@contextmanager
def broker() -> Iterator[Any]:
    """The embedded broker, logging every completed request (``kafka.request.logger`` DEBUG)."""
    from recovery.local.broker import LocalKafkaBroker

    with LocalKafkaBroker(
        config={"num.network.threads": "3"}, heap="1g", request_log_level="DEBUG"
    ) as started:
        print(f"% broker {started.bootstrap_servers} (log {started.log_path})", file=sys.stderr)
        yield started


class RequestLog:
    """Requests the broker completed since the last :meth:`take`, by API name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = path.stat().st_size

    def take(self, settle_s: float = 0.5) -> dict[str, int]:
        time.sleep(settle_s)  # the request log is written when the answer has gone out
        with self.path.open("rb") as handle:
            handle.seek(self.position)
            data = handle.read()
        self.position += len(data)
        counts = collections.Counter(int(k) for k in _COMPLETED.findall(data.decode("utf-8", "replace")))
        return {API_NAMES[k]: n for k, n in sorted(counts.items()) if k in API_NAMES}


@dataclass
class Runs:
    """The runs of one command: wall and CPU seconds, and the requests of each run."""

    cmd: list[str]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    requests: list[dict[str, int]] = field(default_factory=list)

    def line(self) -> str:
        return f"{spread(self.wall)} s wall, {spread(self.cpu)} s CPU"


def spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def run_once(
    cmd: Sequence[str], *, stdout: Any = subprocess.DEVNULL, ok: Sequence[int] = (0,)
) -> tuple[float, float, str]:
    """Run ``cmd``; its wall seconds, CPU seconds (user + system, children included) and stdout.
    An exit code not in ``ok`` stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=REPO, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed ({done.returncode}): {done.stderr[-2000:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = done.stdout.decode() if isinstance(done.stdout, bytes) else ""
    return wall, cpu, out


def byte_compile() -> None:
    """Compile the package's bytecode, as installing a wheel does: an editable install under
    ``PYTHONDONTWRITEBYTECODE`` (set on some machines) would otherwise compile every module of
    ours on every run, and time that instead of the command."""
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(REPO / "recovery")], check=True, cwd=REPO)


def alternate(
    tools: Mapping[str, list[str]],
    rounds: int,
    *,
    log: RequestLog | None = None,
    check: Callable[[str, str], None] | None = None,
    ok: Sequence[int] = (0,),
) -> dict[str, Runs]:
    """Run the commands ``rounds`` times each, side by side: A B, then B A, ... ``check(name,
    stdout)``, if given, is called with the output of each tool's first run (which is not timed:
    it also warms the page cache and the broker). ``ok``: the exit codes that mean success."""
    byte_compile()
    runs = {name: Runs(cmd) for name, cmd in tools.items()}
    for name, cmd in tools.items():
        _, _, out = run_once(cmd, stdout=subprocess.PIPE if check else subprocess.DEVNULL, ok=ok)
        if check is not None:
            check(name, out)
        if log is not None:
            log.take()
    for round_no in range(rounds):
        order = list(tools) if round_no % 2 == 0 else list(reversed(tools))
        for name in order:
            wall, cpu, _ = run_once(tools[name], ok=ok)
            runs[name].wall.append(wall)
            runs[name].cpu.append(cpu)
            if log is not None:
                runs[name].requests.append(log.take())
            print(f"% round {round_no} {name:40} {wall:7.3f}s wall {cpu:6.3f}s CPU", file=sys.stderr)
    return runs


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    from confluent_kafka import libversion

    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "cpu": model,
        "python": platform.python_version(),
        "librdkafka": libversion()[0],
        "date_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
        "loadavg_1m_5m_15m": list(os.getloadavg()),
    }


def summarize(
    name: str, title: str, runs: Mapping[str, Runs], a: str, b: str, extra: Mapping[str, Any] | None = None
) -> float:
    """Print the comparison (medians, min-max, ratio A/B of the wall-time medians, requests per
    run) and write ``benchmarks/results/<name>.json``; returns the ratio."""
    info = machine()
    ratio = statistics.median(runs[a].wall) / statistics.median(runs[b].wall)
    rounds = len(runs[a].wall)
    print(f"\n{title}: {rounds} alternating rounds, median (min-max)")
    load = " ".join(f"{x:.1f}" for x in info["loadavg_1m_5m_15m"])
    print(
        f"machine: {info['nproc']} cores, {info['memory_gib']} GiB, {info['cpu']}; "
        f"load average {load} at the end; {info['date_utc']}\n"
    )
    print("| command | wall time, s | CPU time, s | requests per run |")
    print("|---|---|---|---|")
    for label, result in runs.items():
        requests = "; ".join(
            f"{api} {'/'.join(map(str, sorted({r.get(api, 0) for r in result.requests})))}"
            for api in sorted({api for r in result.requests for api in r})
        )
        print(f"| {label} | {spread(result.wall)} | {spread(result.cpu)} | {requests or '-'} |")
    print(f"\nratio of wall-time medians, {a} / {b}: {ratio:.2f}")
    out = REPO / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    body = {
        "title": title,
        "machine": info,
        "rounds": rounds,
        "ratio_of_wall_medians": {"a": a, "b": b, "ratio": round(ratio, 3)},
        "runs": {
            label: {"cmd": r.cmd, "wall_s": r.wall, "cpu_s": r.cpu, "requests": r.requests}
            for label, r in runs.items()
        },
        **(extra or {}),
    }
    out.write_text(json.dumps(body, indent=2) + "\n")
    print(f"(every run: {out.relative_to(REPO)})")
    return ratio


def make_topics(bootstrap: str, topics: int, partitions: int, *, prefix: str = "bench-") -> list[str]:
    """``topics`` × ``partitions``, 1–7 records per partition, the log start of every third
    partition moved by DeleteRecords (so earliest is not always 0)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from recovery.local.topics import delete_records

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = [f"{prefix}{i:02d}" for i in range(topics)]
    for future in admin.create_topics(
        [NewTopic(n, partitions, 1) for n in names], operation_timeout=120
    ).values():
        future.result(180)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for t, name in enumerate(names):
        for p in range(partitions):
            for i in range(1 + (t * partitions + p) % 7):
                producer.produce(name, value=b"v%d" % i, partition=p, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(300) or failed:
        raise SystemExit(f"could not write the benchmark's records: {failed[:3]}")
    for name in names:
        delete_records(bootstrap, name, {p: 1 for p in range(0, partitions, 3)})
    return names
