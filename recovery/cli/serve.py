"""``stream-recovery fleet serve DIR``: every job of DIR checked all the time (recovery.watch), shown
as Prometheus metrics and a JSON API on one HTTP port.

    GET /metrics          Prometheus text format (metric names below)
    GET /v1/jobs          the rows of ``fleet validate --output json``, each with checked_at(_ms)
                          and hold (what the last check's retention hold did, with --apply-holds)
    GET /v1/jobs/<name>   one of them (404: no such job, or not checked yet)
    GET /healthz          {"status": "ok", "jobs": N, "checked": M, "config_reload_error": ...}

Metrics (the series of a job that leaves the conf leave with it; per-partition series can be
switched off per job with ``partition_metrics = false``). A partition's verdict is one series
labelled with it, not a state set: a state set would be 10 series a partition, a million at
100,000 partitions. The job's label is ``streaming_job``:
``job`` is the label Prometheus gives every scraped series itself.

    stream_recovery_job_verdict{streaming_job,stream_recovery_job_verdict}   state set: the verdict
    stream_recovery_job_needs_action{streaming_job}                1 when the job needs action
    stream_recovery_job_records_lost{streaming_job}                records lost (partitions summed)
    stream_recovery_job_runway_seconds{streaming_job}              shortest runway (absent: no limit)
    stream_recovery_job_runway_warn_seconds{streaming_job}         its AT_RISK threshold (absent: none)
    stream_recovery_job_last_success_timestamp_seconds{streaming_job}  end of the last check with a report
    stream_recovery_job_last_check_timestamp_seconds{streaming_job}    end of the last check
    stream_recovery_job_check_duration_seconds{streaming_job}      how long the last check took
    stream_recovery_job_check_interval_seconds{streaming_job}      how often it is checked
    stream_recovery_job_check_errors_total{streaming_job,kind}     failed checks, by kind
    stream_recovery_job_hold_actions_total{streaming_job,action}   holds raised | released | refused | failed
    stream_recovery_partition_verdict{streaming_job,topic,partition,verdict}  1 (one series a partition)
    stream_recovery_partition_records_lost{streaming_job,topic,partition}  (absent: none lost)
    stream_recovery_partition_spark_error{streaming_job,topic,partition,condition}  1: Spark fails so
    stream_recovery_partition_runway_seconds{streaming_job,topic,partition}
    stream_recovery_partition_oldest_unread_age_seconds{streaming_job,topic,partition}  lag in time
    stream_recovery_partition_lag_records{streaming_job,topic,partition}
    stream_recovery_check_interval_seconds                         the service's interval
    stream_recovery_config_reloads_total{result}                   SIGHUP reloads: success | failure
    stream_recovery_config_last_reload_success                     0 while the last reload failed
"""

from __future__ import annotations

import gc
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, NamedTuple

from recovery.cli.report.fleet import job_row
from recovery.core.model import Verdict
from recovery.core.runway import shortest
from recovery.core.specs import iso_utc
from recovery.fleet import JobResult, JobVerdict

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from recovery.core.model import Finding
    from recovery.core.results import ValidationReport
    from recovery.watch import FleetWatch, JobCheck

log = logging.getLogger(__name__)

__all__ = ["serve"]

# The CLI runs with the cyclic collector off (recovery.cli.main: its commands are short-lived); a
# service runs for months, and a cycle left by each round would never be freed. Python's own
# schedule makes a full pass over every object kept (millions, at 100,000 partitions) about once a
# round; one pass this often frees the same cycles for a fraction of that.
_COLLECT_EVERY_S = 600.0

_JOB_VERDICTS = (*(v.value for v in Verdict), *(v.value for v in JobVerdict))
_STATES = sorted(_JOB_VERDICTS)  # a state set's samples, in the order prometheus_client writes them


class _Summary(NamedTuple):
    """What the per-job series show of a check (scans of its report's partitions)."""

    verdict: str
    needs_action: bool
    runway_s: float | None  # the shortest runway
    records_lost: int | None
    soonest: Finding | None  # the partition with the least runway left

    @classmethod
    def of(cls, result: JobResult) -> _Summary:
        """The summary of ``result``, its report's partitions scanned."""
        report = result.report
        at_ms = report.runway_at_ms if report is not None else None
        found = shortest(report.findings, at_ms) if report is not None and at_ms is not None else None
        return cls(
            result.verdict,
            result.needs_action,
            found[1] / 1000 if found is not None else None,
            result.records_lost,
            found[0] if found is not None else None,
        )

    def again(self, before: JobResult, result: JobResult) -> _Summary | None:
        """This summary (of ``before``) for ``result`` without a scan, when ``result`` is the same
        judging given again (the very same findings, and the same report-wide facts that
        ``JobResult.verdict`` and ``ValidationReport.needs_action`` read besides): the same verdict
        and losses, and every runway counts down alike, so the same partition has the least left;
        None when it is not."""
        was, now = before.report, result.report
        if (
            was is None
            or now is None
            or before.failure is not None
            or result.failure is not None
            or was.findings is not now.findings
            or (was.runway_at_ms is None) != (now.runway_at_ms is None)
            or (was.issues, was.sink_warning, was.delta_at_risk)
            != (now.issues, now.sink_warning, now.delta_at_risk)
        ):
            return None
        runway, at_ms = self.soonest.runway if self.soonest is not None else None, now.runway_at_ms
        left = runway.left_ms(at_ms) if runway is not None and at_ms is not None else None
        return self._replace(runway_s=left / 1000 if left is not None else None)


class _Collector:
    """Metrics made from the watch's latest checks at each scrape (nothing kept between scrapes, so
    a job gone from the conf leaves no stale series)."""

    def __init__(self, watch: FleetWatch) -> None:
        from prometheus_client import generate_latest

        self.watch = watch
        # job -> (check, its summary): scans of every partition, once a check instead of each scrape
        self._summaries: dict[str, tuple[JobCheck, _Summary]] = {}
        self._headers = [  # HELP and TYPE of each per-job family, as generate_latest writes them
            generate_latest(_Families([family])) for family in _job_families()
        ]

    def _summary(self, name: str, check: JobCheck) -> _Summary:
        kept = self._summaries.get(name)
        if kept is not None and kept[0] is check:
            return kept[1]
        # a stopped job's judging mostly holds from check to check (validate._Judged): scans of its
        # 100 partitions at each check were a twentieth of the service's CPU at 1,000 jobs
        summary = kept[1].again(kept[0].result, check.result) if kept is not None else None
        if summary is None:
            summary = _Summary.of(check.result)
        self._summaries[name] = (check, summary)
        return summary

    def job_pieces(self) -> list[bytes]:
        """The per-job families (:func:`_job_families`), each its HELP and TYPE then one sample a job
        (the state set: one a verdict), written as prometheus_client's ``generate_latest`` writes
        them, without its per-sample objects: at 1,000 jobs they were ~20,000 samples a scrape and
        half a second of CPU; tests/fleet/test_serve_text.py checks the two give the same bytes."""
        from prometheus_client.utils import floatToGoString

        number: Callable[[float], str] = floatToGoString  # untyped in prometheus_client
        checks = self.watch.snapshot()
        conf = self.watch.conf
        for gone in [name for name in list(self._summaries) if name not in checks]:  # scrapes run at once
            self._summaries.pop(gone, None)
        lines: list[list[str]] = [[] for _ in self._headers]
        verdict, needs, lost, runway, warn, success, last, duration, every = lines
        for name, check in sorted(checks.items()):
            job = f'streaming_job="{_escaped(name)}"'
            result = check.result
            summary = self._summary(name, check)
            said = summary.verdict
            verdict.extend(
                f'stream_recovery_job_verdict{{stream_recovery_job_verdict="{_escaped(v)}",{job}}} '
                f"{'1.0' if v == said else '0.0'}\n"
                for v in _STATES
            )
            needs.append(
                f"stream_recovery_job_needs_action{{{job}}} {'1.0' if summary.needs_action else '0.0'}\n"
            )
            if summary.records_lost is not None:
                lost.append(
                    f"stream_recovery_job_records_lost{{{job}}} {number(float(summary.records_lost))}\n"
                )
            if summary.runway_s is not None:
                runway.append(
                    f"stream_recovery_job_runway_seconds{{{job}}} {number(float(summary.runway_s))}\n"
                )
            threshold = result.report.runway_warn_s if result.report else None
            if threshold is not None:
                warn.append(f"stream_recovery_job_runway_warn_seconds{{{job}}} {number(float(threshold))}\n")
            if check.last_success_ms is not None:
                ended = number(check.last_success_ms / 1000)
                success.append(f"stream_recovery_job_last_success_timestamp_seconds{{{job}}} {ended}\n")
            checked = number(check.checked_at_ms / 1000)
            last.append(f"stream_recovery_job_last_check_timestamp_seconds{{{job}}} {checked}\n")
            duration.append(
                f"stream_recovery_job_check_duration_seconds{{{job}}} {number(check.duration_s)}\n"
            )
            if (job_conf := conf.jobs.get(name)) is not None:
                interval = number(self.watch.interval_of(job_conf))
                every.append(f"stream_recovery_job_check_interval_seconds{{{job}}} {interval}\n")
        return [
            piece
            for header, family in zip(self._headers, lines, strict=True)
            for piece in (header, "".join(family).encode())
        ]

    def collect(self) -> Iterator[Metric]:
        """The families other than the per-job ones (:meth:`job_pieces`)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        errors = CounterMetricFamily(
            "stream_recovery_job_check_errors",
            "Checks that failed, by kind",
            labels=["streaming_job", "kind"],
        )
        for (name, kind), count in sorted(self.watch.check_errors().items()):
            errors.add_metric([name, kind], float(count))
        holds = CounterMetricFamily(
            "stream_recovery_job_hold_actions",
            "Retention holds placed and released by the service (--apply-holds)",
            labels=["streaming_job", "action"],
        )
        for (name, action), count in sorted(self.watch.hold_actions().items()):
            holds.add_metric([name, action], float(count))
        interval = GaugeMetricFamily("stream_recovery_check_interval_seconds", "The check interval")
        interval.add_metric([], self.watch.interval_s)
        reloads = CounterMetricFamily(
            "stream_recovery_config_reloads", "Configuration reloads (SIGHUP)", labels=["result"]
        )
        for result_name, count in sorted(self.watch.reloads.items()):
            reloads.add_metric([result_name], float(count))
        ok = GaugeMetricFamily("stream_recovery_config_last_reload_success", "0 while the last reload failed")
        ok.add_metric([], 0.0 if self.watch.last_reload_error else 1.0)
        yield from (errors, holds, interval, reloads, ok)


def _job_families() -> list[Metric]:
    """The per-job families, empty, in the order :meth:`_Collector.job_pieces` writes them."""
    from prometheus_client.core import GaugeMetricFamily, StateSetMetricFamily

    job = ["streaming_job"]
    return [
        StateSetMetricFamily("stream_recovery_job_verdict", "The job's verdict", labels=job),
        GaugeMetricFamily("stream_recovery_job_needs_action", "1 when the job needs action", labels=job),
        GaugeMetricFamily("stream_recovery_job_records_lost", "Records lost", labels=job),
        GaugeMetricFamily(
            "stream_recovery_job_runway_seconds",
            "Shortest time before retention may delete unread records",
            labels=job,
        ),
        GaugeMetricFamily(
            "stream_recovery_job_runway_warn_seconds", "The job's AT_RISK runway threshold", labels=job
        ),
        GaugeMetricFamily(
            "stream_recovery_job_last_success_timestamp_seconds",
            "End of the last check with a report",
            labels=job,
        ),
        GaugeMetricFamily(
            "stream_recovery_job_last_check_timestamp_seconds", "End of the last check", labels=job
        ),
        GaugeMetricFamily(
            "stream_recovery_job_check_duration_seconds", "How long the last check took", labels=job
        ),
        GaugeMetricFamily(
            "stream_recovery_job_check_interval_seconds", "How often the job is checked", labels=job
        ),
    ]


_PART = ("streaming_job", "topic", "partition")
# name, help, labels: the per-partition series (module docstring), one set per job and check
_PARTITION_FAMILIES = (
    ("stream_recovery_partition_verdict", "1, labelled with the partition's verdict", (*_PART, "verdict")),
    ("stream_recovery_partition_records_lost", "Records lost (absent: none)", _PART),
    (
        "stream_recovery_partition_spark_error",
        "1: Spark fails with this condition on restart",
        (*_PART, "condition"),
    ),
    ("stream_recovery_partition_runway_seconds", "Time before retention may delete unread records", _PART),
    ("stream_recovery_partition_oldest_unread_age_seconds", "Age of the oldest unread record", _PART),
    ("stream_recovery_partition_lag_records", "Records not read yet", _PART),
)


class _Families:
    """A collector of the families given (for prometheus_client's text format)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _escaped(value: str) -> str:
    """A label value as the text format escapes it (as prometheus_client does)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _partition_samples(name: str, report: ValidationReport, made: list[bytes] | None = None) -> list[bytes]:
    """The sample lines of one job's report, one text per family of :data:`_PARTITION_FAMILIES`,
    written as prometheus_client's ``generate_latest`` writes them (labels sorted by name; values
    by its ``floatToGoString``) but without its per-sample objects and checks: 100,000 partitions
    made ~600,000 of them a round, a quarter of the service's CPU. tests/fleet/test_serve_text.py
    checks the two give the same bytes. ``made``: the samples of a report with the very same
    findings (a judging given again): only the runway's and the age's, which count from the
    report's time, are written again."""
    from prometheus_client.utils import floatToGoString

    number: Callable[[float], str] = floatToGoString  # untyped in prometheus_client

    def seconds(ms: int) -> str:
        # floatToGoString returns the repr of any finite value under 10**6 (its own spelling only
        # beyond: exponents, infinities): these are written at each check of each partition
        value = ms / 1000
        return repr(value) if -1e300 < value < 1e6 else number(value)

    job = _escaped(name)
    verdict: list[str] = []
    lost: list[str] = []
    error: list[str] = []
    runway: list[str] = []
    age: list[str] = []
    lag: list[str] = []
    at_ms = report.runway_at_ms
    escaped: dict[str, str] = {}  # a job's partitions share a few topics
    for f in report.findings:
        timed = f.runway is not None and at_ms is not None
        if made is not None and not timed:
            continue
        topic = escaped.get(f.tp.topic)
        if topic is None:
            topic = escaped[f.tp.topic] = _escaped(f.tp.topic)
        labels = f'partition="{f.tp.partition}",streaming_job="{job}",topic="{topic}"'
        if timed:
            assert f.runway is not None and at_ms is not None
            left = f.runway.left_ms(at_ms)
            old = f.runway.age_ms(at_ms)
            if left is not None:
                runway.append(f"stream_recovery_partition_runway_seconds{{{labels}}} {seconds(left)}\n")
            if old is not None:
                age.append(
                    f"stream_recovery_partition_oldest_unread_age_seconds{{{labels}}} {seconds(old)}\n"
                )
        if made is not None:
            continue
        verdict.append(f'stream_recovery_partition_verdict{{{labels},verdict="{f.verdict.value}"}} 1.0\n')
        if f.records_lost:
            lost.append(f"stream_recovery_partition_records_lost{{{labels}}} {number(f.records_lost)}\n")
        if f.spark_error:
            condition = _escaped(f.spark_error)
            error.append(f'stream_recovery_partition_spark_error{{condition="{condition}",{labels}}} 1.0\n')
        if f.position is not None and f.available is not None:
            behind = max(0, f.available.end - f.position)
            lag.append(f"stream_recovery_partition_lag_records{{{labels}}} {number(behind)}\n")
    timed_text = ["".join(runway).encode(), "".join(age).encode()]
    if made is not None:
        return [*made[:3], *timed_text, made[5]]
    return (
        ["".join(lines).encode() for lines in (verdict, lost, error)] + timed_text + ["".join(lag).encode()]
    )


class _PartitionText:
    """The per-partition series in Prometheus' text format, each job's made once per check by the
    worker that checked it (:meth:`update`, the watch's ``on_check``) and kept, so that a scrape only
    joins them: 100,000 partitions make ~400,000 series, which take prometheus_client seconds to
    format; made at each scrape, they would cost more than the checks and outlast Prometheus'
    scrape timeout."""

    def __init__(self, watch: FleetWatch) -> None:
        from prometheus_client import generate_latest
        from prometheus_client.core import GaugeMetricFamily

        self.watch = watch
        self._lock = threading.Lock()
        # job -> the findings of its last report and their samples, by family
        self._kept: dict[str, tuple[tuple[Finding, ...], list[bytes]]] = {}
        self._headers = [  # HELP and TYPE of each family, as generate_latest writes them
            generate_latest(_Families([GaugeMetricFamily(n, h, labels=list(labels))]))
            for n, h, labels in _PARTITION_FAMILIES
        ]

    def update(self, name: str, check: JobCheck) -> None:
        """Keep the series of ``check``, the latest of job ``name`` (none: its check failed, or the
        job's ``partition_metrics`` is off)."""
        report, job = check.result.report, self.watch.conf.jobs.get(name)
        samples = None
        if report is not None and (job is None or job.partition_metrics):
            with self._lock:
                before = self._kept.get(name)
            # a judging given again: its static series stay
            made = before[1] if before is not None and before[0] is report.findings else None
            samples = _partition_samples(name, report, made)
        with self._lock:
            if samples is None or report is None:
                self._kept.pop(name, None)
            else:
                self._kept[name] = (report.findings, samples)

    def pieces(self) -> list[bytes]:
        """Every family once: its HELP and TYPE, then the samples of each job of the conf; in
        pieces, written one after the other (joined, 100,000 partitions made a 50 MB copy, then
        another beside the other metrics, at each scrape)."""
        jobs = self.watch.conf.jobs
        with self._lock:
            for gone in [name for name in self._kept if name not in jobs]:
                del self._kept[gone]
            kept = [self._kept[name][1] for name in sorted(self._kept) if jobs[name].partition_metrics]
        return [piece for i, header in enumerate(self._headers) for piece in (header, *(s[i] for s in kept))]


def _job_body(name: str, check: JobCheck) -> dict[str, Any]:
    return {
        **job_row(check.result),
        "hold": check.hold,
        "checked_at": iso_utc(check.checked_at_ms),
        "checked_at_ms": check.checked_at_ms,
    }


def _handler(
    watch: FleetWatch, collector: _Collector, registry: Any, partitions: _PartitionText
) -> type[BaseHTTPRequestHandler]:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    class Handler(BaseHTTPRequestHandler):
        server_version = "stream-recovery"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            if path == "/metrics":
                pieces = [*collector.job_pieces(), generate_latest(registry), *partitions.pieces()]
                self._send(HTTPStatus.OK, pieces, CONTENT_TYPE_LATEST)
            elif path == "/v1/jobs":
                checks = watch.snapshot()
                self._json(HTTPStatus.OK, [_job_body(n, c) for n, c in sorted(checks.items())])
            elif path.startswith("/v1/jobs/"):
                name = path.removeprefix("/v1/jobs/")
                check = watch.snapshot().get(name)
                if check is None:
                    self._json(HTTPStatus.NOT_FOUND, {"error": f"no job {name!r} checked (yet)"})
                else:
                    self._json(HTTPStatus.OK, _job_body(name, check))
            elif path == "/healthz":
                body = {
                    "status": "ok",
                    "jobs": len(watch.conf.jobs),
                    "checked": len(watch.snapshot()),
                    "config_reload_error": watch.last_reload_error,
                }
                self._json(HTTPStatus.OK, body)
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found: /metrics, /v1/jobs, /healthz"})

        def _json(self, status: HTTPStatus, body: object) -> None:
            self._send(status, [(json.dumps(body, indent=2) + "\n").encode()], "application/json")

        def _send(self, status: HTTPStatus, data: list[bytes], kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(sum(map(len, data))))
            self.end_headers()
            chunk: list[bytes] = []  # written a megabyte at a time: a send per piece was ~6,000 a scrape
            size = 0
            for piece in data:
                chunk.append(piece)
                size += len(piece)
                if size >= 1 << 20:
                    self.wfile.write(b"".join(chunk))
                    chunk, size = [], 0
            self.wfile.write(b"".join(chunk))

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http: " + format, *args)

    return Handler


def serve(watch: FleetWatch, host: str, port: int) -> None:
    """Run ``watch`` and the HTTP server until SIGTERM or SIGINT; SIGHUP reloads the conf. Runs in
    the main thread (signals are delivered there)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    collector = _Collector(watch)
    registry.register(collector)
    partitions = _PartitionText(watch)
    watch.on_check = partitions.update
    server = ThreadingHTTPServer((host, port), _handler(watch, collector, registry, partitions))
    server.daemon_threads = True
    stop, reload = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: reload.set())
    checker = threading.Thread(target=watch.run, args=(stop,), name="watch")
    web = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="http")
    checker.start()
    web.start()
    bound = server.server_address
    log.info("serving on http://%s:%s (/metrics, /v1/jobs, /healthz)", bound[0], bound[1])
    collect_at = time.monotonic() + _COLLECT_EVERY_S
    try:
        while not stop.wait(0.2):
            if reload.is_set():
                reload.clear()
                watch.reload()
            if time.monotonic() >= collect_at:
                collect_at = time.monotonic() + _COLLECT_EVERY_S
                if not gc.isenabled():
                    log.debug("cyclic garbage collected: %d objects", gc.collect())
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        checker.join()
        log.info("stopped")
