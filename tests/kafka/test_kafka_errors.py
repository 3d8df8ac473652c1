"""Error mapping and the shared client (no broker: librdkafka errors are built directly)."""

from __future__ import annotations

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from recovery.errors import KafkaAccessDenied, KafkaError, KafkaUnavailable, TopicNotFound
from recovery.kafka._errors import error_code, is_transient, translate
from recovery.kafka._retry import Deadline, backoff
from recovery.kafka.admin import admin_for, kafka_admin
from recovery.kafka.config import KafkaConfig

SECRET = "s3cr3t-value"
CONFIG = KafkaConfig("127.0.0.1:1", {"sasl.password": SECRET}, timeout_s=2)


def failure(code: int, text: str = "boom") -> KafkaException:
    return KafkaException(RdKafkaError(code, text))


def test_timeouts_are_transient_and_unreachable() -> None:
    exc = failure(RdKafkaError._TRANSPORT)

    error = translate(exc, "listing topics", CONFIG)

    assert error_code(exc) == "_TRANSPORT" and is_transient(exc)
    assert isinstance(error, KafkaUnavailable)
    assert str(error).startswith("listing topics: no answer from the Kafka cluster at 127.0.0.1:1 within 2s")


def test_an_unknown_topic_is_topic_not_found() -> None:
    error = translate(
        failure(RdKafkaError.UNKNOWN_TOPIC_OR_PART, "no such topic"), "describing orders", CONFIG
    )
    assert isinstance(error, TopicNotFound)
    assert str(error) == "describing orders: no such topic"


def test_other_errors_keep_their_code_and_never_a_secret() -> None:
    error = translate(failure(RdKafkaError.POLICY_VIOLATION, f"denied for {SECRET}"), "x", CONFIG)

    assert type(error) is KafkaError
    assert str(error) == "x: POLICY_VIOLATION: denied for [redacted]"


def test_a_missing_acl_and_refused_credentials_are_access_denied_exit_3_never_a_secret() -> None:
    config = KafkaConfig(
        "127.0.0.1:1",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "svc",
            "sasl.password": SECRET,
        },
        timeout_s=2,
    )
    acl = translate(failure(RdKafkaError.TOPIC_AUTHORIZATION_FAILED), "describing topic orders", config)
    assert isinstance(acl, KafkaAccessDenied) and acl.exit_code == 3
    assert str(acl).startswith("describing topic orders: not authorized (TOPIC_AUTHORIZATION_FAILED)")

    refused = translate(failure(RdKafkaError._AUTHENTICATION, f"bad {SECRET}"), "x", config)
    assert isinstance(refused, KafkaAccessDenied)
    assert "refused these credentials (SASL_SSL, SCRAM-SHA-512, user svc): bad [redacted]" in str(refused)
    assert SECRET not in str(refused)


def test_backoff_doubles_up_to_two_seconds() -> None:
    assert [backoff(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    assert not Deadline(0.05).allows(0) and Deadline(5).allows(3)


def test_one_client_per_config_serves_every_call() -> None:
    """A whole command shares one AdminClient (and its connections) per KafkaConfig."""
    same = KafkaConfig("127.0.0.1:1", {"sasl.password": SECRET}, timeout_s=2)
    other = KafkaConfig("127.0.0.1:1", timeout_s=3)

    with kafka_admin(CONFIG) as admin:
        assert admin is admin_for(same)
    assert admin_for(other) is not admin_for(CONFIG)
