"""Benchmark: a ``repair`` plan and ``validate`` of a 100,000-partition checkpoint against a cluster
holding those partitions.

Run by hand (not a test; ~15 minutes on 2 cores, most of it the brokers creating their logs)::

    .venv/bin/python benchmarks/repair_plan_scale.py [--partitions 100000] [--topics 100] \\
        [--brokers 7] [--rounds 3]

1. starts a KRaft cluster of ``--brokers`` brokers from the rig's own broker code (node 1 broker
   and controller, the others brokers only, one cluster id). One broker cannot hold 100,000
   partitions here: a broker keeps a file open per partition and the hard open-files limit is
   20,000 per process; 7 brokers hold ~14,300 each;
2. creates ``--topics`` topics holding ``--partitions`` partitions in all (replication factor 1,
   5 topics per CreateTopics call: the controller refuses an operation of more than 10,000
   records) and waits until every partition has a leader; they stay empty (log end 0);
3. writes the checkpoint of ``checkpoint_scale.py`` on those topics (committed offsets > 0, so the
   plan clamps every partition) and runs the installed CLI ``--rounds`` times each, interleaved:
   ``repair CHK -b BROKERS --output json`` (a dry run: the plan), the same plan as a table (the
   default output: a page of moves and a summary), ``validate --no-runway``,
   ``validate`` and ``checkpoint show --output json``; then checks that the plan moves every
   partition;
4. prints the median and range of the wall time and the peak resident memory of each (``wait4``
   rusage of the child). Target (issue 11): the repair plan <= 10 s.

The brokers share the 2 cores with the command and stay busy creating their logs for minutes
after the metadata shows every partition led: the timed runs start once the load average is below
the number of cores (15 minutes at most), and the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checkpoint_scale import STREAM_RECOVERY, run_once, write_checkpoint

from recovery.local.broker import LocalKafkaBroker

CREATE_AT_ONCE = 5  # topics per CreateTopics call (1,000 partitions each: 5,005 records)


class Node(LocalKafkaBroker):
    """A node of the benchmark's cluster: node 1 as the rig makes it (broker and controller), the
    others brokers only, joining node 1's quorum and cluster id."""

    def __init__(self, node_id: int, first: LocalKafkaBroker | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.node_id, self.first = node_id, first

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        settings["log.retention.check.interval.ms"] = "600000"  # no scan of 14,000 logs a second
        if self.first is not None:
            listener = f"PLAINTEXT://127.0.0.1:{self.port}"
            settings.update(
                {
                    "process.roles": "broker",
                    "node.id": str(self.node_id),
                    "controller.quorum.voters": f"1@127.0.0.1:{self.first.controller_port}",
                    "listeners": listener,
                    "advertised.listeners": listener,
                }
            )
        return settings

    def _format(self, props: Path) -> None:
        if self.first is not None:
            self.cluster_id = self.first.cluster_id
        super()._format(props)

    def _wait_for_producer_ids(self, deadline: float) -> None:
        if self.first is None:  # once, on the controller's node: nothing here produces
            super()._wait_for_producer_ids(deadline)


def start_cluster(brokers: int, nodes: list[LocalKafkaBroker]) -> str:
    """Start ``brokers`` nodes, appended to ``nodes`` as each starts (the caller stops them); the
    bootstrap servers."""
    started = time.monotonic()
    first = Node(1, None, heap="2g", start_timeout=180).start()
    nodes.append(first)
    for i in range(2, brokers + 1):
        nodes.append(Node(i, first, heap="1g", start_timeout=180).start())
    print(f"% {brokers} brokers up in {time.monotonic() - started:.0f} s", flush=True)
    return ",".join(n.bootstrap_servers for n in nodes)


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for at in range(0, len(names), CREATE_AT_ONCE):
        batch = [
            NewTopic(n, num_partitions=partitions, replication_factor=1)
            for n in names[at : at + CREATE_AT_ONCE]
        ]
        for future in admin.create_topics(batch, request_timeout=300).values():
            future.result(timeout=600)
    while True:  # the brokers create ~14,000 logs each, fenced at times by a busy controller
        metadata = admin.list_topics(timeout=60)
        topics = [metadata.topics.get(n) for n in names]
        led = sum(1 for t in topics if t for p in t.partitions.values() if p.leader >= 0)
        if led == len(names) * partitions:
            return
        print(f"% {led} partitions with a leader", file=sys.stderr, flush=True)
        time.sleep(10)


def settle(since: float, limit_s: float = 900) -> None:
    """Wait until the brokers are done creating their logs, which goes on for minutes after the
    metadata shows every partition led: the 1-minute load average below the number of cores (or
    ``limit_s``, then the figures say so through the load printed with them)."""
    while os.getloadavg()[0] >= (os.cpu_count() or 1) and time.monotonic() - since < limit_s:
        time.sleep(15)
    print(f"% load average {os.getloadavg()[0]:.1f} after {time.monotonic() - since:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    nodes: list[LocalKafkaBroker] = []
    try:
        bootstrap = start_cluster(args.brokers, nodes)
        started = time.monotonic()
        names = [f"topic{t}" for t in range(args.topics)]  # checkpoint_scale's names
        # In a process of its own: the metadata of 100,000 partitions would stay in this one, and
        # a child's peak RSS (wait4) starts from its parent's.
        creator = multiprocessing.get_context("spawn").Process(
            target=create_topics, args=(bootstrap, names, args.partitions // args.topics)
        )
        creator.start()
        creator.join()
        if creator.exitcode != 0:
            raise SystemExit(f"creating the topics failed (exit {creator.exitcode})")
        print(
            f"% {args.partitions} partitions created and led in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        settle(started)
        with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
            root = Path(tmp) / "chk"
            write_checkpoint(root, args.partitions, args.topics)
            chk, kafka, as_json = str(root), ["-b", bootstrap], ["--output", "json"]
            commands = {
                "repair (plan)": [STREAM_RECOVERY, "repair", chk, *kafka, *as_json],
                "repair (plan, table)": [STREAM_RECOVERY, "repair", chk, *kafka],
                "validate --no-runway": [STREAM_RECOVERY, "validate", chk, *kafka, "--no-runway", *as_json],
                "validate": [STREAM_RECOVERY, "validate", chk, *kafka, *as_json],
                "checkpoint show --output json": [STREAM_RECOVERY, "checkpoint", "show", chk, *as_json],
            }
            runs: dict[str, list[tuple[float, float, int, int, int]]] = {name: [] for name in commands}
            for _ in range(args.rounds):  # interleaved, so a load spike hits every command alike
                for name, argv in commands.items():
                    runs[name].append(run_once(argv))
                    print(f"% {name}: {runs[name][-1][0]:.2f} s", file=sys.stderr, flush=True)
            # Checked last, for the same reason: the plan covers every partition.
            done = subprocess.run(commands["repair (plan)"], capture_output=True, check=False)
            plan = json.loads(done.stdout)
            covered = {(m["topic"], m["partition"]) for m in plan["moves"]}
            if len(covered) != args.partitions:
                raise SystemExit(f"the plan moves {len(covered)} partitions, not {args.partitions}")
            print(f"% the plan moves all {len(covered)} partitions ({len(plan['changes'])} changes)")
    finally:
        for node in reversed(nodes):
            node.stop()
    print(f"{'COMMAND':<30} {'WALL MEDIAN s':>13} {'(MIN-MAX)':>15} {'MAX RSS MB':>10} {'EXIT':>4}")
    for name, results in runs.items():
        walls = [r[0] for r in results]
        spread, rss = f"({min(walls):.2f}-{max(walls):.2f})", max(r[1] for r in results)
        print(f"{name:<30} {statistics.median(walls):>13.2f} {spread:>15} {rss:>10.0f} {results[0][2]:>4}")
    print(f"% load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
