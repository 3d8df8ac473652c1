"""Access against a broker that checks it (recovery.local.secured: SASL SCRAM-SHA-512 in plain text
and over TLS, mTLS, the KRaft StandardAuthorizer, nothing allowed without an ACL, certificates the
rig makes): refused credentials and untrusted certificates are said at once, naming the protocol,
mechanism and user or certificate and never the password; a missing ACL is named; all exit 3 with
nothing written, and `fleet validate` calls the job UNAUTHORIZED. Each command's exact ACLs:
test_least_privilege.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from example_rig import RIG

from recovery.local import topics
from recovery.local.certs import CertificateAuthority
from recovery.local.secured import SecuredKafkaBroker

pytestmark = pytest.mark.integration

PASSWORD = "alice-Pa55-never-printed"
WRONG = "wrong-Pa55-never-printed"
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafkaBroker]:
    with SecuredKafkaBroker() as broker:
        broker.add_user("alice", PASSWORD)
        broker.add_user("bob", PASSWORD)  # authenticated, with no ACL at all
        topics.create_topic(broker.bootstrap_servers, "orders", 2)
        topics.produce(broker.bootstrap_servers, "orders", topics.keyed_records(20, partitions=2))
        broker.allow("alice", "TOPIC", "orders", "DESCRIBE")
        yield broker


def run(broker: SecuredKafkaBroker, user: str, password: str, *args: str) -> tuple[int, str, float]:
    """The installed CLI as the user, over SASL_PLAINTEXT."""
    return run_with(broker.sasl_servers, broker.sasl_settings(user, password), *args)


def checkpoint(root: Path) -> Path:
    RIG.write_local(root, RIG.checkpoint_files("orders", [[5, 5]]))
    return root


def test_refused_credentials_are_said_at_once_with_the_mechanism_and_user_never_the_password(
    secured: SecuredKafkaBroker, tmp_path: Path
) -> None:
    chk = str(checkpoint(tmp_path / "chk"))
    for args in (["offsets", "--topic", "orders"], ["validate", chk]):
        code, out, took = run(secured, "alice", WRONG, *args)
        assert code == 3, out
        assert took < TIMEOUT_S / 2, f"{args[0]} took {took:.1f}s: said after the timeout, not at once"
        assert "refused these credentials (SASL_PLAINTEXT, SCRAM-SHA-512, user alice)" in out, out
        assert "Traceback" not in out and WRONG not in out and PASSWORD not in out


def test_a_missing_acl_names_what_was_being_done_and_the_right_one_reads(
    secured: SecuredKafkaBroker,
) -> None:
    code, out, _ = run(secured, "bob", PASSWORD, "offsets", "--topic", "orders")
    assert code == 3, out
    assert "orders" in out and "not authorized (TOPIC_AUTHORIZATION_FAILED)" in out, out
    assert "no answer" not in out and PASSWORD not in out

    code, out, _ = run(secured, "alice", PASSWORD, "offsets", "--topic", "orders", "--output", "json")
    assert code == 0, out
    rows = json.loads(out)
    assert [(r["partition"], r["high_watermark"]) for r in rows] == [(0, 10), (1, 10)]


def test_fleet_validate_calls_the_job_unauthorized(secured: SecuredKafkaBroker, tmp_path: Path) -> None:
    chk = checkpoint(tmp_path / "chk")
    conf = tmp_path / "conf.toml"
    conf.write_text(
        f'[cluster.secured]\nbootstrap_servers = "{secured.sasl_servers}"\ntimeout = "{TIMEOUT_S}s"\n'
        '[cluster.secured.properties]\n"security.protocol" = "SASL_PLAINTEXT"\n'
        '"sasl.mechanism" = "SCRAM-SHA-512"\n"sasl.username" = "alice"\n'
        '[cluster.secured.properties_env]\n"sasl.password" = "SECURED_KAFKA_PASSWORD"\n'
        f'[job.orders]\ncluster = "secured"\ncheckpoint = "{chk}"\n'
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "recovery", "fleet", "validate", str(conf), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SECURED_KAFKA_PASSWORD": WRONG},
    )
    assert time.monotonic() - started < TIMEOUT_S / 2
    assert done.returncode == 3, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["verdict"] == "UNAUTHORIZED" and "user alice" in row["detail"], row
    assert WRONG not in done.stdout + done.stderr


def run_with(servers: str, settings: dict[str, str], *args: str) -> tuple[int, str, float]:
    """The installed CLI with these client settings: exit code, stdout + stderr, seconds taken."""
    kafka = ["-b", servers, "--timeout", str(TIMEOUT_S)]
    for key, value in settings.items():
        kafka += ["-X", f"{key}={value}"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "recovery", *args, *kafka], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def test_sasl_ssl_reads_with_the_right_password_and_says_a_wrong_one_at_once(
    secured: SecuredKafkaBroker,
) -> None:
    servers = secured.sasl_ssl_servers
    code, out, _ = run_with(
        servers, secured.sasl_ssl_settings("alice", PASSWORD), "offsets", "--topic", "orders"
    )
    assert code == 0 and "orders" in out, out

    code, out, took = run_with(
        servers, secured.sasl_ssl_settings("alice", WRONG), "offsets", "--topic", "orders"
    )
    assert code == 3 and took < TIMEOUT_S / 2, out
    assert "refused these credentials (SASL_SSL, SCRAM-SHA-512, user alice)" in out, out
    assert WRONG not in out and PASSWORD not in out and "Traceback" not in out


def test_a_broker_certificate_the_client_does_not_trust_is_said_at_once(
    secured: SecuredKafkaBroker, tmp_path: Path
) -> None:
    stranger = CertificateAuthority(tmp_path / "other-ca")
    settings = {**secured.sasl_ssl_settings("alice", PASSWORD), "ssl.ca.location": str(stranger.ca_pem)}
    code, out, took = run_with(secured.sasl_ssl_servers, settings, "offsets", "--topic", "orders")
    assert code == 3 and took < TIMEOUT_S / 2, out
    assert "this client does not trust the certificate of the Kafka cluster" in out, out
    assert "certificate verify failed" in out and "ssl.ca.location" in out, out
    assert PASSWORD not in out and "Traceback" not in out


def test_mtls_the_certificate_is_the_principal_and_a_refused_one_is_said_at_once(
    secured: SecuredKafkaBroker, tmp_path: Path
) -> None:
    servers = secured.mtls_servers
    secured.allow("carol", "TOPIC", "orders", "DESCRIBE")
    code, out, _ = run_with(servers, secured.mtls_settings("carol"), "offsets", "--topic", "orders")
    assert code == 0 and "orders" in out, out

    # Signed by our CA, but User:dave holds no ACL.
    code, out, _ = run_with(servers, secured.mtls_settings("dave"), "offsets", "--topic", "orders")
    assert code == 3 and "needs Describe on topic orders" in out, out

    # No client certificate, then one from a CA the broker does not trust: the broker says no.
    bare = {
        k: v for k, v in secured.mtls_settings("carol").items() if not k.startswith(("ssl.cert", "ssl.key"))
    }
    stranger = CertificateAuthority(tmp_path / "other-ca")
    cert, key = stranger.issue("carol")
    forged = {**bare, "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    for settings, who in ((bare, "SSL, no client certificate"), (forged, f"SSL, certificate {cert}")):
        code, out, took = run_with(servers, settings, "offsets", "--topic", "orders")
        assert code == 3 and took < TIMEOUT_S / 2, out
        assert f"refused these credentials ({who})" in out and "SSL alert" in out, out
        assert "Traceback" not in out


def test_a_java_client_properties_file_works_over_sasl_ssl(
    secured: SecuredKafkaBroker, tmp_path: Path
) -> None:
    """What a Java client's --command-config holds: JAAS, and the CA as a PEM truststore."""
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="alice" password="{PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca.ca_pem}\n"
    )
    args = ["offsets", "--topic", "orders", "--output", "json", "--command-config", str(properties)]
    code, out, _ = run_with(secured.sasl_ssl_servers, {}, *args)
    assert code == 0, out
    assert [r["high_watermark"] for r in json.loads(out)] == [10, 10]
