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

from tests.spark_matrix import Run, write_matrix

MATRIX = "kafka-matrix"
VERSIONS = "kafka-versions"


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
    return write_matrix(
        results_dir,
        page,
        readme,
        key=lambda props: props.get("Kafka broker"),
        label="Kafka",
        markers=(MATRIX, VERSIONS),
        table=table,
        summary=summary,
    )


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
