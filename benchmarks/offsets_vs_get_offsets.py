"""Benchmark: ``stream-recovery offsets`` against ``kafka-get-offsets`` (GetOffsetShell) on 2,000 partitions.

Run by hand (not a test)::

    .venv/bin/python benchmarks/offsets_vs_get_offsets.py [--topics 20] [--partitions 100] [--rounds 5]

What it does:

1. starts the embedded broker (``recovery.local``) with Kafka's request logger at DEBUG, so every
   request the broker completes is logged (``kafka.request.logger``: "Completed request:{...}");
2. creates ``--topics`` × ``--partitions`` partitions, writes records to each and moves some log
   start offsets with DeleteRecords, so earliest and latest differ from partition to partition;
3. runs, alternately and ``--rounds`` times each, for ``--time earliest`` and ``--time latest``:
   ``stream-recovery offsets --output csv`` and ``java -cp '.cache/jars/kafka/*'
   org.apache.kafka.tools.GetOffsetShell`` (the class behind kafka-get-offsets.sh), as subprocesses;
4. checks both tools give the same offset for every partition, and counts the ListOffsets
   requests (API key 2) the broker logged during each run;
5. prints a Markdown table (and writes ``benchmarks/results/offsets.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from recovery.local.broker import LocalKafkaBroker  # noqa: E402
from recovery.local.jars import jar_dir  # noqa: E402
from recovery.local.topics import delete_records  # noqa: E402

# "Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":2,...". API key 2 = ListOffsets.
LIST_OFFSETS = re.compile(r'Completed request:.*"requestApiKey":2[,}]')


def count_list_offsets(log: Path, start: int) -> tuple[int, int]:
    """ListOffsets requests logged after byte ``start``; and the new end of the log."""
    with log.open("rb") as handle:
        handle.seek(start)
        data = handle.read().decode("utf-8", errors="replace")
        return len(LIST_OFFSETS.findall(data)), start + len(data.encode("utf-8", errors="replace"))


def setup(bootstrap: str, topics: int, partitions: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = [f"bench-{i:02d}" for i in range(topics)]
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=120)
    for future in futures.values():
        future.result(180)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    for t, name in enumerate(names):
        for p in range(partitions):
            for i in range(1 + (t * partitions + p) % 7):  # 1..7 records per partition
                producer.produce(name, value=b"v%d" % i, partition=p)
        producer.poll(0)
    producer.flush(120)
    for name in names:
        # Move the log start of every third partition so "earliest" is not always 0.
        delete_records(bootstrap, name, {p: 1 for p in range(0, partitions, 3)})
    return names


def run(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed, done.stdout


def parse_ours(csv_text: str) -> dict[tuple[str, int], int]:
    lines = csv_text.strip().splitlines()
    header = lines[0].split(",")
    t, p, o = header.index("topic"), header.index("partition"), header.index("offset")
    return {(row[t], int(row[p])): int(row[o]) for row in (line.split(",") for line in lines[1:])}


def parse_theirs(text: str) -> dict[tuple[str, int], int]:
    result = {}
    for line in text.strip().splitlines():
        topic, partition, offset = line.rsplit(":", 2)
        result[(topic, int(partition))] = int(offset)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    java_cp = f"{jar_dir('kafka')}/*"
    with LocalKafkaBroker(
        config={"num.network.threads": "3"}, heap="1g", request_log_level="DEBUG"
    ) as broker:
        bootstrap = broker.bootstrap_servers
        print(
            f"broker {bootstrap}; creating {args.topics} x {args.partitions} partitions ...", file=sys.stderr
        )
        setup(bootstrap, args.topics, args.partitions)
        total = args.topics * args.partitions
        ours = [REPO / ".venv/bin/stream-recovery", "offsets", "-b", bootstrap, "--topic", "bench-.*"]
        theirs = [
            "java",
            "-cp",
            java_cp,
            "org.apache.kafka.tools.GetOffsetShell",
            "--bootstrap-server",
            bootstrap,
        ]
        theirs += ["--topic", "bench-.*"]
        tools = {
            "stream-recovery offsets": lambda spec: [*map(str, ours), "--time", spec, "--output", "csv"],
            "kafka-get-offsets (GetOffsetShell)": lambda spec: [
                *theirs,
                "--time",
                {"earliest": "-2", "latest": "-1"}[spec],
            ],
        }
        log = broker.log_path
        _, position = count_list_offsets(log, 0)
        results: dict[str, dict[str, list[dict[str, float]]]] = {
            tool: {"earliest": [], "latest": []} for tool in tools
        }
        for round_no in range(args.rounds):
            for spec in ("earliest", "latest"):
                answers = {}
                order = (
                    list(tools) if round_no % 2 == 0 else list(reversed(tools))
                )  # alternate who goes first
                for tool in order:
                    elapsed, out = run(tools[tool](spec))
                    time.sleep(0.5)  # let the request log flush
                    requests, position = count_list_offsets(log, position)
                    answers[tool] = parse_ours(out) if tool.startswith("stream") else parse_theirs(out)
                    results[tool][spec].append({"seconds": elapsed, "list_offsets_requests": requests})
                    print(
                        f"round {round_no} {spec:8} {tool:36} {elapsed:6.2f}s  ListOffsets={requests}",
                        file=sys.stderr,
                    )
                mine, kafka = answers.values()
                if mine != kafka or len(mine) != total:
                    diff = {
                        k: (mine.get(k), kafka.get(k))
                        for k in set(mine) | set(kafka)
                        if mine.get(k) != kafka.get(k)
                    }
                    raise SystemExit(
                        f"answers differ ({len(mine)} vs {len(kafka)} partitions): {list(diff.items())[:5]}"
                    )
        summary = {
            "partitions": total,
            "rounds": args.rounds,
            "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
            "results": results,
        }
        out_dir = REPO / "benchmarks" / "results"
        out_dir.mkdir(exist_ok=True)
        (out_dir / "offsets.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(
            f"\n{total} partitions, {args.rounds} alternating rounds; "
            "median (min-max) wall time; ListOffsets requests per run\n"
        )
        print("| tool | --time | wall time, s | ListOffsets requests per run |")
        print("|---|---|---|---|")
        for tool in tools:
            for spec in ("earliest", "latest"):
                runs = results[tool][spec]
                secs = [r["seconds"] for r in runs]
                reqs = sorted({int(r["list_offsets_requests"]) for r in runs})
                print(
                    f"| {tool} | {spec} | {statistics.median(secs):.2f} ({min(secs):.2f}-{max(secs):.2f}) | "
                    f"{', '.join(map(str, reqs))} |"
                )
        print("\nanswers identical for every partition in every round")


if __name__ == "__main__":
    main()
