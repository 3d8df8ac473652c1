"""``fleet validate`` against the real broker and the S3 API server: 38 jobs (30 checkpoints on local
disk, 3 on S3, 2 malformed or missing, 1 on storage and 2 on a cluster that do not answer), checked
concurrently; each job gets its own verdict, and the others are not sunk by the bad ones."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import example_rig, invoke, write

from recovery.conf import load_conf
from recovery.core.model import COULD_NOT_READ
from recovery.errors import ExitCode
from recovery.fleet import check_job, check_jobs, validate_fleet
from recovery.local import topics
from recovery.local.broker import free_port

SECRET = "fleet-Secret-value-never-shown"
LOG_START = 12  # DeleteRecords moves partitions 0 and 1 of the loss topic here (partition 2 keeps 0)
ROW_KEYS = [
    "job",
    "cluster",
    "checkpoint",
    "verdict",
    "partitions",
    "records_lost",
    "silently_skipped",
    "spark_version",
    "spark_error",
    "on_restart",
    "runway_s",
    "runway",
    "needs_action",
    "exit_code",
    "detail",
]


@dataclass(frozen=True)
class Fleet:
    directory: Path
    env: dict[str, str]
    expected: dict[str, tuple[str, int | None, str | None, int]]  # job -> verdict, lost, spark error, exit


@pytest.fixture(scope="module")
def fleet(bootstrap: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    import s3fs

    rig = example_rig()
    root = tmp_path_factory.mktemp("fleet")
    suffix = uuid.uuid4().hex[:8]
    healthy, loss = f"fleet-healthy-{suffix}", f"fleet-loss-{suffix}"
    for topic in (healthy, loss):
        topics.create_topic(bootstrap, topic, 3)
        topics.produce(bootstrap, topic, topics.keyed_records(60, partitions=3))  # 20 per partition
    topics.delete_records(bootstrap, loss, {0: LOG_START, 1: LOG_START})

    expected: dict[str, tuple[str, int | None, str | None, int]] = {}
    local: list[str] = []

    def local_job(name: str, topic: str, offset: int) -> None:
        rig.write_local(root / "chk" / name, rig.checkpoint_files(topic, [[0] * 3, [offset] * 3]))
        local.append(f'[job.{name}]\ncluster = "local"\ncheckpoint = "chk/{name}"\n')

    for k in range(22):  # healthy: anywhere from the log start to the high watermark
        local_job(f"h{k:02d}", healthy, k % 21)
        expected[f"h{k:02d}"] = ("OK", 0, None, 0)
    for i in range(2, 8):  # below the log start in partitions 0 and 1
        local_job(f"l{i:02d}", loss, i)
        expected[f"l{i:02d}"] = ("BELOW_LOG_START", 2 * (LOG_START - i), COULD_NOT_READ, 1)
    for offset in (LOG_START, 15):
        local_job(f"l-ok-{offset}", loss, offset)
        expected[f"l-ok-{offset}"] = ("OK", 0, None, 0)
    assert len(local) == 30

    (root / "chk/bad").mkdir(parents=True)
    (root / "chk/bad/metadata").write_text("not json")
    local.append('[job.bad-checkpoint]\ncluster = "local"\ncheckpoint = "chk/bad"\n')
    local.append('[job.missing-checkpoint]\ncluster = "local"\ncheckpoint = "chk/never-started"\n')
    expected["bad-checkpoint"] = ("BAD_CHECKPOINT", None, None, 2)
    expected["missing-checkpoint"] = ("BAD_CHECKPOINT", None, None, 2)

    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    bucket = f"fleet-{suffix}"
    fs.mkdir(bucket)
    remote = []
    for name, topic, offset in (("s3-h0", healthy, 20), ("s3-h1", healthy, 10), ("s3-loss", loss, 4)):
        rig.write_s3(fs, f"s3://{bucket}/{name}", rig.checkpoint_files(topic, [[offset] * 3], crc=False))
        remote.append(
            f'[job.{name}]\ncluster = "local"\ncheckpoint = "s3://{bucket}/{name}"\n'
            f'[job.{name}.storage_options]\nendpoint_url = "{s3_endpoint}"\n'
            f'[job.{name}.storage_options_env]\nkey = "AWS_ACCESS_KEY_ID"\nsecret = "AWS_SECRET_ACCESS_KEY"\n'
        )
    expected |= {
        "s3-h0": ("OK", 0, None, 0),
        "s3-h1": ("OK", 0, None, 0),
        "s3-loss": ("BELOW_LOG_START", 2 * (LOG_START - 4), COULD_NOT_READ, 1),
    }

    remote.append(  # storage that does not answer
        '[job.s3-dead]\ncluster = "local"\ncheckpoint = "s3://nowhere/chk"\n'
        f'[job.s3-dead.storage_options]\nendpoint_url = "http://127.0.0.1:{free_port()}"\n'
        "config_kwargs = { retries = { max_attempts = 1 }, connect_timeout = 1 }\n"
    )
    expected["s3-dead"] = ("UNREACHABLE", None, None, 3)

    for name in ("dr-0", "dr-1"):
        rig.write_local(root / "chk" / name, rig.checkpoint_files(healthy, [[5] * 3]))
        remote.append(f'[job.{name}]\ncluster = "dr"\ncheckpoint = "chk/{name}"\n')
        expected[name] = ("UNREACHABLE", None, None, 3)

    directory = root / "conf"
    directory.mkdir()
    write(
        directory,
        "clusters.toml",
        f"""\
        [cluster.local]
        bootstrap_servers_env = "FLEET_TEST_BOOTSTRAP"
        timeout = "20s"

        [cluster.dr]
        bootstrap_servers = "127.0.0.1:{free_port()}"
        timeout = "2s"
        [cluster.dr.properties]
        "security.protocol" = "SASL_PLAINTEXT"
        "sasl.mechanism" = "PLAIN"
        "sasl.username" = "svc"
        [cluster.dr.properties_env]
        "sasl.password" = "FLEET_TEST_PASSWORD"
        """,
    )
    (directory / "local.toml").write_text("\n".join(local).replace('"chk/', '"../chk/'))
    (directory / "remote.toml").write_text("\n".join(remote).replace('"chk/', '"../chk/'))
    env = {"FLEET_TEST_BOOTSTRAP": bootstrap, "FLEET_TEST_PASSWORD": SECRET}
    yield Fleet(directory, env, expected)
    fs.rm(bucket, recursive=True)


def rows_of(output: str) -> dict[str, dict[str, Any]]:
    return {row["job"]: row for row in json.loads(output)}


def test_every_job_gets_its_own_verdict(fleet: Fleet) -> None:
    result = invoke("fleet", "validate", str(fleet.directory), "--output", "json", env=fleet.env)
    assert result.exit_code == 1, result.output  # jobs need action: that comes first
    rows = rows_of(result.stdout)
    assert len(rows) == 38 and all(list(row) == ROW_KEYS for row in rows.values())
    assert list(rows) == sorted(rows)
    got = {
        job: (r["verdict"], r["records_lost"], r["spark_error"], r["exit_code"]) for job, r in rows.items()
    }
    assert got == fleet.expected
    assert rows["dr-0"]["detail"].startswith(
        "cluster dr: describing the cluster: no answer from the Kafka cluster at"
    )
    assert re.match(  # the failing request's path may follow the checkpoint's
        r"s3://nowhere/chk(/\S*)?: EndpointConnectionError: Could not connect", rows["s3-dead"]["detail"]
    )
    assert rows["missing-checkpoint"]["detail"].endswith(
        "chk/never-started: does not exist; no checkpoint here"
    )
    assert re.fullmatch(
        r"fleet-loss-\w+ \[0\]: records \[2, 12\) were deleted before the job read them "
        r"\(and 1 more partition\)",
        rows["l02"]["detail"],
    )
    assert rows["h05"]["partitions"] == 3 and rows["h05"]["on_restart"] == "runs"
    assert result.stderr == (
        "% 38 jobs: 26 healthy, 7 need action, 2 with invalid input, 3 not checked (unreachable)\n"
    )
    assert SECRET not in result.output


def test_the_table(fleet: Fleet) -> None:
    jobs = ["h03", "l02", "s3-loss", "dr-1", "bad-checkpoint"]
    args = [arg for job in jobs for arg in ("--job", job)]
    result = invoke("fleet", "validate", str(fleet.directory), *args, "--parallel", "2", env=fleet.env)
    assert result.exit_code == 1, result.output
    # RUNWAY: the records were written just now into topics of the default retention.ms (7 days)
    runway = "6d2[23]h"
    expected = [
        re.escape("JOB             CLUSTER  VERDICT          LOST  SKIPPED  ")
        + f"{'SPARK-ON-RESTART':{len(COULD_NOT_READ)}}  RUNWAY",
        "bad-checkpoint  local    BAD_CHECKPOINT",
        "dr-1            dr       UNREACHABLE",
        f"h03             local    OK                  0        0  {'runs':{len(COULD_NOT_READ)}}  {runway}",
        f"l02             local    BELOW_LOG_START    20       20  {COULD_NOT_READ}  {runway}",
        f"s3-loss         local    BELOW_LOG_START    16       16  {COULD_NOT_READ}  {runway}",
    ]
    lines = result.stdout.splitlines()
    assert len(lines) == len(expected) and all(
        re.fullmatch(pattern, line) for pattern, line in zip(expected, lines, strict=True)
    ), lines
    notes = result.stderr.splitlines()
    assert all(line.startswith("% ") for line in notes)  # no progress bar off a terminal
    bad = fleet.directory.parent / "chk/bad/metadata"
    assert notes[0] == f"% bad-checkpoint: {bad}: the file is not JSON (column 1: Expecting value)"
    assert notes[1].startswith(
        "% dr-1: cluster dr: describing the cluster: no answer from the Kafka cluster at 127.0.0.1:"
    )
    assert notes[2].startswith("% l02: fleet-loss-") and notes[2].endswith("(and 1 more partition)")
    assert (
        notes[-1] == "% 5 jobs: 1 healthy, 2 need action, 1 with invalid input, 1 not checked (unreachable)"
    )
    assert SECRET not in result.output


def test_a_runway_below_the_threshold_is_at_risk(fleet: Fleet) -> None:
    # 7 days of retention for records written now: below an 8-day threshold, above a 6-hour one
    args = ["fleet", "validate", str(fleet.directory), "--job", "h03", "--output", "json"]
    at_risk = invoke(*args, "--runway-warn", "8d", env=fleet.env)
    healthy = invoke(*args, "--runway-warn", "PT6H", env=fleet.env)

    assert at_risk.exit_code == 1, at_risk.output
    (row,) = json.loads(at_risk.stdout)
    assert (row["verdict"], row["needs_action"], row["on_restart"]) == ("AT_RISK", True, "runs")
    assert 6 * 86400 < row["runway_s"] <= 7 * 86400
    assert "retention may delete unread records in 6d2" in row["detail"]
    assert healthy.exit_code == 0, healthy.output
    assert json.loads(healthy.stdout)[0]["verdict"] == "OK"


@pytest.mark.parametrize(
    ("jobs", "code"),
    [
        (["h00", "s3-h0"], ExitCode.OK),
        (["h00", "dr-0"], ExitCode.UNREACHABLE),
        (["h00", "dr-0", "bad-checkpoint"], ExitCode.INVALID_INPUT),
        (["dr-0", "bad-checkpoint", "s3-loss"], ExitCode.ACTION_NEEDED),
    ],
    ids=["healthy", "unreachable", "invalid-beats-unreachable", "action-beats-all"],
)
def test_exit_code_is_the_most_urgent_jobs(fleet: Fleet, jobs: list[str], code: ExitCode) -> None:
    args = [arg for job in jobs for arg in ("--job", job)]
    result = invoke("fleet", "validate", str(fleet.directory), *args, "--output", "csv", env=fleet.env)
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ",".join(ROW_KEYS) and len(lines) == 1 + len(jobs)


def test_an_unreachable_cluster_is_asked_once(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for key, value in fleet.env.items():
        monkeypatch.setenv(key, value)
    with caplog.at_level(logging.DEBUG, logger="recovery"):
        report = validate_fleet(load_conf(fleet.directory), parallel=4)
    assert report.exit_code is ExitCode.ACTION_NEEDED
    assert sum(r.message.startswith("cluster dr:") for r in caplog.records) == 1
    assert {j.name for j in report.jobs if j.verdict == "UNREACHABLE"} == {"dr-0", "dr-1", "s3-dead"}
    assert SECRET not in caplog.text


def test_jobs_checked_together_round_after_round_get_what_each_gets_alone(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fleet serve checks a cluster's due jobs together (one read of the cluster for all of them),
    # and keeps what it read between rounds (checkpoints, record stamps, topic descriptions, time
    # lookups' answers), giving a judging again while what it was made of is the same: each round,
    # each job's report must be the one its own validation gives, a bad checkpoint its job's alone.
    from recovery.kafka.cluster import ClusterMemory
    from recovery.kafka.runway_facts import StampCache
    from recovery.validate import CheckpointCache

    for key, value in fleet.env.items():
        monkeypatch.setenv(key, value)
    conf = load_conf(fleet.directory)
    cluster = conf.clusters["local"]
    jobs = [job for job in conf.jobs.values() if job.cluster == "local"]
    assert len(jobs) == 36
    together = check_jobs(jobs, cluster, parallel=4)
    kept = StampCache(), CheckpointCache(recent_s=0.0), ClusterMemory()
    rounds = [check_jobs(jobs, cluster, None, kept[0], 4, kept[1], cluster_memory=kept[2]) for _ in range(3)]
    alone = [check_job(job, cluster) for job in jobs]
    for results in (together, *rounds):
        for one, other in zip(results, alone, strict=True):
            verdict, lost, _, code = fleet.expected[one.name]
            assert (one.verdict, one.records_lost, one.exit_code) == (verdict, lost, code)
            if one.report is None or other.report is None:
                assert one.failure == other.failure and one.report is other.report is None
                continue
            a, b = one.report, other.report
            assert (a.findings, a.issues, a.topic_ids) == (b.findings, b.issues, b.topic_ids), one.name
            assert set(a.topic_ids) == {f.tp.topic for f in a.findings}  # its own topics only
    assert sum(one.report is not None and one.report.runway_at_ms is not None for one in together) == 33
    given_again = [
        third.name
        for second, third in zip(rounds[1], rounds[2], strict=True)
        if second.report is not None
        and third.report is not None
        and third.report.findings is second.report.findings
    ]
    assert len(given_again) > len(jobs) // 2  # the judgings of stopped queries are given again


def test_the_examples_on_the_rig(bootstrap: str, s3_endpoint: str) -> None:
    """``fleet validate conf/examples``, set up by the examples' own rig script."""
    rig = example_rig()
    rig.prepare(bootstrap, s3_endpoint, suffix=f"-{uuid.uuid4().hex[:8]}")
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, **rig.s3_environment(s3_endpoint)}
    examples = str(Path(__file__).resolve().parents[2] / "conf/examples")
    result = invoke("fleet", "validate", examples, "--output", "json", env=env)
    assert result.exit_code == 1, result.output
    got = {row["job"]: (row["verdict"], row["records_lost"]) for row in json.loads(result.stdout)}
    assert got == {
        "clicks-sessionize": ("OK", 0),
        "inventory-replica": ("UNREACHABLE", None),
        "orders-to-delta": ("OK", 0),
        "payments-audit": ("BELOW_LOG_START", 20),
    }


def test_a_job_names_its_delta_tables_and_fleet_validate_judges_them_with_their_runway(
    bootstrap: str, new_topic: Any, tmp_path: Path
) -> None:
    """A checkpoint reading a Kafka topic and a Delta table: without ``delta_tables`` its Delta
    source is reported unchecked (exit 1); with them it is judged, runway included."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    topic = new_topic(1)
    topics.produce(bootstrap, topic, topics.keyed_records(5, partitions=1))
    table = tmp_path / "orders"
    for i in range(3):
        write_deltalake(str(table), pa.table({"id": [i]}), mode="append")
    delta = {
        "sourceVersion": 1,
        "reservoirId": str(DeltaTable(str(table)).metadata().id),
        "reservoirVersion": 3,
        "index": -1,
        "isStartingVersion": False,
    }
    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    (chk / "commits").mkdir()
    (chk / "metadata").write_text('{"id":"5e1a0b3c-8d6f-4c1e-9a57-3f2d7c9b8e04"}')
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 4_102_444_800_000, "conf": {}})
    (chk / "offsets" / "0").write_text(f"v1\n{meta}\n{json.dumps({topic: {'0': 5}})}\n{json.dumps(delta)}")
    (chk / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    conf = tmp_path / "conf"
    conf.mkdir()
    job = (
        f'[cluster.main]\nbootstrap_servers = "{bootstrap}"\n'
        f'[job.mixed]\ncluster = "main"\ncheckpoint = "{chk}"\n'
    )

    write(conf, "jobs.toml", job)
    unnamed = validate_fleet(load_conf(conf))
    write(conf, "jobs.toml", job + f'delta_tables = {{ "1" = "{table}" }}\n')
    named = validate_fleet(load_conf(conf))

    (result,) = unnamed.jobs
    assert result.exit_code == 1 and result.report is not None
    assert any("Delta source 1 not checked" in i.message for i in result.report.issues)
    (result,) = named.jobs
    assert result.exit_code == 0 and result.report is not None, result.report
    (judged,) = [i.message for i in result.report.issues if i.message.startswith("Delta source 1")]
    # a first batch rebuilds the snapshot before its offset: log cleanup may take it in 30 days
    assert judged.startswith(f"Delta source 1 ({table}): OK; runway 29d23h (delta.logRetentionDuration=30d")
