"""Benchmark: ``stream-recovery --help`` against ``python -c pass`` (start-up cost of the CLI).

Run by hand (not a test)::

    .venv/bin/python benchmarks/startup_vs_python.py [--rounds 21]

Runs, side by side and alternating A B / B A, ``--rounds`` times each: ``.venv/bin/stream-recovery
--help`` and ``.venv/bin/python -c pass`` (the same interpreter, doing nothing); prints medians
(min-max) and the ratio of the wall-time medians; writes ``benchmarks/results/startup.json``.
Also lists the slowest imports of ``--help`` (``python -X importtime``), to show what to make lazy.
"""

from __future__ import annotations

import argparse
import subprocess

from _rig import PYTHON, REPO, STREAM_RECOVERY, alternate, summarize


def slowest_imports(count: int = 12) -> list[tuple[int, str]]:
    """(cumulative µs, module) of the slowest top-level imports of ``stream-recovery --help``."""
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", "import sys; sys.argv = ['stream-recovery', '--help']\n"
         "from recovery.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    found = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit():
            found.append((int(cumulative), name.rstrip()))
    return sorted(found, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    ours, theirs = "stream-recovery --help", "python -c pass"
    tools = {ours: [STREAM_RECOVERY, "--help"], theirs: [PYTHON, "-c", "pass"]}
    runs = alternate(tools, args.rounds)
    imports = slowest_imports()
    summarize("startup", "stream-recovery --help vs python -c pass", runs, ours, theirs,
              {"slowest_imports_us": imports})  # fmt: skip
    print("\nslowest imports of --help (cumulative ms, module):")
    for micros, name in imports:
        print(f"  {micros / 1000:7.1f}  {name}")


if __name__ == "__main__":
    main()
