"""DescribeLogDirs through kafka-python: the connection settings it is given, the ones it refuses by
name, the size taken from several replicas, its DEBUG logs kept off, and (on the broker) an answer
read wrong becoming a reason. The size runway against real deletion: tests/runway/test_runway_rig.py."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from recovery.core.model import TopicPartition
from recovery.kafka.config import KafkaConfig
from recovery.kafka.logdirs import _largest, kafka_python_settings, partition_sizes


def test_librdkafka_settings_become_kafka_python_keywords() -> None:
    kafka = KafkaConfig(
        "a:9093,b:9093",
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "svc",
            "sasl.password": "s3cret",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
            "socket.keepalive.enable": "true",  # a client tuning setting: not the admin call's business
        },
    )
    assert kafka_python_settings(kafka, 5000) == {
        "bootstrap_servers": ["a:9093", "b:9093"],
        "request_timeout_ms": 5000,
        "bootstrap_timeout_ms": 5000,
        "client_id": "stream-recovery",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "s3cret",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
        ({"sasl.mechanisms": "OAUTHBEARER"}, "sasl.mechanisms=OAUTHBEARER"),
        ({"sasl.kerberos.keytab": "/k"}, "sasl.kerberos.keytab"),
        ({"ssl.ca.pem": "-----BEGIN"}, "ssl.ca.pem"),
    ],
)
def test_a_setting_kafka_python_cannot_take_leaves_the_size_unknown_naming_it(
    properties: dict[str, str], named: str
) -> None:
    kafka = KafkaConfig("a:9092", properties)
    assert kafka_python_settings(kafka, 5000) == named
    tp = TopicPartition("orders", 0)
    assert partition_sizes(kafka, [tp]) == {tp: f"DescribeLogDirs not sent: the client cannot use {named}"}


def test_the_largest_replica_counts_and_moving_or_offline_ones_do_not() -> None:
    def part(index: int, size: int, future: bool = False) -> dict[str, object]:
        return {"partition_index": index, "partition_size": size, "is_future_key": future}

    answers = [
        {
            "broker": 1,
            "log_dirs": [{"error_code": 0, "topics": [{"name": "t", "partitions": [part(0, 10)]}]}],
        },
        {
            "broker": 2,
            "log_dirs": [
                {"error_code": 0, "topics": [{"name": "t", "partitions": [part(0, 12), part(1, 7)]}]},
                {"error_code": 0, "topics": [{"name": "t", "partitions": [part(1, 99, future=True)]}]},
                {"error_code": 57, "topics": [{"name": "t", "partitions": [part(1, 500)]}]},  # offline
            ],
        },
    ]
    assert _largest(answers) == {TopicPartition("t", 0): 12, TopicPartition("t", 1): 7}


def test_kafka_python_never_logs_at_debug_where_the_password_would_be() -> None:
    """At DEBUG kafka-python logs its configuration and every request, SASL's included."""
    logging.getLogger("kafka").setLevel(logging.DEBUG)
    logging.getLogger("kafka.net.connection").setLevel(logging.DEBUG)
    logging.getLogger("kafka.net.selector").setLevel(logging.WARNING)  # above INFO: left as it is
    tp = TopicPartition("orders", 0)
    partition_sizes(KafkaConfig("127.0.0.1:1", timeout_s=1), [tp])
    assert logging.getLogger("kafka").level == logging.INFO
    assert logging.getLogger("kafka.net.connection").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("kafka.admin.client").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("kafka.net.selector").level == logging.WARNING


def test_an_answer_that_cannot_be_read_is_a_reason(
    bootstrap: str, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real broker answers; if kafka-python's answer dicts ever change shape (our reading of
    them raises), the size is unknown and validate goes on."""
    import recovery.kafka.logdirs as logdirs

    tp = TopicPartition(new_topic(1), 0)
    assert isinstance(partition_sizes(KafkaConfig(bootstrap), [tp])[tp], int)  # as it reads today

    def changed_shape(answers: object) -> dict[TopicPartition, int]:
        return _largest([{"log_dirs": [{"topics": [{"name": tp.topic, "partitions": [{"index": 0}]}]}]}])

    monkeypatch.setattr(logdirs, "_largest", changed_shape)
    assert partition_sizes(KafkaConfig(bootstrap), [tp]) == {
        tp: "DescribeLogDirs failed: KeyError: 'partition_index'"
    }


def test_an_unreachable_cluster_is_a_reason_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # kafka-python logs its configuration at DEBUG: not ours to show
    kafka = KafkaConfig(
        "127.0.0.1:1",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "hunter2",
        },
        timeout_s=1,
    )
    tp = TopicPartition("orders", 0)
    (reason,) = partition_sizes(kafka, [tp]).values()
    assert isinstance(reason, str) and reason.startswith("DescribeLogDirs failed: ")
    assert "hunter2" not in reason
    assert "hunter2" not in caplog.text
