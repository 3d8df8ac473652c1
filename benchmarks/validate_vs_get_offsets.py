"""Benchmark: ``stream-recovery validate`` of a 2,000-partition checkpoint against ``kafka-get-offsets``.

Run by hand (not a test)::

    .venv/bin/python benchmarks/validate_vs_get_offsets.py [--topics 20] [--partitions 100] [--rounds 9]
        [--no-runway]

1. starts the embedded broker (request logger at DEBUG), creates ``--topics`` × ``--partitions``
   partitions (1-7 records each, every third log start moved by DeleteRecords) and writes a
   Spark checkpoint (``offsets/0``, ``commits/0``, ``metadata``, ``sources/0/0``) whose last
   batch holds offset 1 for every partition;
2. runs, side by side and alternating A B / B A, ``--rounds`` times each:
   ``stream-recovery validate CHECKPOINT -b HOST:PORT --output json`` (which reads each
   partition's log start and end, and by default the retention runway: one DescribeConfigs and a
   one-record fetch per partition; ``--no-runway`` leaves it out, like for like with the peer)
   and ``GetOffsetShell --topic 'bench-.*' --time -1`` (the
   class behind kafka-get-offsets.sh, reading the ends only);
3. prints medians (min-max), the ratio of the wall-time medians and the requests per run; writes
   ``benchmarks/results/validate.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _rig import STREAM_RECOVERY, RequestLog, alternate, broker, java_tool, make_topics, summarize


def write_checkpoint(root: Path, names: list[str], partitions: int) -> None:
    """A checkpoint as Spark writes it for a Kafka query, resuming at offset 1 everywhere; the
    batch ran just now (after the records were written: a batch older than the records it read
    would look like a recreated topic to validate)."""
    now_ms = int(time.time() * 1000)
    meta = json.dumps(
        {"batchWatermarkMs": 0, "batchTimestampMs": now_ms, "conf": {"spark.sql.shuffle.partitions": "2"}},
        separators=(",", ":"),
    )
    offsets = {name: {str(p): 1 for p in range(partitions)} for name in names}
    initial = {name: {str(p): 0 for p in range(partitions)} for name in names}
    files = {
        "metadata": '{"id":"6f1c2a4e-0d55-4b8e-9a51-3f3b9d3c1e27"}',
        "offsets/0": f"v1\n{meta}\n{json.dumps(offsets, separators=(',', ':'))}",
        "commits/0": 'v1\n{"nextBatchWatermarkMs":0}',
        "sources/0/0": "\x00v1\n" + json.dumps(initial, separators=(",", ":")),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-runway", action="store_true", help="validate --no-runway (offsets only)")
    args = parser.parse_args()
    total = args.topics * args.partitions

    with broker() as started, tempfile.TemporaryDirectory(prefix="bench-chk-") as tmp:
        bootstrap = started.bootstrap_servers
        names = make_topics(bootstrap, args.topics, args.partitions)
        checkpoint = Path(tmp) / "chk"
        write_checkpoint(checkpoint, names, args.partitions)
        ours = "stream-recovery validate" + (" --no-runway" if args.no_runway else "")
        theirs = "kafka-get-offsets (GetOffsetShell)"
        tools = {
            ours: [STREAM_RECOVERY, "validate", str(checkpoint), "-b", bootstrap, "--output", "json",
                   *(["--no-runway"] if args.no_runway else [])],
            theirs: java_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
                              "--topic", "bench-.*", "--time", "-1"),
        }  # fmt: skip

        def check(name: str, out: str) -> None:
            if name == ours:
                text = json.dumps(json.loads(out))
                if text.count('"partition"') < total:
                    raise SystemExit(f"validate did not report {total} partitions: {text[:500]}")
            elif len(out.strip().splitlines()) != total:
                raise SystemExit(f"kafka-get-offsets did not list {total} partitions")

        runs = alternate(tools, args.rounds, log=RequestLog(started.log_path), check=check)
        summarize(
            "validate-no-runway" if args.no_runway else "validate",
            f"validate of a {total:,}-partition checkpoint vs kafka-get-offsets --time -1",
            runs,
            ours,
            theirs,
            {"partitions": total},
        )


if __name__ == "__main__":
    main()
