"""A topic's own configuration values, read and changed one value at a time (a retention hold).

DescribeConfigs answers each value with its source: ``DYNAMIC_TOPIC_CONFIG`` is the topic's own
(set with kafka-configs/AlterConfigs); anything else is a default the topic inherits (the broker's
setting or Kafka's default). A hold must put back exactly what was there: the topic's own value, or
no value of its own (the override deleted), so both are kept.

Changes go through IncrementalAlterConfigs (KIP-339): ``SET`` or ``DELETE`` of the named values
only, so nothing else of the topic's configuration is touched (the legacy AlterConfigs replaces the
whole set). It needs AlterConfigs on the topic.

    values = topic_values(kafka, ["orders"], ("retention.ms",))
    # {"orders": {"retention.ms": TopicValue("86400000", own=True)}}
    alter_topic_values(kafka, {"orders": {"retention.ms": "259200000"}})   # None: delete the override
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recovery.errors import RecoveryError
from recovery.kafka._errors import error_code, refused_because, scrub
from recovery.kafka._retry import Deadline
from recovery.kafka.admin import admin_for
from recovery.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["TopicValue", "alter_topic_values", "topic_values"]


@dataclass(frozen=True)
class TopicValue:
    """A configuration value in effect for a topic, and whether it is the topic's own (``own``)
    or inherited from the broker or Kafka's default."""

    value: str | None
    own: bool


def topic_values(
    kafka: KafkaConfig, topics: Iterable[str], names: Iterable[str]
) -> dict[str, dict[str, TopicValue] | str]:
    """The values ``names`` of each topic (a name the broker does not answer is left out), or why
    they could not be read (``TOPIC_AUTHORIZATION_FAILED``, ``UNKNOWN_TOPIC_OR_PART``, ...)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ConfigSource

    wanted = set(names)
    topics = sorted(set(topics))
    if not topics:
        return {}
    deadline = Deadline(kafka.timeout_s)
    admin = admin_for(kafka)
    admin.await_controller(topics[0], deadline)
    client = admin.client
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    try:
        futures = client.describe_configs(resources, request_timeout=max(1.0, deadline.remaining()))
    except (KafkaException, ValueError, TypeError) as exc:
        return dict.fromkeys(topics, f"DescribeConfigs: {scrub(str(exc), kafka)}")
    out: dict[str, dict[str, TopicValue] | str] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=deadline.remaining() + 5)
        except KafkaException as exc:
            why = refused_because(error_code(exc), "DescribeConfigs", topic=resource.name)
            out[resource.name] = f"DescribeConfigs {why}"
            continue
        except Exception as exc:  # a future librdkafka never completes (TimeoutError)
            out[resource.name] = (
                f"DescribeConfigs: no answer within {kafka.timeout_s:g}s ({type(exc).__name__})"
            )
            continue
        out[resource.name] = {
            name: TopicValue(entry.value, entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
            for name, entry in entries.items()
            if name in wanted
        }
    return out


def alter_topic_values(
    kafka: KafkaConfig, changes: Mapping[str, Mapping[str, str | None]]
) -> dict[str, str | None]:
    """Set (a string) or delete (None: the topic inherits the default again) each topic's values,
    one IncrementalAlterConfigs request for all topics. Per topic: None when the broker applied the
    change, else why not (the broker applies a request for one topic whole or not at all)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    if not changes:
        return {}
    deadline = Deadline(kafka.timeout_s)
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(
                    name,
                    value,
                    incremental_operation=AlterConfigOpType.DELETE
                    if value is None
                    else AlterConfigOpType.SET,
                )
                for name, value in sorted(values.items())
            ],
        )
        for topic, values in sorted(changes.items())
    ]
    admin = admin_for(kafka)
    admin.await_controller(min(changes), deadline)
    client = admin.client
    try:
        futures = client.incremental_alter_configs(resources, request_timeout=max(1.0, deadline.remaining()))
    except (KafkaException, ValueError, TypeError) as exc:
        raise RecoveryError(f"IncrementalAlterConfigs: {scrub(str(exc), kafka)}") from None
    out: dict[str, str | None] = {}
    for resource, future in futures.items():
        try:
            future.result(timeout=deadline.remaining() + 5)
            out[resource.name] = None
            log.info("topic %s: set %s", resource.name, dict(changes[resource.name]))
        except KafkaException as exc:
            why = refused_because(error_code(exc), "AlterConfigs", topic=resource.name)
            out[resource.name] = f"IncrementalAlterConfigs {why}"
        except Exception as exc:  # no answer in time: the change may or may not have been applied
            out[resource.name] = (
                f"IncrementalAlterConfigs: no answer within {kafka.timeout_s:g}s ({type(exc).__name__}); "
                "the change may have been applied"
            )
    return out
