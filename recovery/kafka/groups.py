"""Consumer-group offsets on the cluster: read them, judge them, write them (inactive groups only).

The rules we follow are kafka-consumer-groups' (``ConsumerGroupCommand``): offsets are written with
``AdminClient.alter_consumer_group_offsets`` and only while the group is Empty or Dead ("Assignments
can only be reset if the group … is inactive"). The broker does not check that a committed offset is
inside the log (KIP-211 notes and ``OffsetCommit`` handling), so we check it before writing.

Expiry (KIP-211): once a group is Empty, its offsets are deleted after ``offsets.retention.minutes``
(7 days by default). An expired offset is simply absent; :func:`show_group` compares an earlier
export with what the group holds now and names what vanished. The values and judgements are in
:mod:`recovery.kafka.group_values` (pure).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from recovery.errors import GroupActive, KafkaError, RecoveryError
from recovery.kafka._errors import error_code, is_transient, translate
from recovery.kafka._retry import Deadline, backoff, wait_for
from recovery.kafka.admin import KafkaAdmin, admin_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.group_values import (
    GroupChange,
    GroupOffsets,
    GroupReport,
    check_in_log,
    check_inactive,
    expired_offsets,
    group_report,
    read_offsets_file,
)
from recovery.model import TopicPartition

__all__ = [
    "GroupChange",
    "GroupOffsets",
    "GroupReport",
    "expired_offsets",
    "group_offsets",
    "read_offsets_file",
    "set_group_offsets",
    "show_group",
]

log = logging.getLogger(__name__)

# The coordinator refuses a write when a consumer joined between our check and the write.
_BECAME_ACTIVE = frozenset({"UNKNOWN_MEMBER_ID", "NON_EMPTY_GROUP", "REBALANCE_IN_PROGRESS"})


def group_offsets(config: KafkaConfig, group: str) -> GroupOffsets:
    """The committed offsets of ``group``, its state and member count.

    Example::

        group_offsets(KafkaConfig("localhost:9092"), "billing").offsets  # {orders [0]: 1042, ...}
    """
    admin = admin_for(config)
    deadline = Deadline(config.timeout_s)
    state, members, coordinator = _describe_group(admin, group, deadline)
    committed = _committed(admin, group, deadline)
    return GroupOffsets(group, state, members, committed, _retention_minutes(admin, coordinator, deadline))


def show_group(
    config: KafkaConfig, group: str, *, compare: Mapping[TopicPartition, int] | None = None
) -> GroupReport:
    """``group``'s committed offsets judged against each partition's log now (and, with an earlier
    export in ``compare``, the ones that have since EXPIRED).

    Example::

        report = show_group(kafka, "billing", compare=read_offsets_file(open("billing.csv"), "billing.csv"))
        report.exit_code  # 1 when an offset is below the log start, beyond its end, gone or expired
    """
    now = group_offsets(config, group)
    expired = expired_offsets(compare or {}, now)
    wanted = sorted(set(now.offsets) | set(expired))
    ranges = admin_for(config).offset_ranges(wanted) if wanted else {}
    return group_report(now, ranges, expired)


def set_group_offsets(
    config: KafkaConfig,
    group: str,
    offsets: Mapping[TopicPartition, int],
    *,
    execute: bool = True,
) -> GroupChange:
    """Write ``offsets`` as ``group``'s committed offsets; the change carries the group as it was.

    Refused (GroupActive) while the group has members, and (OffsetOutsideLog) for an offset outside
    its partition's [log start offset, high watermark]. With ``execute=False`` only the checks run.
    """
    admin = admin_for(config)
    deadline = Deadline(config.timeout_s)
    state, members, _ = _describe_group(admin, group, deadline)
    before = GroupOffsets(group, state, members, _committed(admin, group, deadline))
    check_inactive(before)
    check_in_log(offsets, admin.offset_ranges(offsets))
    if execute and offsets:
        _alter(admin, group, offsets, deadline)
    return GroupChange(before, dict(sorted(offsets.items())), executed=execute)


# -- IO with the group coordinator ---------------------------------------------------------------------


def _state_name(state: object) -> str:
    # ConsumerGroupState.STABLE -> "Stable", as Kafka's own tools print it.
    name = getattr(state, "name", str(state))
    return "".join(part.capitalize() for part in str(name).split("_"))


def _describe_group(admin: KafkaAdmin, group: str, deadline: Deadline) -> tuple[str, int, int | None]:
    """The group's state, member count and coordinator broker id (None when it has none)."""
    from confluent_kafka import KafkaException

    what = f"describing group {group}"
    attempt = 0
    while True:
        future = admin.client.describe_consumer_groups(
            [group], request_timeout=max(1.0, deadline.remaining())
        )[group]
        try:
            desc = wait_for(future, deadline, what, admin.config)
            coordinator = getattr(desc.coordinator, "id", None)
            return _state_name(desc.state), len(desc.members), coordinator
        except KafkaException as exc:
            if error_code(exc) == "GROUP_ID_NOT_FOUND":
                return "Dead", 0, None
            if not is_transient(exc) or not deadline.allows(attempt):
                raise translate(exc, what, admin.config) from exc
            log.debug("%s (%s): retrying", what, error_code(exc))
            time.sleep(backoff(attempt))
            attempt += 1


def _committed(admin: KafkaAdmin, group: str, deadline: Deadline) -> dict[TopicPartition, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    what = f"reading the offsets of group {group}"
    futures = admin.client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=max(1.0, deadline.remaining())
    )
    try:
        result = wait_for(futures[group], deadline, what, admin.config)
    except KafkaException as exc:
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return {}
        raise translate(exc, what, admin.config) from exc
    committed: dict[TopicPartition, int] = {}
    for ktp in result.topic_partitions or ():
        if ktp.error is not None:
            raise KafkaError(
                f"reading the offset of group {group} for {ktp.topic} [{ktp.partition}]: {ktp.error}"
            )
        if ktp.offset >= 0:
            committed[TopicPartition(ktp.topic, ktp.partition)] = int(ktp.offset)
    return dict(sorted(committed.items()))


def _retention_minutes(admin: KafkaAdmin, coordinator: int | None, deadline: Deadline) -> int | None:
    """``offsets.retention.minutes`` of the group's coordinator, else of any broker (None if it
    cannot be read, e.g. no permission). Asking the coordinator saves a cluster-wide Metadata
    request (all topics) just to learn a broker id."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource

    try:
        if coordinator is None:
            coordinator = min(admin.client.list_topics(timeout=max(0.5, deadline.remaining())).brokers)
        resource = ConfigResource(ConfigResource.Type.BROKER, str(coordinator))
        futures = admin.client.describe_configs([resource], request_timeout=max(1.0, deadline.remaining()))
        entries = wait_for(futures[resource], deadline, "describing a broker", admin.config)
        entry = entries.get("offsets.retention.minutes")
        return int(entry.value) if entry is not None and entry.value is not None else None
    except (KafkaException, ValueError, RecoveryError) as exc:
        log.debug("offsets.retention.minutes not readable: %s", type(exc).__name__)
        return None


def _alter(admin: KafkaAdmin, group: str, offsets: Mapping[TopicPartition, int], deadline: Deadline) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    what = f"setting the offsets of group {group}"
    request = ConsumerGroupTopicPartitions(
        group, [KafkaTP(tp.topic, tp.partition, offset) for tp, offset in sorted(offsets.items())]
    )
    future = admin.client.alter_consumer_group_offsets(
        [request], request_timeout=max(1.0, deadline.remaining())
    )[group]
    try:
        result = wait_for(future, deadline, what, admin.config)
    except KafkaException as exc:
        if error_code(exc) in _BECAME_ACTIVE:
            raise GroupActive(
                f"group {group} became active while its offsets were being set ({error_code(exc)}); "
                "stop its consumers and try again"
            ) from exc
        raise translate(exc, what, admin.config) from exc
    failed = [ktp for ktp in result.topic_partitions or () if ktp.error is not None]
    if failed:
        raise KafkaError(f"{what}: " + "; ".join(f"{k.topic} [{k.partition}]: {k.error}" for k in failed[:5]))
