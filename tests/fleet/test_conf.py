"""conf/: TOML files of clusters and jobs (pure parsing, no broker): every error is one line naming the
file and the key, and no secret ever leaves the environment it came from."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fleet_helpers import invoke, write

from recovery.conf import load_conf, parse_duration_s
from recovery.core.model import GateMode, Isolation
from recovery.errors import ConfigError

SECRET = "s3cr3t-Pa55-do-not-print"

CLUSTER = """\
[cluster.local]
bootstrap_servers = "127.0.0.1:9092"
"""

JOB = """\
[job.orders]
cluster = "local"
checkpoint = "/chk/orders"
"""


def error_of(directory: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as raised:
        load_conf(directory, environ=environ or {})
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_a_directory_of_files_is_one_conf(conf_dir: Path) -> None:
    write(
        conf_dir,
        "clusters.toml",
        """\
        [cluster.local]
        bootstrap_servers_env = "KAFKA_BOOTSTRAP_SERVERS"
        timeout = "10s"
        [cluster.local.properties]
        "client.id" = "fleet"
        "linger.ms" = 5
        "enable.auto.commit" = false
        [cluster.local.properties_env]
        "sasl.password" = "KAFKA_PASSWORD"
        """,
    )
    write(
        conf_dir,
        "jobs.toml",
        """\
        [job.orders]
        cluster = "local"
        checkpoint = "chk/orders"
        isolation = "read_committed"
        gate = "clamp"
        sink = "s3://lake/orders"
        runway_warn = "1h30m"
        [job.orders.storage_options]
        endpoint_url = "http://127.0.0.1:9000"
        [job.orders.storage_options_env]
        secret = "AWS_SECRET_ACCESS_KEY"
        """,
    )
    write(conf_dir, "notes.txt", "not read")
    environ = {
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:4242",
        "KAFKA_PASSWORD": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    conf = load_conf(conf_dir, environ=environ)

    assert conf.files == (str(conf_dir / "clusters.toml"), str(conf_dir / "jobs.toml"))
    cluster = conf.clusters["local"]
    assert (
        cluster.bootstrap_servers == "127.0.0.1:4242" and cluster.bootstrap_env == "KAFKA_BOOTSTRAP_SERVERS"
    )
    assert cluster.kafka.timeout_s == 10.0
    assert dict(cluster.kafka.properties) == {
        "client.id": "fleet",
        "linger.ms": "5",
        "enable.auto.commit": "false",
        "sasl.password": SECRET,
    }
    assert dict(cluster.shown) == {
        "client.id": "fleet",
        "linger.ms": "5",
        "enable.auto.commit": "false",
        "sasl.password": "$KAFKA_PASSWORD",
    }
    job = conf.jobs["orders"]
    assert job.checkpoint == str(conf_dir / "chk/orders")  # relative to the file that names it
    assert (job.isolation, job.gate, job.sink, job.runway_warn_s) == (
        Isolation.READ_COMMITTED,
        GateMode.CLAMP,
        "s3://lake/orders",
        5400.0,
    )
    assert dict(job.storage_options) == {"endpoint_url": "http://127.0.0.1:9000", "secret": SECRET}
    assert dict(job.storage_shown) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "secret": "$AWS_SECRET_ACCESS_KEY",
    }
    assert SECRET not in repr(conf)


def test_defaults(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB)
    conf = load_conf(conf_dir, environ={})
    job = conf.jobs["orders"]
    assert (job.isolation, job.gate, job.sink, job.runway_warn_s) == (
        Isolation.READ_UNCOMMITTED,
        GateMode.FAIL,
        None,
        None,
    )
    assert conf.clusters["local"].kafka.timeout_s == 30.0


def test_one_file_may_be_given_instead_of_a_directory(conf_dir: Path) -> None:
    path = write(conf_dir, "a.toml", CLUSTER + JOB)
    assert list(load_conf(path, environ={}).jobs) == ["orders"]


BAD = [
    pytest.param(
        JOB.replace('"/chk/orders"', '"/chk/orders"\nisolation = "serializable"'),
        "job.orders.isolation: Input should be 'read_uncommitted' or 'read_committed'",
        id="enum",
    ),
    pytest.param(
        JOB + "checkpont = 'x'\n",
        "job.orders.checkpont: unknown key (expected checkpoint, cluster, delta_tables, gate, hold, "
        "interval, isolation, partition_metrics, real_time, runway_warn, sink, spark_version, "
        "storage_options, storage_options_env)",
        id="typo-in-job",
    ),
    pytest.param(
        JOB.replace('cluster = "local"\n', ""),
        "job.orders.cluster: missing (required)",
        id="missing",
    ),
    pytest.param(
        JOB.replace('"/chk/orders"', "42"),
        "job.orders.checkpoint: Input should be a valid string",
        id="strict-type",
    ),
    pytest.param(
        JOB + 'runway_warn = "6 hours"\n',
        'job.orders.runway_warn: expected a duration such as "30s", "6h" or "1h30m", not \'6 hours\'',
        id="duration",
    ),
    pytest.param(
        "[clusters.local]\nbootstrap_servers = 'h:1'\n" + JOB,
        "clusters: unknown key (expected cluster, job)",
        id="top-level-typo",
    ),
    pytest.param(
        "[job]\norders = 'x'\n",
        "job.orders: expected a table",
        id="not-a-table",
    ),
    pytest.param(
        JOB.replace('"local"', '"prod"'),
        "job.orders.cluster: no cluster 'prod' (defined: local)",
        id="unknown-cluster",
    ),
    pytest.param(
        JOB.replace("[job.orders]", '[job."orders job"]'),
        "job.\"orders job\": a name is letters, digits, '.', '_' and '-', starting with a letter or digit",
        id="name",
    ),
    pytest.param(
        "[cluster.local]\ntimeout = '1s'\n",
        "cluster.local: give exactly one of bootstrap_servers (HOST:PORT[,HOST:PORT...]) and "
        "bootstrap_servers_env (the environment variable that holds them)",
        id="no-bootstrap",
    ),
    pytest.param(
        "[cluster.local]\nbootstrap_servers = 'h:1'\n"
        "[cluster.local.properties]\n'bootstrap.servers' = 'x:1'\n",
        'cluster.local.properties."bootstrap.servers": '
        "set bootstrap_servers or bootstrap_servers_env instead",
        id="bootstrap-as-property",
    ),
    pytest.param(
        "[cluster.local]\nbootstrap_servers_env = 'NOT_SET_ANYWHERE'\n",
        "cluster.local.bootstrap_servers_env: environment variable NOT_SET_ANYWHERE is not set",
        id="env-unset",
    ),
    pytest.param(
        JOB + "[job.orders.storage_options_env]\nkey = 'no-such-var'\n",
        "job.orders.storage_options_env.key: 'no-such-var' is not an environment variable name",
        id="env-name",
    ),
    pytest.param(
        "[cluster.local]\nbootstrap_servers = 'h:1'\ntimeout = 30\n",
        'cluster.local.timeout: expected a duration such as "30s", "6h" or "1h30m"',
        id="timeout-not-a-string",
    ),
    pytest.param(
        "[cluster.local]\nbootstrap_servers = 'nope'\n",
        "cluster.local: bootstrap_servers: 'nope' has no port (HOST:PORT, as broker:9092)",
        id="bootstrap-no-port",
    ),
    pytest.param(
        "[job.orders\ncluster = 'local'\n",
        "not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 12)",
        id="toml-syntax",
    ),
]


@pytest.mark.parametrize(("text", "problem"), BAD)
def test_each_error_names_the_file_and_the_key(conf_dir: Path, text: str, problem: str) -> None:
    write(conf_dir, "a.toml", CLUSTER if "[cluster" not in text and "[clusters" not in text else "")
    path = write(conf_dir, "b.toml", text)
    assert error_of(conf_dir) == f"{path}: {problem}"


def test_names_are_unique_across_files(conf_dir: Path) -> None:
    first = write(conf_dir, "a.toml", CLUSTER + JOB)
    second = write(conf_dir, "b.toml", JOB)
    assert error_of(conf_dir) == f"{second}: job.orders: already defined in {first}"


def test_secrets_in_the_file_are_refused_without_echoing_them(conf_dir: Path) -> None:
    path = write(conf_dir, "a.toml", CLUSTER + f"[cluster.local.properties]\n'sasl.password' = '{SECRET}'\n")
    message = error_of(conf_dir)
    assert message == (
        f'{path}: cluster.local.properties."sasl.password": a secret must not be written in the file; '
        "name the environment variable that holds it in cluster.local.properties_env"
    )
    write(conf_dir, "a.toml", CLUSTER + JOB + f"[job.orders.storage_options]\nsecret = '{SECRET}'\n")
    assert SECRET not in error_of(conf_dir)


def test_a_wrong_type_never_echoes_the_value(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + f"[cluster.local.properties_env]\n'sasl.password' = ['{SECRET}']\n")
    message = error_of(conf_dir)
    assert SECRET not in message and 'cluster.local.properties_env."sasl.password"' in message


def test_a_directory_without_toml_files_is_an_error(conf_dir: Path) -> None:
    assert error_of(conf_dir) == f"{conf_dir}: no *.toml files here"
    assert error_of(conf_dir / "nope") == f"{conf_dir / 'nope'}: no such file or directory"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("6h", 21600.0), ("1h30m", 5400.0), ("500ms", 0.5), ("2d", 172800.0), ("1w", 604800.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "6", "h", "6 hours", "0s", "-1h", "PT6H"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(text)


# -- conf check ---------------------------------------------------------------------------------------


def secured(conf_dir: Path) -> dict[str, str]:
    write(
        conf_dir,
        "clusters.toml",
        """\
        [cluster.prod]
        bootstrap_servers = "kafka-1:9093,kafka-2:9093"
        [cluster.prod.properties]
        "security.protocol" = "SASL_SSL"
        "sasl.mechanism" = "PLAIN"
        "sasl.username" = "svc"
        [cluster.prod.properties_env]
        "sasl.password" = "PROD_KAFKA_PASSWORD"

        [cluster.local]
        bootstrap_servers_env = "KAFKA_BOOTSTRAP_SERVERS"
        timeout = "5s"
        """,
    )
    write(
        conf_dir,
        "jobs.toml",
        """\
        [job.orders]
        cluster = "prod"
        checkpoint = "s3://lake/chk/orders"
        runway_warn = "6h"
        [job.orders.storage_options_env]
        secret = "AWS_SECRET_ACCESS_KEY"

        [job.clicks]
        cluster = "local"
        checkpoint = "/chk/clicks"
        """,
    )
    return {"PROD_KAFKA_PASSWORD": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET, "KAFKA_BOOTSTRAP_SERVERS": "h:1"}


def test_conf_check_lists_clusters_and_jobs_without_secrets(
    conf_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = secured(conf_dir)
    monkeypatch.chdir(conf_dir.parent)
    result = invoke("conf", "check", "conf", env=env)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    props = (
        "sasl.mechanism=PLAIN sasl.password=$PROD_KAFKA_PASSWORD sasl.username=svc security.protocol=SASL_SSL"
    )
    assert result.stdout.splitlines() == [
        f"CLUSTER  BOOTSTRAP-SERVERS               TIMEOUT  {'PROPERTIES':{len(props)}}  FILE",
        f"local    h:1 ($KAFKA_BOOTSTRAP_SERVERS)  5s       {'':{len(props)}}  conf/clusters.toml",
        f"prod     kafka-1:9093,kafka-2:9093       30s      {props}  conf/clusters.toml",
        "",
        "JOB     CLUSTER  CHECKPOINT            ISOLATION         SPARK  GATE  SINK  RUNWAY-WARN  "
        "STORAGE-OPTIONS                FILE",
        f"clicks  local    /chk/clicks           read_uncommitted  4.2    fail  {'':48}  conf/jobs.toml",
        "orders  prod     s3://lake/chk/orders  read_uncommitted  4.2    fail        6h           "
        "secret=$AWS_SECRET_ACCESS_KEY  conf/jobs.toml",
    ]
    assert result.stderr == "% 2 clusters and 2 jobs in 2 files (conf)\n"


def test_conf_check_json(conf_dir: Path) -> None:
    result = invoke("conf", "check", str(conf_dir), "--output", "json", env=secured(conf_dir))
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert SECRET not in result.stdout
    assert body["files"] == [str(conf_dir / "clusters.toml"), str(conf_dir / "jobs.toml")]
    assert body["clusters"][1] == {
        "cluster": "prod",
        "bootstrap_servers": "kafka-1:9093,kafka-2:9093",
        "bootstrap_servers_env": None,
        "timeout_s": 30.0,
        "properties": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "svc",
            "sasl.password": "$PROD_KAFKA_PASSWORD",
        },
        "file": str(conf_dir / "clusters.toml"),
    }
    assert body["jobs"][1] == {
        "job": "orders",
        "cluster": "prod",
        "checkpoint": "s3://lake/chk/orders",
        "isolation": "read_uncommitted",
        "spark_version": "4.2",
        "gate": "fail",
        "sink": None,
        "runway_warn_s": 21600.0,
        "hold_s": None,
        "delta_tables": {},
        "storage_options": {"secret": "$AWS_SECRET_ACCESS_KEY"},
        "file": str(conf_dir / "jobs.toml"),
    }


def test_a_bad_bootstrap_server_in_a_file_names_the_file_and_key_never_the_flag(conf_dir: Path) -> None:
    path = write(conf_dir, "a.toml", "[cluster.local]\nbootstrap_servers = 'nope'\n" + JOB)
    result = invoke("conf", "check", str(conf_dir))
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {path}: cluster.local: bootstrap_servers: 'nope' has no port (HOST:PORT, as broker:9092)\n"
    )


def test_conf_check_error_is_one_line_and_exit_2(conf_dir: Path) -> None:
    path = write(conf_dir, "a.toml", CLUSTER + JOB + "isolation = 3\n")
    result = invoke("conf", "check", str(conf_dir))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert (
        result.stderr
        == f"Error: {path}: job.orders.isolation: Input should be 'read_uncommitted' or 'read_committed'\n"
    )


def test_loading_logs_no_secret(conf_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    environ = secured(conf_dir)
    with caplog.at_level(logging.DEBUG):
        conf = load_conf(conf_dir, environ=environ)
    assert SECRET not in caplog.text
    assert SECRET not in repr(conf) and SECRET not in str(conf.clusters["prod"].kafka)


def test_the_examples_parse() -> None:
    examples = Path(__file__).resolve().parents[2] / "conf/examples"
    conf = load_conf(
        examples,
        environ={
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
            "FLEET_S3_ENDPOINT": "http://127.0.0.1:9000",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": SECRET,
        },
    )
    assert sorted(conf.clusters) == ["dr", "local"]
    assert sorted(conf.jobs) == [
        "clicks-sessionize",
        "inventory-replica",
        "orders-to-delta",
        "payments-audit",
    ]
    assert SECRET not in repr(conf)


# -- fleet validate: what is refused before any job is checked ---------------------------------------


def test_fleet_validate_refuses_an_invalid_conf_before_checking_anything(conf_dir: Path) -> None:
    path = write(conf_dir, "a.toml", CLUSTER + JOB.replace('"local"', '"prod"'))
    result = invoke("fleet", "validate", str(conf_dir))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"Error: {path}: job.orders.cluster: no cluster 'prod' (defined: local)\n"


def test_fleet_validate_names_unknown_jobs(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB)
    result = invoke("fleet", "validate", str(conf_dir), "--job", "ordrs")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"Error: {conf_dir}: no job ordrs (defined: orders)\n"


def test_fleet_validate_needs_a_job(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER)
    result = invoke("fleet", "validate", str(conf_dir))
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: {conf_dir}: no jobs defined ([job.NAME] tables)\n",
    )


def test_fleet_validate_parallel_must_be_positive(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB)
    result = invoke("fleet", "validate", str(conf_dir), "--parallel", "0")
    assert result.exit_code == 2 and "--parallel" in result.stderr


@pytest.mark.parametrize(("text", "seconds"), [("PT6H", 21600.0), ("P1DT2H", 93600.0), ("90m", 5400.0)])
def test_runway_warn_takes_the_durations_of_runway_warn(conf_dir: Path, text: str, seconds: float) -> None:
    write(conf_dir, "clusters.toml", '[cluster.local]\nbootstrap_servers = "h:1"\n')
    write(conf_dir, "jobs.toml", JOB + f'runway_warn = "{text}"\n')
    assert load_conf(conf_dir).jobs["orders"].runway_warn_s == seconds


def test_a_bad_iso_runway_warn_names_the_key(conf_dir: Path) -> None:
    write(conf_dir, "clusters.toml", '[cluster.local]\nbootstrap_servers = "h:1"\n')
    write(conf_dir, "jobs.toml", JOB + 'runway_warn = "PT"\n')
    with pytest.raises(ConfigError, match=r"jobs.toml: job.orders.runway_warn: expected a duration such as"):
        load_conf(conf_dir)


def test_a_job_opts_in_to_holds_and_names_its_delta_tables(conf_dir: Path) -> None:
    write(
        conf_dir,
        "a.toml",
        CLUSTER + JOB + 'hold = "2d"\ndelta_tables = { "1" = "lake/orders", "2" = "s3://b/t" }\n',
    )
    job = load_conf(conf_dir, environ={}).jobs["orders"]
    assert job.hold_s == 2 * 86_400
    # a relative path is relative to the file, as checkpoint's
    assert dict(job.delta_tables) == {"1": str(conf_dir / "lake/orders"), "2": "s3://b/t"}
    assert load_conf(write(conf_dir, "a.toml", CLUSTER + JOB), environ={}).jobs["orders"].hold_s is None


def test_a_bad_hold_names_the_file_and_key(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB + 'hold = "forever"\n')
    with pytest.raises(ConfigError, match=r"a\.toml: job\.orders\.hold: expected a duration"):
        load_conf(conf_dir, environ={})


def test_a_job_or_its_cluster_sets_how_often_fleet_serve_checks_it(conf_dir: Path, tmp_path: Path) -> None:
    from recovery.watch import FleetWatch

    slow = '[cluster.slow]\nbootstrap_servers = "127.0.0.1:9093"\ninterval = "5m"\n'
    jobs = (
        JOB
        + 'interval = "10s"\n'
        + '[job.plain]\ncluster = "local"\ncheckpoint = "/chk/plain"\n'
        + '[job.far]\ncluster = "slow"\ncheckpoint = "/chk/far"\n'
    )
    conf = load_conf(write(conf_dir, "a.toml", CLUSTER + slow + jobs), environ={})
    assert conf.jobs["orders"].interval_s == 10 and conf.jobs["plain"].interval_s is None
    assert conf.clusters["slow"].interval_s == 300 and conf.clusters["local"].interval_s is None
    watch = FleetWatch(conf_dir, interval_s=60, conf=conf)
    # the job's own, else its cluster's, else the service's
    assert [watch.interval_of(conf.jobs[n]) for n in ("orders", "far", "plain")] == [10, 300, 60]


def test_a_bad_interval_names_the_file_and_key(conf_dir: Path) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB + 'interval = "often"\n')
    with pytest.raises(ConfigError, match=r"a\.toml: job\.orders\.interval: expected a duration"):
        load_conf(conf_dir, environ={})


def test_a_job_names_its_spark_and_fleet_validate_words_failures_as_it_does(conf_dir: Path) -> None:
    conf = load_conf(write(conf_dir, "a.toml", CLUSTER + JOB + 'spark_version = "3.5.7"\n'), environ={})
    assert conf.jobs["orders"].spark_line == "3.5"
    plain = load_conf(write(conf_dir, "a.toml", CLUSTER + JOB), environ={})
    assert plain.jobs["orders"].spark_line == "4.2"  # the documented default


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("3.5", "expected a Spark version as a string"),  # a TOML float
        ('"3.4"', "Spark 3.4 is not a line this tool was verified on (3.5, 4.0, 4.1, 4.2)"),
        ('"latest"', "'latest' is not a Spark version"),
    ],
)
def test_a_bad_spark_version_names_the_file_and_key(conf_dir: Path, value: str, problem: str) -> None:
    write(conf_dir, "a.toml", CLUSTER + JOB + f"spark_version = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_conf(conf_dir, environ={})
    assert f"a.toml: job.orders.spark_version: {problem}" in str(caught.value)
