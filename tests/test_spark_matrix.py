"""The matrix writers (tests/spark_matrix.py, tests/kafka_matrix.py) on JUnit files shaped as pytest
writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark_matrix import main

SUITE = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">
<properties><property name="pyspark" value="{version}"/><property name="Kafka broker" value="4.1.1"/>
</properties>{cases}</testsuite></testsuites>"""
CASE = '<testcase classname="integration.test_spark_shapes" name="{name}" time="1">{inner}</testcase>'


def write(path: Path, version: str, cases: dict[str, str]) -> None:
    inner = {"pass": "", "fail": '<failure message="x"/>', "skip": '<skipped message="x"/>'}
    body = "".join(CASE.format(name=n, inner=inner[r]) for n, r in cases.items())
    path.write_text(SUITE.format(version=version, cases=body))


def test_the_tables_say_pass_fail_and_not_in_this_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    write(results / "primary.xml", "4.2.0", {"test_a": "pass", "test_named": "pass"})
    write(results / "3.5.xml", "3.5.7", {"test_a": "fail"})
    write(results / "4.0.xml", "4.0.4", {"test_a": "skip", "test_named": "pass"})
    page, readme = tmp_path / "page.md", tmp_path / "README.md"
    page.write_text("# top\n<!-- spark-matrix:start -->\nold\n<!-- spark-matrix:end -->\nbottom\n")
    readme.write_text("<!-- spark-lines:start -->\n<!-- spark-lines:end -->\n")

    assert main(str(results), str(page), str(readme)) == 1  # a failure and a skip: not all passed

    text = page.read_text()
    assert text.startswith("# top\n") and text.endswith("<!-- spark-matrix:end -->\nbottom\n")
    assert "| test | Spark 3.5.7 | Spark 4.0.4 | Spark 4.2.0 |" in text
    assert "| `test_spark_shapes::test_a` | FAIL | skip | pass |" in text
    assert "| `test_spark_shapes::test_named` | - | pass | pass |" in text
    assert "| **passed** | 0/1 | 1/2 | 2/2 |" in text
    assert "| 3.5.7 | 0 of 1 | 1 |" in readme.read_text()
    err = capsys.readouterr().err
    assert "Spark 3.5: test_spark_shapes::test_a failed" in err
    assert "Spark 4.0: test_spark_shapes::test_a was skipped" in err


def test_a_run_that_did_not_start_is_said_not_tabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "3.5.xml").write_text('<testsuites><testsuite name="pytest" tests="0"/></testsuites>')
    page = tmp_path / "page.md"
    page.write_text("<!-- spark-matrix:start -->\nold\n<!-- spark-matrix:end -->\n")
    assert main(str(results), str(page), str(page)) == 1
    assert "3.5.xml: no versions recorded" in capsys.readouterr().err
    assert "old" in page.read_text()  # left as it was


def test_the_kafka_matrix_counts_each_module_per_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.kafka_matrix import main as kafka_main

    results = tmp_path / "results"
    results.mkdir()
    for name, broker, outcome in (("primary", "4.1.1", "pass"), ("3.9.1", "3.9.1", "fail")):
        text = SUITE.replace('value="4.1.1"', f'value="{broker}"').format(
            version="4.2.0",
            cases=CASE.format(name="test_a", inner="")
            + CASE.format(name="test_b", inner="" if outcome == "pass" else '<failure message="x"/>'),
        )
        (results / f"{name}.xml").write_text(text)
    page, readme = tmp_path / "page.md", tmp_path / "README.md"
    page.write_text("<!-- kafka-matrix:start -->\n<!-- kafka-matrix:end -->\n")
    readme.write_text("<!-- kafka-versions:start -->\n<!-- kafka-versions:end -->\n")

    assert kafka_main(str(results), str(page), str(readme)) == 1

    assert "| `test_spark_shapes` | 1 of 2 | 2 of 2 |" in page.read_text()
    assert "| tests | Kafka 3.9.1 | Kafka 4.1.1 |" in page.read_text()
    assert "| 3.9.1 | 1 of 2 | 4.2.0 |" in readme.read_text()
    assert "Kafka 3.9.1: test_spark_shapes::test_b failed" in capsys.readouterr().err


def test_no_results_exit_2_and_all_passed_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir()
    page, readme = tmp_path / "page.md", tmp_path / "README.md"
    page.write_text("<!-- spark-matrix:start -->\n<!-- spark-matrix:end -->\n")
    readme.write_text("<!-- spark-lines:start -->\n<!-- spark-lines:end -->\n")
    assert main(str(results), str(page), str(readme)) == 2
    assert f"{results}: no results" in capsys.readouterr().err

    write(results / "primary.xml", "4.2.0", {"test_a": "pass"})
    assert main(str(results), str(page), str(readme)) == 0
    assert "| `test_spark_shapes::test_a` | pass |" in page.read_text()
    assert capsys.readouterr().err == ""
