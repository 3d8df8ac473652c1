"""confluent_kafka exceptions -> ours (private to the Kafka edge: admin, groups, read).

librdkafka reports every failure as a ``KafkaException`` carrying a ``KafkaError`` whose ``name()``
is the error code (``_TRANSPORT``, ``OFFSET_NOT_AVAILABLE`` ...). We sort the codes into:

* unreachable (no answer in time)  -> :class:`~recovery.errors.KafkaUnavailable` (exit 3);
* transient (retried until the deadline first: KIP-207 OFFSET_NOT_AVAILABLE, leadership moving,
  a coordinator loading), then unreachable;
* gone (unknown topic or partition) -> :class:`~recovery.errors.TopicNotFound`;
* refused (authentication failed, or an ACL missing) -> :class:`~recovery.errors.KafkaAccessDenied`
  (exit 3), said at once: librdkafka reports a failed SASL or TLS handshake as an error event, not
  as an answer (its requests would wait for the whole timeout), see :func:`refused_access`;
* anything else                      -> :class:`~recovery.errors.KafkaError` with the code.

Messages never carry secrets: :func:`scrub` removes the values of secret client properties.
"""

from __future__ import annotations

import re

from recovery.errors import KafkaAccessDenied, KafkaError, KafkaUnavailable, RecoveryError, TopicNotFound
from recovery.kafka.config import REDACTED, KafkaConfig, is_secret

UNREACHABLE = frozenset(
    {
        "_TRANSPORT",
        "_TIMED_OUT",
        "_ALL_BROKERS_DOWN",
        "REQUEST_TIMED_OUT",
        "_RESOLVE",
        "NETWORK_EXCEPTION",
        "_TIMED_OUT_QUEUE",
        "_DESTROY",
    }
)
# Retried until the deadline (KIP-207 OFFSET_NOT_AVAILABLE; leadership moving; coordinator loading).
TRANSIENT = UNREACHABLE | {
    "OFFSET_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "KAFKA_STORAGE_ERROR",
    "REPLICA_NOT_AVAILABLE",
}
GONE = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"})
# The cluster refused our credentials: librdkafka's error events (error_cb) for a failed SASL
# exchange or TLS handshake; the broker's own code for a failed SASL authentication.
AUTHENTICATION = frozenset({"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_SSL"})
# With TLS 1.3 the broker checks the client's certificate after the client's handshake is done, and
# says no with a TLS alert that librdkafka reports as a lost connection (_TRANSPORT: "Receive failed:
# ... ssl/tls alert bad certificate: SSL alert number 42"): 42 bad, 48 unknown CA, 116 no certificate.
_TLS_ALERT = "SSL alert number"
# The principal lacks an ACL: Describe (topics), Read (groups), Describe on the cluster ...
AUTHORIZATION = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    }
)
# librdkafka answers _NOENT ("No leaders found") when no partition of a ListOffsets call has a
# leader, e.g. when every one of them is missing; the metadata then tells missing from leaderless.
NO_LEADER = frozenset({"_NOENT"})
# Operations an ACL can grant on the cluster resource (not Read: "Read on the cluster" is no ACL).
_CLUSTER_OPERATIONS = frozenset({"Describe", "DescribeConfigs", "Alter", "AlterConfigs", "ClusterAction"})
# TLS alerts about a certificate (RFC 8446 6.2): bad, unsupported, revoked, expired, unknown,
# unknown CA, required. Others (40 handshake failure, 70 protocol version) are about the settings.
_CERTIFICATE_ALERTS = frozenset({42, 43, 44, 45, 46, 48, 116})
_ALERT_NUMBER = re.compile(r"SSL alert number (\d+)")


def needs(code: str, operation: str, *, topic: str = "", group: str = "") -> str:
    """The ACL a request refused with ``code`` needed, in Kafka's words (``Describe on topic
    orders``, ``Read on group billing``, ``Describe on the cluster``); "" for any other code."""
    if code == "TOPIC_AUTHORIZATION_FAILED" and topic:
        return f"{operation} on topic {topic}"
    if code == "GROUP_AUTHORIZATION_FAILED" and group:
        return f"{operation} on group {group}"
    if code == "CLUSTER_AUTHORIZATION_FAILED" and operation in _CLUSTER_OPERATIONS:
        return f"{operation} on the cluster"
    return ""


def refused_because(code: str, operation: str, *, topic: str = "", group: str = "") -> str:
    """``code``, with the ACL it asks for when it is an authorization failure:
    ``TOPIC_AUTHORIZATION_FAILED, needs DescribeConfigs on topic orders``."""
    acl = needs(code, operation, topic=topic, group=group)
    return f"{code}, needs {acl}" if acl else code


def is_refusal(code: str, reason: str) -> bool:
    """Whether an error event says the credentials were refused (not that the cluster is down)."""
    return code in AUTHENTICATION or (code == "_TRANSPORT" and _TLS_ALERT in reason)


def error_code(exc: BaseException) -> str:
    """The librdkafka error name of ``exc`` (``_TRANSPORT``), or its class name."""
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    return str(name()) if callable(name) else type(exc).__name__


def error_text(exc: BaseException) -> str:
    """What librdkafka says went wrong (its error's text, not the ``KafkaError{...}`` repr)."""
    err = exc.args[0] if exc.args else None
    text = getattr(err, "str", None)
    return str(text()) if callable(text) else str(exc)


def is_transient(exc: BaseException) -> bool:
    """Whether asking again may succeed (librdkafka says retriable, or a code we know is)."""
    err = exc.args[0] if exc.args else None
    retriable = getattr(err, "retriable", None)
    return error_code(exc) in TRANSIENT or (callable(retriable) and bool(retriable()))


def translate(
    exc: BaseException,
    what: str,
    config: KafkaConfig,
    *,
    operation: str = "Describe",
    topic: str = "",
    group: str = "",
) -> RecoveryError:
    """Map a confluent_kafka exception to ours (the caller raises it ``from exc``). ``operation``
    on ``topic`` or ``group``: the ACL the request needs, named when it is refused."""
    code = error_code(exc)
    if code in AUTHORIZATION:
        return not_authorized(what, code, config, needs(code, operation, topic=topic, group=group))
    return _translate(exc, code, what, config)


def not_authorized(what: str, code: str, config: KafkaConfig, acl: str = "") -> KafkaAccessDenied:
    """The error for a request refused for want of an ACL (``acl``: which one, when known)."""
    lacks = f"needs {acl}" if acl else "lacks the ACL for it"
    return KafkaAccessDenied(
        f"{what}: not authorized ({code}): the principal of these client settings {lacks} (cluster at "
        f"{config.bootstrap_servers}); the brokers are up, they answered"
    )


def _translate(exc: BaseException, code: str, what: str, config: KafkaConfig) -> RecoveryError:
    if is_refusal(code, error_text(exc)):
        return refused_access(scrub(error_text(exc), config), config)
    if code in UNREACHABLE or is_transient(exc):
        return KafkaUnavailable(
            f"{what}: no answer from the Kafka cluster at {config.bootstrap_servers} within "
            f"{config.timeout_s:g}s ({code}). Check the brokers are up and reachable, and the "
            "bootstrap servers and client settings."
        )
    if code in GONE:
        return TopicNotFound(f"{what}: {scrub(error_text(exc), config)}")
    return KafkaError(f"{what}: {code}: {scrub(error_text(exc), config)}")


def refused_access(reason: str, config: KafkaConfig) -> KafkaAccessDenied:
    """The error for credentials the cluster refused, or a broker certificate this client does not
    trust: the protocol, mechanism and principal (user or certificate), never the secret."""
    props = config.properties
    protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
    who = [protocol]
    if "SASL" in protocol:
        who.append(str(props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI"))).upper())
        if props.get("sasl.username"):
            who.append(f"user {props['sasl.username']}")
    certificate = props.get("ssl.certificate.location") or props.get("ssl.keystore.location")
    if protocol == "SSL":
        inline = "an inline certificate (ssl.certificate.pem)" if props.get("ssl.certificate.pem") else ""
        who.append(f"certificate {certificate}" if certificate else inline or "no client certificate")
    alert = _ALERT_NUMBER.search(reason)
    if alert is not None and int(alert.group(1)) not in _CERTIFICATE_ALERTS:
        return KafkaAccessDenied(
            f"the Kafka cluster at {config.bootstrap_servers} refused the TLS handshake ({', '.join(who)}): "
            f"{reason}. Check the TLS settings (protocol versions, ciphers) against the brokers'; the "
            "brokers are up, they answered."
        )
    if "certificate verify failed" in reason:
        # The client's check of the broker failed: nothing was refused by the cluster.
        return KafkaAccessDenied(
            f"this client does not trust the certificate of the Kafka cluster at {config.bootstrap_servers} "
            f"({', '.join(who)}): {reason}. Check ssl.ca.location (the CA that signed the brokers' "
            "certificates) and that the broker's certificate names the host in the bootstrap servers."
        )
    return KafkaAccessDenied(
        f"the Kafka cluster at {config.bootstrap_servers} refused these credentials "
        f"({', '.join(who)}): {reason}. Check the client settings (sasl.username, sasl.password, "
        "the client certificate and the CA that signed it); the brokers are up, they answered."
    )


def unreachable(what: str, config: KafkaConfig) -> KafkaUnavailable:
    """The error for a request librdkafka never answered within the config's timeout."""
    return KafkaUnavailable(
        f"{what}: no answer from the Kafka cluster at {config.bootstrap_servers} within {config.timeout_s:g}s"
    )


def scrub(message: str, config: KafkaConfig) -> str:
    """``message`` without the values of ``config``'s secret properties."""
    for key, value in config.properties.items():
        if is_secret(key) and value:
            message = message.replace(value, REDACTED)
    return message
