"""Write the Spark version matrix from `make test-matrix`'s results.

    python -m tests.spark_matrix .cache/matrix docs/spark-versions.md README.md

Reads one JUnit XML per Spark line (``primary.xml`` and ``<line>.xml``, written by pytest with the
line's pyspark and jar versions as suite properties) and replaces the part of the page between the
``spark-matrix`` markers with a table: one row per fidelity test, one column per line, each cell
``pass``, ``FAIL``, ``skip`` or ``-`` (not in that line: a format or mode it lacks); in the README, between
the ``spark-lines`` markers, one row per line. Exit 1 if a test failed.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

MATRIX = "spark-matrix"
LINES = "spark-lines"
Run = tuple[dict[str, str], dict[str, str]]  # (suite properties, test name -> outcome)


def read(path: Path) -> Run:
    """(suite properties, test name -> pass/FAIL) of one JUnit file."""
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")  # type: ignore[assignment]
    assert suite is not None, f"{path}: no testsuite"
    found = suite.find("properties")  # the suite's own, not a test's record_property
    props = {p.get("name", ""): p.get("value", "") for p in ([] if found is None else found)}
    results = {}
    for case in suite.iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        name = f"{module}::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        results[name] = "FAIL" if failed else "skip" if case.find("skipped") is not None else "pass"
    return props, results


def table(runs: dict[str, Run]) -> str:
    lines = sorted(runs, key=lambda line: tuple(int(p) for p in line.split(".")))
    head = [f"Spark {runs[line][0].get('pyspark', line)}" for line in lines]
    names = sorted({name for _, results in runs.values() for name in results})
    rows = ["| test | " + " | ".join(head) + " |", "|---|" + "---|" * len(lines)]
    for name in names:
        cells = [runs[line][1].get(name, "-") for line in lines]
        rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
    totals = [f"{sum(v == 'pass' for v in runs[line][1].values())}/{len(runs[line][1])}" for line in lines]
    rows.append("| **passed** | " + " | ".join(totals) + " |")
    jars = []
    for line in lines:
        props = runs[line][0].get
        jars.append(
            f"- Spark {props('pyspark', line)}: spark-sql-kafka-0-10 {props('spark-sql-kafka-0-10', '?')}, "
            f"delta-spark {props('delta-spark (JVM)', '?')}, Kafka broker {props('Kafka broker', '?')}"
        )
    return "\n".join([*rows, "", *jars])


def summary(runs: dict[str, Run]) -> str:
    rows = ["| Spark | fidelity tests passed | not in this line |", "|---|---|---|"]
    names = {name for _, results in runs.values() for name in results}
    for line in sorted(runs, key=lambda line: tuple(int(p) for p in line.split(".")), reverse=True):
        props, results = runs[line]
        passed = sum(v == "pass" for v in results.values())
        rows.append(
            f"| {props.get('pyspark', line)} | {passed} of {len(results)} | {len(names - set(results))} |"
        )
    return "\n".join(rows)


def replace_between(path: Path, marker: str, text: str) -> None:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    before, found, rest = path.read_text().partition(start)
    assert found, f"{path}: no {start}"
    _, _, after = rest.partition(end)
    path.write_text(f"{before}{start}\n\n{text}\n\n{end}{after}")  # a table starts a block


def write_matrix(
    results_dir: str,
    page: str,
    readme: str,
    *,
    key: Callable[[dict[str, str]], str | None],
    label: str,
    markers: tuple[str, str],
    table: Callable[[dict[str, Run]], str],
    summary: Callable[[dict[str, Run]], str],
) -> int:
    """Table every JUnit file in ``results_dir`` by its ``key`` (None: no versions recorded): ``table``
    into ``page`` between ``markers[0]``, ``summary`` into ``readme`` between ``markers[1]``. Exit 1 if
    a run did not start or a test failed or was skipped, 2 if there are no results."""
    runs: dict[str, Run] = {}
    for path in sorted(Path(results_dir).glob("*.xml")):
        props, results = read(path)
        version = key(props)
        if version is None:  # the run stopped before its session fixture said its versions
            print(f"{path}: no versions recorded: the run did not start", file=sys.stderr)
            return 1
        runs[version] = (props, results)
    if not runs:
        print(f"{results_dir}: no results", file=sys.stderr)
        return 2
    replace_between(Path(page), markers[0], table(runs))
    replace_between(Path(readme), markers[1], summary(runs))
    failed = [(v, n, o) for v, (_, r) in runs.items() for n, o in r.items() if o != "pass"]
    for version, name, outcome in failed:
        print(
            f"{label} {version}: {name} {'failed' if outcome == 'FAIL' else 'was skipped'}", file=sys.stderr
        )
    return 1 if failed else 0  # a skip is not a pass


def _line(props: dict[str, str]) -> str | None:
    """The run's Spark line (major.minor), or None if it recorded no versions."""
    return ".".join(props["pyspark"].split(".")[:2]) if "pyspark" in props else None


def main(results_dir: str, page: str, readme: str) -> int:
    return write_matrix(
        results_dir,
        page,
        readme,
        key=_line,
        label="Spark",
        markers=(MATRIX, LINES),
        table=table,
        summary=summary,
    )


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
