"""Access against a broker that checks it (recovery.local.secured: SASL SCRAM-SHA-512, the KRaft
StandardAuthorizer, nothing allowed without an ACL): refused credentials are said at once, naming
the mechanism and the user and never the password; a missing ACL names what was being done; both
exit 3 with nothing written, and `fleet validate` calls the job UNAUTHORIZED."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recovery.local import topics
from recovery.local.secured import SecuredKafkaBroker

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
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
    """The installed CLI as the user: exit code, stdout + stderr, seconds taken."""
    settings = [f"{k}={v}" for k, v in broker.sasl_settings(user, password).items()]
    kafka = ["-b", broker.sasl_servers, "--timeout", str(TIMEOUT_S)]
    for setting in settings:
        kafka += ["-X", setting]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "recovery", *args, *kafka], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def checkpoint(root: Path) -> Path:
    path = REPO / "conf/examples/rig.py"
    spec = importlib.util.spec_from_file_location("secured_example_rig", path)
    assert spec is not None and spec.loader is not None
    rig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rig)
    rig.write_local(root, rig.checkpoint_files("orders", [[5, 5]]))
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
