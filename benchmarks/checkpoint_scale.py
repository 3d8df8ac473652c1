"""Benchmark: ``stream-recovery checkpoint show`` on a checkpoint of 100,000 partitions.

Run by hand (not a test; no broker, no JVM)::

    .venv/bin/python benchmarks/checkpoint_scale.py [--partitions 100000] [--topics 1] [--rounds 5]

Writes a checkpoint as Spark 4.x writes it for a Kafka query (``metadata``, ``offsets/0..2`` = ``v1`` +
metadata line + ``{"topic":{"0":n,...}}``, ``commits/0..1``, ``sources/0/0`` = NUL + ``v1`` + JSON,
and a Hadoop ``.crc`` beside each file) into a temporary directory, then runs the installed CLI,
``--rounds`` times each, as a subprocess: ``checkpoint show`` (the summarised table),
``checkpoint show --all`` (one line per partition) and ``checkpoint show --output json``. Prints the
median and range of the wall time and the peak resident memory of each (``wait4`` rusage of the
child), and the lines written on stdout and stderr. Targets (issue 11): table and JSON <= 3 s and
<= 200 MB at 100,000 partitions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from recovery.checkpoint.crc import checksum_file, crc_name  # noqa: E402  (after the path setup)

STREAM_RECOVERY = str(REPO / ".venv" / "bin" / "stream-recovery")
QUERY_ID = "6f1c2a4e-0d55-4b8e-9a51-3f3b9d3c1e27"
META = '{"batchWatermarkMs":0,"batchTimestampMs":1795327212050,"conf":{"spark.sql.shuffle.partitions":"200"}}'


def kafka_json(partitions: int, topics: int, offset: int) -> str:
    """``{"t0":{"0":offset,...},...}``: ``partitions`` spread over ``topics`` topics, compact like
    Spark's JsonUtils.partitionOffsets."""
    per_topic = -(-partitions // topics)
    body = {}
    for t in range(topics):
        count = min(per_topic, partitions - t * per_topic)
        body[f"topic{t}"] = {str(p): offset + p for p in range(count)}
    return json.dumps(body, separators=(",", ":"))


def write_checkpoint(root: Path, partitions: int, topics: int) -> None:
    files = {"metadata": f'{{"id":"{QUERY_ID}"}}'.encode()}
    for batch in range(3):
        files[f"offsets/{batch}"] = (
            f"v1\n{META}\n{kafka_json(partitions, topics, 1000 * (batch + 1))}".encode()
        )
    for batch in range(2):
        files[f"commits/{batch}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    files["sources/0/0"] = b"\x00v1\n" + kafka_json(partitions, topics, 0).encode()
    write_files(root, files)


def write_files(root: Path, files: dict[str, bytes]) -> None:
    """The checkpoint files (relative path -> bytes) under ``root``, each with its Hadoop ``.crc``."""
    for rel, data in list(files.items()):
        parent, _, name = rel.rpartition("/")
        files[f"{parent}/{crc_name(name)}" if parent else crc_name(name)] = checksum_file(data)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run_once(argv: list[str]) -> tuple[float, float, int, int, int]:
    """(wall s, peak RSS MB, exit code, stdout lines, stderr lines) of one run of ``argv``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        counts = []
        for stream in (out, err):
            stream.seek(0)
            counts.append(sum(1 for _ in stream))
    return wall, usage.ru_maxrss / 1024, child.returncode, counts[0], counts[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    # The package's bytecode compiled once, as a wheel install has it (see _rig.byte_compile).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "recovery")], check=True)
    with tempfile.TemporaryDirectory(prefix="chk-scale-") as tmp:
        root = Path(tmp) / "chk"
        write_checkpoint(root, args.partitions, args.topics)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"% checkpoint of {args.partitions} partitions in {args.topics} topic(s): {size / 1e6:.1f} MB")
        commands = {
            "show (table)": [STREAM_RECOVERY, "checkpoint", "show", str(root)],
            "show --all": [STREAM_RECOVERY, "checkpoint", "show", str(root), "--all"],
            "show --output json": [STREAM_RECOVERY, "checkpoint", "show", str(root), "--output", "json"],
        }
        runs: dict[str, list[tuple[float, float, int, int, int]]] = {name: [] for name in commands}
        for _ in range(args.rounds):  # interleaved, so a load spike hits every command alike
            for name, argv in commands.items():
                runs[name].append(run_once(argv))
    print(f"{'COMMAND':<20} {'WALL MEDIAN s':>13} {'(MIN-MAX)':>13} {'MAX RSS MB':>10} {'EXIT':>4} "
          f"{'STDOUT':>7} {'STDERR':>7}")  # fmt: skip
    for name, results in runs.items():
        walls = [r[0] for r in results]
        print(
            f"{name:<20} {statistics.median(walls):>13.2f} {f'({min(walls):.2f}-{max(walls):.2f})':>13} "
            f"{max(r[1] for r in results):>10.0f} {results[0][2]:>4} {results[0][3]:>7} {results[0][4]:>7}"
        )
    print(f"% load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
