"""``fleet serve`` on the real broker: the service started as operators start it, scraped over HTTP
and read through its API while a job's records are deleted under it; a cluster that does not answer
never holds the others up; SIGHUP reloads (a broken file keeps the last good conf); SIGTERM stops it;
the shipped alert rules and dashboard use only metrics and labels the service really exposes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet_helpers import example_rig
from prometheus_client.parser import text_string_to_metric_families

from recovery.hold import read_holds
from recovery.kafka.config import KafkaConfig
from recovery.kafka.topic_config import topic_values
from recovery.local import topics

REPO = Path(__file__).resolve().parents[2]
INTERVAL_S = 1.0
SERVING = re.compile(r"serving on http://([0-9.]+):([0-9]+)")


def get(base: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(base + path, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def until(what: str, probe: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    """``probe()`` once it is truthy; fails saying ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s:g}s: {what}")


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


@contextmanager
def started(conf: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``fleet serve conf`` as operators start it, on a free port: its base URL and process."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "recovery",
            "fleet",
            "serve",
            str(conf),
            "--metrics-port",
            "0",
            "--interval",
            f"{INTERVAL_S:g}s",
            *extra,
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    try:
        lines = [process.stderr.readline()]
        while not (found := SERVING.search(lines[-1])) and lines[-1] and len(lines) < 50:
            lines.append(process.stderr.readline())
        assert found, f"no address said at start: {lines!r}"
        yield f"http://{found.group(1)}:{found.group(2)}", process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@pytest.fixture
def service(bootstrap: str, new_topic: Callable[..., str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    rig = example_rig()
    topic = new_topic(2)
    topics.produce(bootstrap, topic, topics.keyed_records(40, partitions=2))
    chk = tmp_path / "chk"
    rig.write_local(chk, rig.checkpoint_files(topic, [[10, 10]]))
    conf = tmp_path / "conf"
    conf.mkdir()
    clusters = (
        f'[cluster.rig]\nbootstrap_servers = "{bootstrap}"\n\n'
        '[cluster.dead]\nbootstrap_servers = "127.0.0.1:1"\ntimeout = "2s"\n'
    )
    jobs = (
        f'[job.orders]\ncluster = "rig"\ncheckpoint = "{chk}"\nrunway_warn = "1h"\n\n'
        f'[job.elsewhere]\ncluster = "dead"\ncheckpoint = "{chk}"\n'
    )
    (conf / "clusters.toml").write_text(clusters)
    (conf / "jobs.toml").write_text(jobs)
    with started(conf) as (base, process):
        yield {"base": base, "process": process, "topic": topic, "conf": conf, "jobs": jobs, "chk": chk}


def test_the_service_shows_a_loss_within_an_interval_and_the_dead_cluster_holds_nothing_up(
    service: dict[str, Any], bootstrap: str
) -> None:
    base = service["base"]

    def jobs() -> dict[str, Any]:
        status, body = get(base, "/v1/jobs")
        assert status == 200
        return {row["job"]: row for row in json.loads(body)}

    first = until("both jobs checked", lambda: (j := jobs()) and len(j) == 2 and j)
    assert first["orders"]["verdict"] == "OK" and first["orders"]["exit_code"] == 0
    assert first["elsewhere"]["verdict"] == "UNREACHABLE" and "cluster dead" in first["elsewhere"]["detail"]
    assert {"checked_at", "checked_at_ms", "runway_s", "on_restart"} <= set(first["orders"])
    # orders keeps being checked every interval while the dead cluster times out
    seen = first["orders"]["checked_at_ms"]
    until("orders checked again", lambda: jobs()["orders"]["checked_at_ms"] > seen, 10 * INTERVAL_S)

    topics.delete_records(bootstrap, service["topic"], {0: 15})  # 5 records the job had not read
    deleted = time.monotonic()
    lost = until("the loss is seen", lambda: (r := jobs()["orders"])["verdict"] == "BELOW_LOG_START" and r)
    assert time.monotonic() - deleted < 3 * INTERVAL_S + 5  # within an interval, a check and a scrape
    assert lost["records_lost"] == 5 and lost["needs_action"] is True

    status, one = get(base, "/v1/jobs/orders")
    assert status == 200 and json.loads(one)["verdict"] == "BELOW_LOG_START"
    assert get(base, "/v1/jobs/nope")[0] == 404
    status, text = get(base, "/metrics")
    assert status == 200
    found = samples(text)
    job = {"streaming_job": "orders"}

    def value(name: str, **labels: str) -> float | None:
        wanted = {**job, **labels}
        return next((v for n, ls, v in found if n == name and wanted.items() <= ls.items()), None)

    assert value("stream_recovery_job_verdict", stream_recovery_job_verdict="BELOW_LOG_START") == 1.0
    assert value("stream_recovery_job_verdict", stream_recovery_job_verdict="OK") == 0.0
    assert value("stream_recovery_job_records_lost") == 5.0
    assert value("stream_recovery_job_needs_action") == 1.0
    assert value("stream_recovery_job_runway_warn_seconds") == 3600.0
    assert value("stream_recovery_partition_records_lost", partition="0") == 5.0
    assert value("stream_recovery_partition_records_lost", partition="1") is None  # none lost: absent
    assert value("stream_recovery_partition_verdict", partition="0", verdict="BELOW_LOG_START") == 1.0
    assert value("stream_recovery_partition_verdict", partition="1", verdict="OK") == 1.0
    assert len([n for n, ls, _ in found if n == "stream_recovery_partition_verdict"]) == 2  # one a partition
    assert value("stream_recovery_job_check_interval_seconds") == INTERVAL_S
    condition = "KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"
    assert value("stream_recovery_partition_spark_error", partition="0", condition=condition) == 1.0
    assert value("stream_recovery_partition_lag_records", partition="1") == 10.0
    assert (value("stream_recovery_partition_runway_seconds", partition="1") or 0) > 6 * 86_400
    assert (
        value("stream_recovery_job_check_errors_total", kind="unreachable", streaming_job="elsewhere") or 0
    ) >= 1
    assert ("stream_recovery_check_interval_seconds", {}, INTERVAL_S) in found


def test_sighup_reloads_and_a_broken_file_keeps_the_last_good_conf_and_sigterm_stops(
    service: dict[str, Any],
) -> None:
    base, process, conf = service["base"], service["process"], service["conf"]

    def names() -> set[str]:
        return {row["job"] for row in json.loads(get(base, "/v1/jobs")[1])}

    until("both jobs checked", lambda: names() == {"orders", "elsewhere"})
    (conf / "jobs.toml").write_text("[job.orders\ncluster = ")  # broken
    process.send_signal(signal.SIGHUP)
    health = until(
        "the reload error said",
        lambda: (h := json.loads(get(base, "/healthz")[1]))["config_reload_error"] and h,
    )
    assert "jobs.toml" in health["config_reload_error"] and health["jobs"] == 2
    assert ("stream_recovery_config_last_reload_success", {}, 0.0) in samples(get(base, "/metrics")[1])
    assert names() == {"orders", "elsewhere"}  # still served, still checked

    again = service["jobs"] + f'\n[job.copy]\ncluster = "rig"\ncheckpoint = "{service["chk"]}"\n'
    (conf / "jobs.toml").write_text(
        again.replace("[job.elsewhere]", "[job.gone]").replace('cluster = "dead"', 'cluster = "rig"')
    )
    process.send_signal(signal.SIGHUP)
    until("the new conf in use", lambda: names() == {"orders", "gone", "copy"})
    assert json.loads(get(base, "/healthz")[1])["config_reload_error"] is None
    assert ("stream_recovery_config_reloads_total", {"result": "success"}, 1.0) in samples(
        get(base, "/metrics")[1]
    )

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_the_alert_rules_and_the_dashboard_use_only_what_the_service_exposes(
    service: dict[str, Any], bootstrap: str
) -> None:
    """With a job losing records (so that every series there can be is there)."""
    base = service["base"]
    topics.delete_records(bootstrap, service["topic"], {0: 15})
    until(
        "the loss seen, and the dead cluster's job failed",
        lambda: (
            {r["verdict"] for r in json.loads(get(base, "/v1/jobs")[1])} == {"BELOW_LOG_START", "UNREACHABLE"}
        ),
    )
    exposed = samples(get(base, "/metrics")[1])
    names = {n for n, _, _ in exposed}
    labels = {label for _, ls, _ in exposed for label in ls}

    rules = yaml.safe_load((REPO / "deploy/prometheus/stream-recovery-rules.yml").read_text())
    dashboard = json.loads((REPO / "deploy/grafana/stream-recovery-dashboard.json").read_text())
    texts = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    texts += [json.dumps(r.get("annotations", {})) for g in rules["groups"] for r in g["rules"]]
    texts += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    texts += [t.get("legendFormat", "") for p in dashboard["panels"] for t in p["targets"]]
    used = {m for text in texts for m in re.findall(r"\bstream_recovery_[a-z_]+", text)}
    used_labels = {m for text in texts for m in re.findall(r"\$labels\.([a-z_]+)|\{\{([a-z_]+)\}\}", text)}
    used_labels |= {m for text in texts for m in re.findall(r"by \(([a-z_]+)\)", text)}

    assert used and not used - names, f"not exposed: {sorted(used - names)}"
    flat = {
        label for pair in used_labels for label in (pair if isinstance(pair, tuple) else (pair,)) if label
    }
    assert flat and not flat - labels, f"labels not exposed: {sorted(flat - labels)}"
    assert len(rules["groups"][0]["rules"]) >= 5


def test_with_apply_holds_a_job_that_opted_in_is_held_under_its_runway_and_released_once_caught_up(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    rig = example_rig()
    topic = new_topic(1, {"retention.ms": "60000"})
    topics.produce(bootstrap, topic, topics.keyed_records(10, partitions=1))
    chk = tmp_path / "chk"
    rig.write_local(chk, rig.checkpoint_files(topic, [[0]]))  # stopped, nothing read: runway < 60 s
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[cluster.rig]\nbootstrap_servers = "{bootstrap}"\n'
        f'[job.orders]\ncluster = "rig"\ncheckpoint = "{chk}"\nhold = "5m"\n'
    )
    kafka = KafkaConfig(bootstrap)

    def retention() -> str | None:
        answer = topic_values(kafka, [topic], ["retention.ms"])[topic]
        assert not isinstance(answer, str)
        return answer["retention.ms"].value

    with started(conf, "--apply-holds") as (base, process):
        job = until("held", lambda: (r := json.loads(get(base, "/v1/jobs/orders")[1])).get("hold") and r)
        assert job["hold"] == f"raised: {topic}"
        assert int(retention() or 0) >= 5 * 60_000  # keeps what it has not read 5 minutes more
        assert read_holds(str(chk))[topic].values["retention.ms"].original == "60000"
        # the job catches up (its next batch read everything): the service puts the value back
        rig.write_local(chk, rig.checkpoint_files(topic, [[0], [10]]) | _recovery(chk))
        until(
            "released",
            lambda: json.loads(get(base, "/v1/jobs/orders")[1]).get("hold") == f"released: {topic}",
        )
        assert retention() == "60000" and read_holds(str(chk)) == {}
        found = samples(get(base, "/metrics")[1])
        for action in ("raised", "released"):
            labels = {"streaming_job": "orders", "action": action}
            assert ("stream_recovery_job_hold_actions_total", labels, 1.0) in found
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def _recovery(chk: Path) -> dict[str, bytes]:
    """The checkpoint's ``_recovery/`` files (the hold's record), kept across a rewrite."""
    return {str(p.relative_to(chk)): p.read_bytes() for p in (chk / "_recovery").rglob("*") if p.is_file()}
