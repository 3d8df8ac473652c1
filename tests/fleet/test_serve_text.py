"""The per-partition series of ``fleet serve`` (no broker): each job's made once per check and joined
at each scrape into one valid exposition, every family once and its samples together."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from recovery.cli.serve import (
    _JOB_VERDICTS,
    _PARTITION_FAMILIES,
    _Collector,
    _Families,
    _job_families,
    _partition_samples,
    _PartitionText,
    _Summary,
)
from recovery.core.model import (
    COULD_NOT_READ,
    Finding,
    Isolation,
    OffsetRange,
    Runway,
    TopicPartition,
    Verdict,
)
from recovery.core.restart import Issue, Level
from recovery.core.results import ValidationReport
from recovery.errors import KafkaUnavailable
from recovery.fleet import JobFailure, JobResult
from recovery.watch import FleetWatch, JobCheck

CONF = '[cluster.c]\nbootstrap_servers = "127.0.0.1:1"\n'


def check(watch: FleetWatch, name: str, findings: tuple[Finding, ...]) -> JobCheck:
    report = ValidationReport("/chk", "q", 3, False, Isolation.READ_UNCOMMITTED, findings)
    return JobCheck(JobResult(watch.conf.jobs[name], report=report), 1_000, 0.1, 1_000)


def test_two_jobs_make_one_exposition_each_family_once_with_its_samples_together(tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    jobs = "".join(f'[job.{n}]\ncluster = "c"\ncheckpoint = "/chk/{n}"\n' for n in ("a", "b", "quiet"))
    conf.write_text(CONF + jobs + "partition_metrics = false\n")
    watch = FleetWatch(conf)
    text = _PartitionText(watch)
    ok = Finding("0", TopicPartition("t", 0), Verdict.OK, 5, None, OffsetRange(0, 9))
    lost = Finding(
        "0", TopicPartition("t", 1), Verdict.BELOW_LOG_START, 2, None, OffsetRange(4, 9), 2, COULD_NOT_READ
    )
    text.update("a", check(watch, "a", (ok, lost)))
    text.update("b", check(watch, "b", (ok,)))
    text.update("quiet", check(watch, "quiet", (ok,)))  # partition_metrics = false: none

    body = b"".join(text.pieces()).decode()
    lines = body.splitlines()
    types = [line for line in lines if line.startswith("# TYPE")]
    assert len(types) == len(set(types)) == 6  # every family once, even one without samples
    runs = [name for name, _ in itertools.groupby(line.split("{")[0] for line in lines if line[:1] != "#")]
    # each family's samples in one run (4 have samples: no runway was read for these reports)
    assert len(runs) == len(set(runs)) == 4
    samples = {
        (s.name, s.labels["streaming_job"], s.labels["partition"], s.labels.get("verdict", "")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("stream_recovery_partition_verdict", "a", "1", "BELOW_LOG_START")] == 1.0
    assert samples[("stream_recovery_partition_verdict", "b", "0", "OK")] == 1.0
    assert samples[("stream_recovery_partition_records_lost", "a", "1", "")] == 2.0
    assert ("stream_recovery_partition_records_lost", "a", "0", "") not in samples  # none lost: absent
    assert samples[("stream_recovery_partition_lag_records", "b", "0", "")] == 4.0
    assert not any(job == "quiet" for _, job, _, _ in samples)

    # a job gone from the conf (a reload) leaves with its series
    conf.write_text(CONF + '[job.b]\ncluster = "c"\ncheckpoint = "/chk/b"\n')
    assert watch.reload() is None
    assert {job for _, job, _, _ in _keys(b"".join(text.pieces()).decode())} == {"b"}


def _keys(body: str) -> set[tuple[str, str, str, str]]:
    return {
        (s.name, s.labels["streaming_job"], s.labels["partition"], "")
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def _reference(name: str, report: ValidationReport) -> list[bytes]:
    """The per-partition families as prometheus_client itself writes them (each family's samples,
    its HELP and TYPE lines cut): what the service's own writer must match byte for byte."""
    from prometheus_client import generate_latest
    from prometheus_client.core import GaugeMetricFamily

    families = [GaugeMetricFamily(n, h, labels=list(labels)) for n, h, labels in _PARTITION_FAMILIES]
    verdict, lost, error, runway, age, lag = families
    at_ms = report.runway_at_ms
    assert at_ms is not None
    for f in report.findings:
        labels = [name, f.tp.topic, str(f.tp.partition)]
        verdict.add_metric([*labels, f.verdict.value], 1.0)
        if f.records_lost:
            lost.add_metric(labels, float(f.records_lost))
        if f.spark_error:
            error.add_metric([*labels, f.spark_error], 1.0)
        if f.runway is not None:
            if (left := f.runway.left_ms(at_ms)) is not None:
                runway.add_metric(labels, left / 1000)
            if (old := f.runway.age_ms(at_ms)) is not None:
                age.add_metric(labels, old / 1000)
        if f.position is not None and f.available is not None:
            lag.add_metric(labels, float(max(0, f.available.end - f.position)))
    out = []
    for family in families:
        text = generate_latest(_Families([family]))
        lines = text.split(b"\n")[:-1]  # not splitlines(): a label value may hold a \r
        out.append(b"".join(line + b"\n" for line in lines if not line.startswith(b"#")))
    return out


@given(
    name=st.text(min_size=1, max_size=12),
    topic=st.text(min_size=1, max_size=12),
    rows=st.lists(
        st.tuples(
            st.integers(0, 10**6),  # partition
            st.sampled_from(list(Verdict)),
            st.integers(0, 10**15),  # records lost
            st.one_of(st.none(), st.text(max_size=8)),  # spark error
            st.one_of(st.none(), st.integers(-(10**13), 10**13)),  # earliest delete, ms
            st.one_of(st.none(), st.integers(0, 10**13)),  # oldest unread, ms
            st.integers(0, 10**12),  # position
            st.integers(0, 10**12),  # log end
        ),
        max_size=6,
    ),
)
def test_the_series_text_is_prometheus_clients_byte_for_byte(
    name: str, topic: str, rows: list[tuple[int, Verdict, int, str | None, int | None, int | None, int, int]]
) -> None:
    # Names with quotes, backslashes and newlines; values large, negative and fractional.
    findings = tuple(
        Finding(
            "0",
            TopicPartition(topic, p),
            verdict,
            position,
            None,
            OffsetRange(0, end),
            lost,
            error or None,
            runway=Runway(delete, oldest, "retention.ms=1"),
        )
        for p, verdict, lost, error, delete, oldest, position, end in rows
    )
    report = ValidationReport(
        "/chk", "q", 3, False, Isolation.READ_UNCOMMITTED, findings, runway_at_ms=1_700_000_000_123
    )
    assert _partition_samples(name, report) == _reference(name, report)
    # the same findings given again later (a judging that holds): only the timed series are made again
    later = replace(report, runway_at_ms=report.runway_at_ms + 61_000)  # type: ignore[operator]
    made = _partition_samples(name, report)
    assert _partition_samples(name, later, made) == _reference(name, later)


class _Watch:
    """What the collector reads of a watch: its checks, conf and intervals (a FleetWatch's conf
    names its jobs as TOML keys; the names here are any text)."""

    def __init__(self, checks: dict[str, JobCheck], interval_s: float) -> None:
        self.checks, self.interval_s = checks, interval_s
        self.conf = SimpleNamespace(jobs={name: c.result.job for name, c in checks.items()})

    def snapshot(self) -> dict[str, JobCheck]:
        return dict(self.checks)

    def interval_of(self, job: object) -> float:
        return self.interval_s


def _job_reference(watch: _Watch) -> bytes:
    """The per-job families as prometheus_client writes them (the collector's code before it wrote
    them itself)."""
    from prometheus_client import generate_latest

    from recovery.cli.report.fleet import job_runway

    families: list[Any] = _job_families()  # Gauge and StateSet families, each with add_metric
    verdict, needs, lost, runway, warn, success, last, duration, every = families
    for name, c in sorted(watch.snapshot().items()):
        result = c.result
        verdict.add_metric([name], {v: v == result.verdict for v in _JOB_VERDICTS})
        needs.add_metric([name], 1.0 if result.needs_action else 0.0)
        if result.records_lost is not None:
            lost.add_metric([name], float(result.records_lost))
        if (runway_s := job_runway(result.report)["runway_s"]) is not None:
            runway.add_metric([name], float(runway_s))
        if result.report is not None and result.report.runway_warn_s is not None:
            warn.add_metric([name], float(result.report.runway_warn_s))
        if c.last_success_ms is not None:
            success.add_metric([name], c.last_success_ms / 1000)
        last.add_metric([name], c.checked_at_ms / 1000)
        duration.add_metric([name], c.duration_s)
        every.add_metric([name], watch.interval_of(result.job))
    return generate_latest(_Families(families))


@given(
    jobs=st.dictionaries(
        st.text(min_size=1, max_size=10),
        st.tuples(
            st.booleans(),  # a report (else a failure)
            st.sampled_from(list(Verdict)),
            st.integers(0, 10**15),  # records lost
            st.one_of(st.none(), st.integers(-(10**13), 10**13)),  # earliest delete, ms
            st.one_of(st.none(), st.integers(-(10**13), 10**13)),  # another partition's
            st.one_of(st.none(), st.floats(1, 10**7)),  # runway_warn_s
            st.one_of(st.none(), st.integers(0, 10**13)),  # last success, ms
            st.integers(0, 10**13),  # checked at, ms
            st.floats(0, 10**4),  # duration
        ),
        max_size=4,
    ),
    interval_s=st.floats(0.001, 10**6),
)
def test_the_job_series_text_is_prometheus_clients_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    jobs: dict[str, tuple[bool, Verdict, int, int | None, int | None, float | None, int | None, int, float]],
    interval_s: float,
) -> None:
    conf = tmp_path_factory.mktemp("conf") / "conf.toml"
    conf.write_text(CONF + '[job.a]\ncluster = "c"\ncheckpoint = "/chk/a"\n')
    base = FleetWatch(conf).conf.jobs["a"]
    checks = {}
    for name, (reported, verdict, lost, delete, other, warn_s, success, at_ms, took) in jobs.items():
        job = replace(base, name=name)
        if reported:
            findings = tuple(
                Finding(
                    "0",
                    TopicPartition("t", p),
                    verdict if p == 0 else Verdict.OK,
                    5,
                    None,
                    OffsetRange(0, 9),
                    lost if p == 0 else 0,
                    runway=Runway(at, None, "retention.ms=1"),
                )
                for p, at in enumerate((delete, other))
            )
            report = ValidationReport(
                "/chk",
                "q",
                3,
                False,
                Isolation.READ_UNCOMMITTED,
                findings,
                runway_at_ms=1_700_000_000_123,
                runway_warn_s=warn_s,
            )
            result = JobResult(job, report=report)
        else:
            result = JobResult(job, failure=JobFailure.of(KafkaUnavailable("down")))
        checks[name] = JobCheck(result, at_ms, took, success)
    watch = _Watch(checks, interval_s)
    collector = _Collector(watch)  # type: ignore[arg-type]
    assert b"".join(collector.job_pieces()) == _job_reference(watch)
    # each judging given again a minute later (the same findings): its summary is the one before,
    # its runway counted down (no scan), and equals a summary made anew
    for name, c in checks.items():
        report = c.result.report
        if report is not None:
            later = replace(c.result, report=replace(report, runway_at_ms=1_700_000_061_456))
            assert _Summary.of(c.result).again(c.result, later) == _Summary.of(later)
            checks[name] = replace(c, result=later, checked_at_ms=c.checked_at_ms + 1)
    assert b"".join(collector.job_pieces()) == _job_reference(watch)


def test_a_judging_given_again_with_other_report_facts_is_summed_up_anew(tmp_path: Path) -> None:
    conf = tmp_path / "conf.toml"
    conf.write_text(CONF + '[job.a]\ncluster = "c"\ncheckpoint = "/chk/a"\n')
    conf_job = FleetWatch(conf).conf.jobs["a"]
    findings = tuple(
        Finding("0", TopicPartition("t", p), Verdict.OK, 5, None, OffsetRange(0, 9), runway=runway)
        for p, runway in enumerate(
            (Runway(1_700_000_900_000, None, "retention.ms=1"), Runway(1_700_000_500_000, None, "r"))
        )
    )
    report = ValidationReport(
        "/chk", "q", 3, False, Isolation.READ_UNCOMMITTED, findings, runway_at_ms=1_700_000_000_000
    )
    watch = _Watch({"a": JobCheck(JobResult(conf_job, report=report), 1_000, 0.1, 1_000)}, 60.0)
    collector = _Collector(watch)  # type: ignore[arg-type]
    assert b"".join(collector.job_pieces()) == _job_reference(watch)
    for later in (
        replace(report, sink_warning="the sink would skip batch 4"),  # the verdict changes
        replace(report, issues=(Issue(Level.ERROR, "offsets/3 is torn"),)),  # so does needs_action
        replace(report, runway_at_ms=None),  # no runway read: none shown
        replace(report, runway_at_ms=1_700_000_600_000),  # the same partition, its runway gone
    ):
        watch.checks["a"] = JobCheck(JobResult(conf_job, report=later), 2_000, 0.1, 2_000)
        assert b"".join(collector.job_pieces()) == _job_reference(watch)
