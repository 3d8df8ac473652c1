"""Write the Kafka version matrix from `make test-kafka-matrix`'s results.

    python -m tests.kafka_matrix .cache/kafka-matrix docs/kafka-versions.md README.md

Reads one JUnit XML per broker (``primary.xml`` and ``<version>.xml``; the broker's version is a
suite property, read from the jars the run used) and replaces the part of the page between the
``kafka-matrix`` markers with a table: one row per test module, one column per broker, each cell
``passed of run``; in the README, between the ``kafka-versions`` markers, one row per broker. Exit 1
if a test failed or was skipped.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from tests.spark_matrix import read, replace_between

MATRIX = "kafka-matrix"
VERSIONS = "kafka-versions"
Run = tuple[dict[str, str], dict[str, str]]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def table(runs: dict[str, Run]) -> str:
    versions = sorted(runs, key=_key)
    modules = sorted({name.split("::")[0] for _, results in runs.values() for name in results})
    rows = [
        "| tests | " + " | ".join(f"Kafka {v}" for v in versions) + " |",
        "|---|" + "---|" * len(versions),
    ]
    for module in modules:
        cells = []
        for version in versions:
            mine = [v for n, v in runs[version][1].items() if n.split("::")[0] == module]
            cells.append(f"{sum(v == 'pass' for v in mine)} of {len(mine)}" if mine else "-")
        rows.append(f"| `{module}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def summary(runs: dict[str, Run]) -> str:
    rows = ["| Kafka broker | tests passed | pyspark |", "|---|---|---|"]
    for version in sorted(runs, key=_key, reverse=True):
        props, results = runs[version]
        counts = Counter(results.values())
        rows.append(f"| {version} | {counts['pass']} of {len(results)} | {props.get('pyspark', '?')} |")
    return "\n".join(rows)


def main(results_dir: str, page: str, readme: str) -> int:
    runs: dict[str, Run] = {}
    for path in sorted(Path(results_dir).glob("*.xml")):
        props, results = read(path)
        if "Kafka broker" not in props:
            print(f"{path}: no versions recorded: the run did not start", file=sys.stderr)
            return 1
        runs[props["Kafka broker"]] = (props, results)
    if not runs:
        print(f"{results_dir}: no results", file=sys.stderr)
        return 2
    replace_between(Path(page), MATRIX, table(runs))
    replace_between(Path(readme), VERSIONS, summary(runs))
    failed = [(v, n, o) for v, (_, r) in runs.items() for n, o in r.items() if o != "pass"]
    for version, name, outcome in failed:
        print(f"Kafka {version}: {name} {'failed' if outcome == 'FAIL' else 'was skipped'}", file=sys.stderr)
    return 1 if failed else 0  # a skip is not a pass


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
