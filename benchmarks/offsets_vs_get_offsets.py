"""Benchmark: ``stream-recovery offsets`` against ``kafka-get-offsets`` (GetOffsetShell) on 2,000 partitions.

Run by hand (not a test)::

    .venv/bin/python benchmarks/offsets_vs_get_offsets.py [--topics 20] [--partitions 100] \\
        [--time latest] [--rounds 9]

1. starts the embedded broker with Kafka's request logger at DEBUG (every completed request is
   logged: "Completed request:{...}") and creates ``--topics`` × ``--partitions`` partitions with
   1-7 records each, the log start of every third one moved by DeleteRecords;
2. checks once that both tools give the same offset for every partition;
3. runs, side by side and alternating A B / B A, ``--rounds`` times each:
   ``stream-recovery offsets -b HOST:PORT --topic 'bench-.*' --time latest --output csv`` and
   ``java -cp '.cache/jars/kafka/*' org.apache.kafka.tools.GetOffsetShell --bootstrap-server
   HOST:PORT --topic 'bench-.*' --time -1`` (the class behind kafka-get-offsets.sh);
4. prints medians (min-max), the ratio of the wall-time medians and the requests per run, counted
   from the broker's request log; writes ``benchmarks/results/offsets_<time>.json``.
"""

from __future__ import annotations

import argparse

from _rig import STREAM_RECOVERY, RequestLog, alternate, broker, java_tool, make_topics, summarize

SPECS = {"earliest": "-2", "latest": "-1"}


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
    parser.add_argument("--time", choices=sorted(SPECS), default="latest")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    total = args.topics * args.partitions

    with broker() as started:
        bootstrap = started.bootstrap_servers
        make_topics(bootstrap, args.topics, args.partitions)
        ours = "stream-recovery offsets"
        theirs = "kafka-get-offsets (GetOffsetShell)"
        tools = {
            ours: [STREAM_RECOVERY, "offsets", "-b", bootstrap, "--topic", "bench-.*", "--time", args.time,
                   "--output", "csv"],
            theirs: java_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
                              "--topic", "bench-.*", "--time", SPECS[args.time]),
        }  # fmt: skip
        answers: dict[str, dict[tuple[str, int], int]] = {}

        def check(name: str, out: str) -> None:
            answers[name] = parse_ours(out) if name == ours else parse_theirs(out)
            if len(answers) == 2 and (answers[ours] != answers[theirs] or len(answers[ours]) != total):
                diff = [
                    k
                    for k in set(answers[ours]) | set(answers[theirs])
                    if answers[ours].get(k) != answers[theirs].get(k)
                ]
                raise SystemExit(f"the tools' offsets differ for {len(diff)} partition(s), e.g. {diff[:5]}")

        runs = alternate(tools, args.rounds, log=RequestLog(started.log_path), check=check)
        summarize(
            f"offsets_{args.time}",
            f"offsets --time {args.time} vs kafka-get-offsets, {total:,} partitions",
            runs,
            ours,
            theirs,
            {"partitions": total, "answers_identical": True},
        )


if __name__ == "__main__":
    main()
