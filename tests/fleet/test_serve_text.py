"""The per-partition series of ``fleet serve`` (no broker): each job's made once per check and joined
at each scrape into one valid exposition, every family once and its samples together."""

from __future__ import annotations

import itertools
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from recovery.cli.serve import _PartitionText
from recovery.core.model import COULD_NOT_READ, Finding, Isolation, OffsetRange, TopicPartition, Verdict
from recovery.core.results import ValidationReport
from recovery.fleet import JobResult
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

    body = text.text().decode()
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
    assert {job for _, job, _, _ in _keys(text.text().decode())} == {"b"}


def _keys(body: str) -> set[tuple[str, str, str, str]]:
    return {
        (s.name, s.labels["streaming_job"], s.labels["partition"], "")
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
