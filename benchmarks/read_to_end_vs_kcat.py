"""Benchmark: ``stream-recovery read-to-end`` against ``kcat -C -e -o beginning`` on 1M records.

Run by hand (not a test)::

    .venv/bin/python benchmarks/read_to_end_vs_kcat.py [--records 1000000] [--size 200] [--rounds 7]

Needs kcat (Debian/Ubuntu: ``apt-get install -y kcat``; macOS: ``brew install kcat``); this script
never installs anything.

1. starts the embedded broker and writes ``--records`` records of ``--size`` bytes to a topic
   of 3 partitions;
2. checks once that both tools read the same number of records from each partition;
3. runs side by side, alternating A B / B A, ``--rounds`` times each, two pairs:

   * summary: ``stream-recovery read-to-end --topic T -q`` (the per-partition summary) against
     ``kcat -C -e -o beginning -t T -q`` (every value on stdout, to /dev/null);
   * records: ``stream-recovery read-to-end --records - -q`` (every record as a JSON line) against
     ``kcat -C -e -o beginning -J`` (every record as a JSON envelope), both to /dev/null;

4. prints medians (min-max), the ratio of the wall-time medians, and the Fetch requests per run;
   writes ``benchmarks/results/read_to_end.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from _rig import STREAM_RECOVERY, RequestLog, alternate, broker, need, summarize

TOPIC = "bench-read"


def fill(bootstrap: str, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        future.result(60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "log_level": 0,
        }
    )
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % 3)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)


def counts_ours(bootstrap: str) -> dict[int, int]:
    out = subprocess.run(
        [STREAM_RECOVERY, "read-to-end", "-b", bootstrap, "--topic", TOPIC, "-q", "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {row["partition"]: row["records"] for row in json.loads(out)}


def counts_kcat(kcat: str, bootstrap: str) -> dict[int, int]:
    out = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-e", "-o", "beginning", "-t", TOPIC, "-q", "-f", "%p\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: dict[int, int] = {}
    for line in out.split():
        counts[int(line)] = counts.get(int(line), 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("summary", "records"), help="run one pair only")
    args = parser.parse_args()
    kcat = need("kcat", "install it with your package manager (Debian/Ubuntu: apt-get install -y kcat)")

    with broker() as started:
        bootstrap = started.bootstrap_servers
        print(
            f"% writing {args.records} records of {args.size} B to {TOPIC} (3 partitions) ...",
            file=sys.stderr,
        )
        fill(bootstrap, args.records, args.size)
        ours, theirs = counts_ours(bootstrap), counts_kcat(kcat, bootstrap)
        if ours != theirs or sum(ours.values()) != args.records:
            raise SystemExit(f"the tools read different records per partition: ours {ours}, kcat {theirs}")
        print(f"% both read {ours} records per partition", file=sys.stderr)
        log = RequestLog(started.log_path)
        read = [STREAM_RECOVERY, "read-to-end", "-b", bootstrap, "--topic", TOPIC, "-q"]
        cat = [kcat, "-b", bootstrap, "-C", "-e", "-o", "beginning", "-t", TOPIC, "-q"]
        pairs = {
            "summary": {"stream-recovery read-to-end": read, "kcat -C -e -o beginning": cat},
            "records": {
                "stream-recovery read-to-end --records -": [*read, "--records", "-"],
                "kcat -C -e -o beginning -J": [*cat, "-J"],
            },
        }
        for pair, tools in pairs.items():
            if args.only and pair != args.only:
                continue
            runs = alternate(tools, args.rounds, log=log)
            a, b = tools
            summarize(
                f"read_to_end_{pair}",
                f"read-to-end vs kcat ({pair}), {args.records:,} records of {args.size} B, 3 partitions",
                runs,
                a,
                b,
                {"records": args.records, "record_bytes": args.size},
            )


if __name__ == "__main__":
    main()
