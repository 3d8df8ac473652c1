"""Benchmark: ``fleet serve`` watching 1,000 jobs of 100 partitions each (100,000 partitions).

Run by hand (not a test; ~50 minutes on 2 cores, a third of it the brokers creating their logs)::

    .venv/bin/python benchmarks/fleet_serve_scale.py [--brokers 7] \\
        [--sizes 100x100,300x100,1000x100] [--interval 60] [--steady-rounds 5]

1. starts a KRaft cluster of ``--brokers`` brokers as ``repair_plan_scale.py`` does (one broker
   cannot hold 100,000 partitions here: the open-files limit);
2. for each size ``JOBSxPARTITIONS``, topics of that many partitions, one per job (the sizes share
   them: 300x100 watches the first 300 of the 1,000 topics of 100 partitions), 2 records in every
   partition;
3. one checkpoint per job, as Spark writes it after batch 0 (``offsets/0`` and ``commits/0``:
   every partition at offset 1, so each is healthy, one record behind, with a runway to read),
   and a conf directory per size (``clusters.toml``, ``jobs.toml``);
4. per size, starts the installed CLI ``fleet serve CONF --interval INTERVAL`` and measures, from
   its own ``/v1/jobs`` and ``/proc``:
   * the first round: from the start of the process until every job has a check;
   * the steady state: CPU time (user + system) over ``--steady-rounds`` intervals after the
     first round, as a share of one core, with Prometheus' scrape of ``/metrics`` once an
     interval (its time and size printed); 5 intervals of 60 s take in the topics' descriptions,
     which the service makes again every 5 minutes;
   * resident memory: the peak (``VmHWM``) and at the end (``VmRSS``);
   and checks every job ended ``OK`` with a runway (each partition's record was read).

Targets (issue 27), at 1,000 jobs of 100 partitions: a round in at most 20 s, at most 500 MB, at
most a tenth of a core at a 60 s interval. The brokers share the 2 cores with the service: their
own CPU is not counted (only the service's, from ``/proc/PID/stat``), but it slows the service's
wall time; the load average is printed with the results.
Results: ``benchmarks/results/fleet_serve_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _rig import STREAM_RECOVERY, byte_compile, machine
from checkpoint_scale import QUERY_ID, write_files
from repair_plan_scale import settle, start_cluster

from recovery.local.broker import LocalKafkaBroker

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "fleet_serve_scale.json"
PARTITIONS_PER_CALL = 5_000  # a CreateTopics call of more than ~10,000 records is refused
RECORDS = 2  # per partition; each checkpoint is at offset 1
TICKS = os.sysconf("SC_CLK_TCK")


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        jobs, _, partitions = part.partition("x")
        sizes.append((int(jobs), int(partitions)))
    return sizes


def topic_name(partitions: int, job: int) -> str:
    return f"fleet{partitions}-{job:04d}"


def create_topics(bootstrap: str, wanted: dict[int, int]) -> None:
    """``wanted``: partitions per topic -> how many topics; each partition gets ``RECORDS`` records."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names: dict[str, int] = {}
    for partitions, count in wanted.items():
        batch: list[NewTopic] = []
        for job in range(count):
            names[topic_name(partitions, job)] = partitions
            batch.append(
                NewTopic(topic_name(partitions, job), num_partitions=partitions, replication_factor=1)
            )
            if len(batch) * partitions >= PARTITIONS_PER_CALL or job == count - 1:
                for future in admin.create_topics(batch, request_timeout=300).values():
                    future.result(timeout=600)
                batch = []
    total = sum(names.values())
    while True:  # every partition led before anything is written
        metadata = admin.list_topics(timeout=60)
        led = sum(
            1 for n in names if (t := metadata.topics.get(n)) for p in t.partitions.values() if p.leader >= 0
        )
        if led == total:
            break
        print(f"% {led} of {total} partitions with a leader", file=sys.stderr, flush=True)
        time.sleep(10)
    # The brokers go on creating their logs for minutes after every partition has a leader, and a
    # broker answers UNKNOWN_TOPIC_OR_PART for one it has not created yet: wait for them to settle,
    # then write, and write again what was refused.
    settle(time.monotonic())
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "log_level": 0,
            "queue.buffering.max.messages": 2_000_000,  # every record queued at once
        }
    )
    todo = {(name, p): RECORDS for name, partitions in names.items() for p in range(partitions)}
    failed: set[tuple[str, int]] = set()

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.add((msg.topic(), msg.partition()))

    for _attempt in range(10):
        failed.clear()

        for (name, p), count in todo.items():
            for i in range(count):
                producer.produce(name, value=b"v%d" % i, partition=p, on_delivery=delivered)
            producer.poll(0)
        if producer.flush(600):
            raise SystemExit("could not write the benchmark's records within 600 s")
        if not failed:
            return
        print(f"% {len(failed)} partitions refused their records, written again", file=sys.stderr, flush=True)
        # a partition that took some of its records gets them all again: offset 1 has a record either way
        todo = dict.fromkeys(failed, RECORDS)
        time.sleep(10)
    raise SystemExit("could not write the benchmark's records after 10 attempts")


def write_checkpoint(root: Path, topic: str, partitions: int) -> None:
    """A checkpoint after batch 0: every partition of ``topic`` at offset 1, batch 0 committed."""
    offsets = json.dumps({topic: {str(p): 1 for p in range(partitions)}}, separators=(",", ":"))
    # The batch ran after the records were written (a record newer than the batch that read past it
    # would mean the topic was recreated since).
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}})
    files = {
        "metadata": f'{{"id":"{QUERY_ID}"}}'.encode(),
        "offsets/0": f"v1\n{meta}\n{offsets}".encode(),
        "commits/0": b'v1\n{"nextBatchWatermarkMs":0}',
        "sources/0/0": b"\x00v1\n"
        + json.dumps({topic: {str(p): 0 for p in range(partitions)}}, separators=(",", ":")).encode(),
    }
    write_files(root, files)


def write_conf(conf: Path, checkpoints: Path, bootstrap: str, jobs: int, partitions: int) -> None:
    conf.mkdir(parents=True)
    (conf / "clusters.toml").write_text(
        f'[cluster.bench]\nbootstrap_servers = "{bootstrap}"\ntimeout = "60s"\n'
    )
    lines = []
    for job in range(jobs):
        name = topic_name(partitions, job)
        lines += [f"[job.{name}]", 'cluster = "bench"', f'checkpoint = "{checkpoints / name}"', ""]
    (conf / "jobs.toml").write_text("\n".join(lines))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, timeout: float = 120) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return bytes(answer.read())


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def memory_mb(pid: int) -> dict[str, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0]) / 1024
    return found


def measure(conf: Path, jobs: int, interval: float, steady_rounds: int, parallel: int) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [STREAM_RECOVERY, "fleet", "serve", str(conf), "--metrics-port", str(port)]
    argv += ["--interval", f"{interval:g}s", "--parallel", str(parallel)]
    with tempfile.TemporaryFile() as log:
        started = time.monotonic()
        service = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:  # the first round: every job checked once
                time.sleep(0.2)
                if service.poll() is not None:
                    log.seek(0)
                    raise SystemExit(f"fleet serve stopped: {log.read().decode()[-2000:]}")
                try:
                    health = json.loads(get(f"{base}/healthz"))
                except OSError:
                    continue
                if health["checked"] >= jobs:
                    break
            first_round = time.monotonic() - started
            rows = json.loads(get(f"{base}/v1/jobs"))
            after_first = memory_mb(service.pid)
            cpu0, wall0 = cpu_s(service.pid), time.monotonic()
            scrapes: list[tuple[float, int]] = []
            for _ in range(steady_rounds):  # Prometheus' scrape once an interval, then the rest of it
                begun = time.monotonic()
                body = get(f"{base}/metrics")
                scrapes.append((time.monotonic() - begun, len(body)))
                time.sleep(max(0.0, interval - (time.monotonic() - begun)))
            cores = (cpu_s(service.pid) - cpu0) / (time.monotonic() - wall0)
            rows_after = json.loads(get(f"{base}/v1/jobs"))
            memory = memory_mb(service.pid)
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(120)
    verdicts = {row["verdict"] for row in rows_after}
    without_runway = sum(1 for row in rows_after if row.get("runway_s") is None)
    if len(rows) != jobs or verdicts != {"OK"} or without_runway:
        raise SystemExit(f"not every job OK with a runway: {sorted(verdicts)}, {without_runway} without")
    checks_per_job = [row.get("checked_at_ms") for row in rows_after]
    return {
        "first_round_s": round(first_round, 2),
        "steady_cores": round(cores, 4),
        "steady_s": round(steady_rounds * interval, 1),
        "peak_rss_mb": round(memory["VmHWM"], 1),
        "rss_after_first_round_mb": round(after_first["VmRSS"], 1),
        "rss_end_mb": round(memory["VmRSS"], 1),
        "scrape_s": [round(s, 3) for s, _ in scrapes],
        "scrape_bytes": [n for _, n in scrapes],
        "checked": len([c for c in checks_per_job if c]),
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=7)
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("100x100,300x100,1000x100"))
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--steady-rounds", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    byte_compile()
    wanted: dict[int, int] = {}
    for jobs, partitions in args.sizes:
        wanted[partitions] = max(wanted.get(partitions, 0), jobs)
    nodes: list[LocalKafkaBroker] = []
    results: dict[str, Any] = {}
    try:
        bootstrap = start_cluster(args.brokers, nodes)
        started = time.monotonic()
        create_topics(bootstrap, wanted)
        total = sum(p * n for p, n in wanted.items())
        print(f"% {total} partitions created and written in {time.monotonic() - started:.0f} s", flush=True)
        settle(started)
        with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
            checkpoints = Path(tmp) / "chk"
            for partitions, count in wanted.items():
                for job in range(count):
                    write_checkpoint(
                        checkpoints / topic_name(partitions, job), topic_name(partitions, job), partitions
                    )
            for jobs, partitions in args.sizes:
                conf = Path(tmp) / f"conf-{jobs}x{partitions}"
                write_conf(conf, checkpoints, bootstrap, jobs, partitions)
                label = f"{jobs} jobs x {partitions} partitions"
                results[label] = measure(conf, jobs, args.interval, args.steady_rounds, args.parallel)
                print(f"% {label}: {results[label]}", flush=True)
    finally:
        for node in reversed(nodes):
            node.stop()
    header = f"{'SIZE':<28} {'ROUND s':>8} {'CORES':>6} {'PEAK MB':>8} {'END MB':>7}"
    print(f"{header} {'SCRAPE s':>9} {'SCRAPE MB':>9}")
    for label, r in results.items():
        print(
            f"{label:<28} {r['first_round_s']:>8.2f} {r['steady_cores']:>6.3f} {r['peak_rss_mb']:>8.0f} "
            f"{r['rss_end_mb']:>7.0f} {max(r['scrape_s']):>9.2f} {max(r['scrape_bytes']) / 1e6:>9.1f}"
        )
    print(f"% load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    body = {
        "machine": machine(),
        "brokers": args.brokers,
        "interval_s": args.interval,
        "parallel": args.parallel,
        "sizes": results,
    }
    RESULTS.write_text(json.dumps(body, indent=2) + "\n")
    print(f"(every run: {RESULTS.relative_to(REPO)})")


if __name__ == "__main__":
    main()
