"""Consumer-group offsets: read them, write them (only while the group is inactive), spot expiry.

The rules we follow are kafka-consumer-groups' (``ConsumerGroupCommand``): offsets are written with
``AdminClient.alter_consumer_group_offsets`` and only while the group is Empty or Dead ("Assignments
can only be reset if the group … is inactive"). The broker does not check that a committed offset is
inside the log (KIP-211 notes and ``OffsetCommit`` handling), so we check it before writing.

Expiry (KIP-211): once a group is Empty, its offsets are deleted after ``offsets.retention.minutes``
(7 days by default). An expired offset is simply absent; :func:`expired_offsets` compares an earlier
export with what the group holds now and names what vanished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recovery.errors import GroupActive, KafkaError, OffsetOutsideLog, RecoveryError
from recovery.kafka.admin import (
    Deadline,
    KafkaAdmin,
    MissingPartition,
    PartitionOffsets,
    error_code,
    is_transient,
    translate,
    wait_for,
)
from recovery.kafka.config import KafkaConfig
from recovery.model import TopicPartition

# Kafka's group states (ConsumerGroupState / GroupState), as kafka-consumer-groups prints them.
INACTIVE_STATES = frozenset({"Empty", "Dead"})


@dataclass(frozen=True)
class GroupOffsets:
    """A consumer group's committed offsets and whether it is in use.

    ``offsets`` holds only partitions with a committed offset. ``retention_minutes`` is the broker's
    ``offsets.retention.minutes`` when it could be read.
    """

    group: str
    state: str
    members: int
    offsets: Mapping[TopicPartition, int]
    retention_minutes: int | None = None

    @property
    def is_active(self) -> bool:
        return self.members > 0 or self.state not in INACTIVE_STATES


def _state_name(state: object) -> str:
    # ConsumerGroupState.STABLE -> "Stable", as Kafka's own tools print it.
    name = getattr(state, "name", str(state))
    return "".join(part.capitalize() for part in str(name).split("_"))


def _describe_group(admin: KafkaAdmin, group: str, deadline: Deadline) -> tuple[str, int]:
    from confluent_kafka import KafkaException

    attempt = 0
    while True:
        future = admin.client.describe_consumer_groups(
            [group], request_timeout=max(1.0, deadline.remaining())
        )[group]
        try:
            desc = wait_for(future, deadline, f"describing group {group}", admin.config)
            return _state_name(desc.state), len(desc.members)
        except KafkaException as exc:
            if error_code(exc) == "GROUP_ID_NOT_FOUND":
                return "Dead", 0
            if not is_transient(exc) or deadline.remaining() < 0.2 * (attempt + 1):
                raise translate(exc, f"describing group {group}", admin.config) from exc
            attempt += 1


def _committed(admin: KafkaAdmin, group: str, deadline: Deadline) -> dict[TopicPartition, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    futures = admin.client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=max(1.0, deadline.remaining())
    )
    try:
        result = wait_for(futures[group], deadline, f"reading the offsets of group {group}", admin.config)
    except KafkaException as exc:
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return {}
        raise translate(exc, f"reading the offsets of group {group}", admin.config) from exc
    committed: dict[TopicPartition, int] = {}
    for ktp in result.topic_partitions or ():
        if ktp.error is not None:
            raise KafkaError(
                f"reading the offset of group {group} for {ktp.topic} [{ktp.partition}]: {ktp.error}"
            )
        if ktp.offset >= 0:
            committed[TopicPartition(ktp.topic, ktp.partition)] = int(ktp.offset)
    return dict(sorted(committed.items()))


def _retention_minutes(admin: KafkaAdmin, deadline: Deadline) -> int | None:
    """``offsets.retention.minutes`` of a broker (None if it cannot be read, e.g. no permission)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource

    try:
        brokers = admin.client.list_topics(timeout=max(0.5, deadline.remaining())).brokers
        resource = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
        future = admin.client.describe_configs([resource], request_timeout=max(1.0, deadline.remaining()))[
            resource
        ]
        entry = wait_for(future, deadline, "describing a broker", admin.config).get(
            "offsets.retention.minutes"
        )
        return int(entry.value) if entry is not None and entry.value is not None else None
    except (KafkaException, ValueError, RecoveryError):
        return None


def group_offsets(config: KafkaConfig, group: str) -> GroupOffsets:
    """The committed offsets of ``group``, its state and member count.

    Example::

        group_offsets(KafkaConfig("localhost:9092"), "billing").offsets  # {orders [0]: 1042, ...}
    """
    admin = KafkaAdmin(config)
    deadline = Deadline(config.timeout_s)
    state, members = _describe_group(admin, group, deadline)
    return GroupOffsets(
        group, state, members, _committed(admin, group, deadline), _retention_minutes(admin, deadline)
    )


def expired_offsets(before: Mapping[TopicPartition, int], now: GroupOffsets) -> tuple[TopicPartition, ...]:
    """Partitions that had a committed offset in ``before`` (an earlier export) and have none now.

    After ``offsets.retention.minutes`` with the group Empty (KIP-211), or after the group or topic
    was deleted, a group's offsets vanish; a consumer then starts at ``auto.offset.reset``.
    """
    return tuple(sorted(tp for tp in before if tp not in now.offsets))


def check_inactive(now: GroupOffsets) -> None:
    """Raise GroupActive unless the group is Empty or Dead, as kafka-consumer-groups requires."""
    if now.is_active:
        raise GroupActive(
            f"group {now.group} is {now.state} with {now.members} active member(s): offsets can only be "
            "set while the group is inactive (Empty or Dead), as kafka-consumer-groups requires. "
            "Stop its consumers and try again. Nothing was written."
        )


def check_in_log(
    offsets: Mapping[TopicPartition, int],
    ranges: Mapping[TopicPartition, PartitionOffsets | MissingPartition],
) -> None:
    """Raise OffsetOutsideLog for an offset outside [log start, high watermark] or of a gone partition."""
    problems: list[str] = []
    for tp, offset in sorted(offsets.items()):
        current = ranges.get(tp)
        if isinstance(current, MissingPartition) or current is None:
            problems.append(f"{tp} does not exist ({current.reason.value if current else 'not found'})")
        elif not current.log_start <= offset <= current.high_watermark:
            problems.append(
                f"{tp} offset {offset} is outside the log [{current.log_start}, {current.high_watermark}]"
            )
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise OffsetOutsideLog(f"{shown}. Nothing was written.")


def set_group_offsets(
    config: KafkaConfig,
    group: str,
    offsets: Mapping[TopicPartition, int],
    *,
    execute: bool = True,
) -> GroupOffsets:
    """Write ``offsets`` as ``group``'s committed offsets; return the group as it was before.

    Refused (GroupActive) while the group has members, and (OffsetOutsideLog) for an offset outside
    its partition's [log start offset, high watermark]. With ``execute=False`` only the checks run.
    """
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    admin = KafkaAdmin(config)
    deadline = Deadline(config.timeout_s)
    state, members = _describe_group(admin, group, deadline)
    before = GroupOffsets(group, state, members, _committed(admin, group, deadline))
    check_inactive(before)
    check_in_log(offsets, admin.offset_ranges(offsets))
    if not execute or not offsets:
        return before
    request = ConsumerGroupTopicPartitions(
        group, [KafkaTP(tp.topic, tp.partition, offset) for tp, offset in sorted(offsets.items())]
    )
    future = admin.client.alter_consumer_group_offsets(
        [request], request_timeout=max(1.0, deadline.remaining())
    )[group]
    try:
        result = wait_for(future, deadline, f"setting the offsets of group {group}", config)
    except KafkaException as exc:
        if error_code(exc) in ("UNKNOWN_MEMBER_ID", "NON_EMPTY_GROUP", "REBALANCE_IN_PROGRESS"):
            # A consumer joined between our check and the write: the coordinator refuses it too.
            raise GroupActive(
                f"group {group} became active while its offsets were being set ({error_code(exc)}); "
                "stop its consumers and try again"
            ) from exc
        raise translate(exc, f"setting the offsets of group {group}", config) from exc
    failed = [ktp for ktp in result.topic_partitions or () if ktp.error is not None]
    if failed:
        raise KafkaError(
            f"setting the offsets of group {group}: "
            + "; ".join(f"{k.topic} [{k.partition}]: {k.error}" for k in failed[:5])
        )
    return before


def read_offsets_file(lines: Iterable[str], source: str) -> dict[TopicPartition, int]:
    """Parse ``topic,partition,offset`` rows (kafka-consumer-groups ``--export`` / ``--from-file``).

    A header row (``topic,partition,...``) and extra columns (our CSV output) are accepted.
    """
    import csv

    from recovery.errors import InvalidInput

    rows = list(csv.reader(lines))
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    if header[:2] == ["topic", "partition"]:
        names = [name for name in ("offset", "committed_offset") if name in header]
        if not names:
            raise InvalidInput(f"{source}: the header has no offset column ({','.join(header)})")
        column = header.index(names[0])
        rows = rows[1:]
        start = 2
    else:
        column, start = 2, 1
    offsets: dict[TopicPartition, int] = {}
    for number, row in enumerate(rows, start):
        if not row or not "".join(row).strip():
            continue
        try:
            offsets[TopicPartition(row[0].strip(), int(row[1]))] = int(row[column])
        except (IndexError, ValueError) as exc:
            raise InvalidInput(
                f"{source}: line {number} is not topic,partition,offset ({','.join(row)})"
            ) from exc
    return offsets
