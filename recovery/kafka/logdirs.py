"""Partition sizes on disk (DescribeLogDirs, API key 35), for the ``retention.bytes`` runway.

confluent-kafka (librdkafka) has no DescribeLogDirs, so this asks through kafka-python's admin
client, imported only when a topic is limited by size. Every broker is asked (a replica's size is
its own log's); a partition's size is the largest its replicas report, so the estimate errs early.
Replicas being moved between log dirs (``is_future_key``) are not counted.

The client gets the same connection settings as the librdkafka clients, translated by name. A
setting it cannot take (Kerberos, OAUTHBEARER, PEM strings, keystores) is not guessed at: the
sizes are reported unknown, and the runway says why.

    sizes = partition_sizes(kafka, [TopicPartition("orders", 0)])   # {tp: 1014488} or {tp: "why"}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from recovery.core.hold import LogDir
from recovery.core.model import TopicPartition
from recovery.kafka._errors import refused_because, scrub
from recovery.kafka.config import KafkaConfig

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["LogDir", "kafka_python_settings", "log_dirs", "partition_sizes"]

# librdkafka name -> kafka-python keyword.
_SAME = {
    "security.protocol": "security_protocol",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "client.id": "client_id",
}
_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
# Settings that change how the client connects or authenticates, which kafka-python cannot take as
# a plain value: refused by name, never silently dropped. Tuning settings (socket.*, fetch.*) are
# the clients' own business and are left out.
_CONNECTION_PREFIXES = ("sasl.", "ssl.", "ssl_", "security.", "enable.ssl.")


def kafka_python_settings(kafka: KafkaConfig, timeout_ms: int) -> dict[str, object] | str:
    """kafka-python's keyword arguments for ``kafka``, or the name of the setting it cannot take."""
    settings: dict[str, object] = {
        "bootstrap_servers": kafka.bootstrap_servers.split(","),
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
        "client_id": "stream-recovery",
    }
    for key, value in kafka.properties.items():
        if key in _SAME:
            settings[_SAME[key]] = value.upper() if key == "security.protocol" else value
        elif key in ("sasl.mechanism", "sasl.mechanisms"):
            if value.upper() not in _MECHANISMS:
                return f"{key}={value}"
            settings["sasl_mechanism"] = value.upper()
        elif key == "ssl.endpoint.identification.algorithm":
            settings["ssl_check_hostname"] = value.lower() == "https"
        elif key.startswith(_CONNECTION_PREFIXES):
            return key
    return settings


def partition_sizes(
    kafka: KafkaConfig, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int | str]:
    """Each partition's size in bytes (the largest replica), or why it is not known."""
    wanted = sorted(set(partitions), key=lambda tp: (tp.topic, tp.partition))
    if not wanted:
        return {}
    sizes = _describe_log_dirs(kafka, wanted, lambda answers: _largest(answers))
    if isinstance(sizes, str):
        return dict.fromkeys(wanted, sizes)
    log.debug("DescribeLogDirs: %d of %d partition sizes", len(sizes), len(wanted))
    return {tp: sizes.get(tp, "DescribeLogDirs: no broker reported this partition") for tp in wanted}


def log_dirs(kafka: KafkaConfig, partitions: Iterable[TopicPartition]) -> tuple[LogDir, ...] | str:
    """Every broker's online log directories with the sizes of the replicas of ``partitions`` they
    hold (and their free space), or why they could not be read."""
    wanted = sorted(set(partitions), key=lambda tp: (tp.topic, tp.partition))
    return _describe_log_dirs(kafka, wanted, _dirs)


def _dirs(answers: Iterable[Mapping[str, Any]]) -> tuple[LogDir, ...]:
    dirs = []
    for broker in answers:
        for log_dir in broker.get("log_dirs", ()):
            if log_dir.get("error_code", 0) != 0:
                continue
            total, usable = int(log_dir.get("total_bytes", -1)), int(log_dir.get("usable_bytes", -1))
            dirs.append(
                LogDir(
                    int(broker.get("broker", -1)),
                    str(log_dir.get("log_dir", "")),
                    total if total >= 0 else None,
                    usable if usable >= 0 else None,
                    _sizes_in(log_dir),
                )
            )
    return tuple(sorted(dirs, key=lambda d: (d.broker, d.path)))


def _describe_log_dirs(
    kafka: KafkaConfig, wanted: list[TopicPartition], read: Callable[[list[Mapping[str, Any]]], T]
) -> T | str:
    """What ``read`` makes of every broker's DescribeLogDirs answer for ``wanted`` (kafka-python's
    dicts), or why there is none (an answer ``read`` cannot take included)."""
    timeout_ms = max(1000, int(kafka.timeout_s * 1000))
    settings = kafka_python_settings(kafka, timeout_ms)
    if isinstance(settings, str):
        return f"DescribeLogDirs not sent: the client cannot use {settings}"
    by_topic: dict[str, list[int]] = {}
    for tp in wanted:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    _quiet_kafka_python()
    try:
        from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]  # no type hints shipped

        client = KafkaAdminClient(**settings)
        try:
            answers = list(client.describe_log_dirs(by_topic))
        finally:
            client.close()
        if any(not answer.get("log_dirs") for answer in answers):
            # A broker has at least one log directory: it answers none to a principal that may not
            # Describe the cluster (KafkaApis.handleDescribeLogDirsRequest; the Java admin client
            # reads that as CLUSTER_AUTHORIZATION_FAILED, kafka-python drops the code).
            return f"DescribeLogDirs {refused_because('CLUSTER_AUTHORIZATION_FAILED', 'Describe')}"
        return read(answers)
    except Exception as exc:  # kafka-python's KafkaError tree, socket/SSL errors, an answer we misread
        return f"DescribeLogDirs failed: {scrub(f'{type(exc).__name__}: {exc}', kafka)}"


def _quiet_kafka_python() -> None:
    """Hold kafka-python's loggers at INFO or above: at DEBUG it logs its whole configuration and
    every request, the SASL password in both (``SaslAuthenticateRequest(auth_bytes=...)``)."""
    # list(): one C-level copy, safe while another thread imports a module (adds a logger).
    names = ["kafka"] + [n for n in list(logging.root.manager.loggerDict) if n.startswith("kafka.")]
    for name in names:
        logger = logging.getLogger(name)
        # "kafka" itself always (its children inherit it); a child only when set below INFO.
        if (name == "kafka" or logger.level != logging.NOTSET) and logger.level < logging.INFO:
            logger.setLevel(logging.INFO)


# kafka-python ships no types: its answers are nested dicts of plain values.
def _largest(answers: Iterable[Mapping[str, Any]]) -> dict[TopicPartition, int]:
    """The largest size each partition's replicas report, from kafka-python's answers."""
    sizes: dict[TopicPartition, int] = {}
    for broker in answers:
        for log_dir in broker.get("log_dirs", ()):
            if log_dir.get("error_code", 0) != 0:
                continue  # an offline log dir: its replicas are not serving
            for tp, size in _sizes_in(log_dir).items():
                sizes[tp] = max(sizes.get(tp, 0), size)
    return sizes


def _sizes_in(log_dir: Mapping[str, Any]) -> dict[TopicPartition, int]:
    """The sizes of the replicas one log directory holds (replicas being moved in are not counted)."""
    sizes: dict[TopicPartition, int] = {}
    for topic in log_dir.get("topics", ()):
        for part in topic.get("partitions", ()):
            if not part.get("is_future_key"):
                tp = TopicPartition(topic["name"], int(part["partition_index"]))
                sizes[tp] = int(part["partition_size"])
    return sizes
