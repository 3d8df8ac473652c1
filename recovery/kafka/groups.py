"""Consumer-group offsets on the cluster: read them, judge them, write them (inactive groups only).

The rules we follow are kafka-consumer-groups' (``ConsumerGroupCommand``): offsets are written with
``AdminClient.alter_consumer_group_offsets`` and only while the group is Empty or Dead ("Assignments
can only be reset if the group … is inactive"). The broker does not check that a committed offset is
inside the log (KIP-211 notes and ``OffsetCommit`` handling), so we check it before writing.

Whose group it is: every offset the toolkit commits carries ``stream-recovery:1:<writer>`` in its
commit metadata (``OffsetCommitRequest``'s ``committed_metadata``, stored by the coordinator with the
offset and returned by ``OffsetFetch``; librdkafka/confluent-kafka pass it as
``TopicPartition.metadata``). A group holding commits without it belongs to someone else: writing
into it is refused (GroupNotOurs) unless ``force``, and then its previous offsets are first saved to
a ``topic,partition,offset`` file that ``group set --from-file`` restores. A group with members is
refused even with ``force``: the coordinator rejects the commit (UNKNOWN_MEMBER_ID) and a live
consumer would overwrite it at its next commit anyway.

Expiry (KIP-211): once a group is Empty, its offsets are deleted after ``offsets.retention.minutes``
(7 days by default). An expired offset is simply absent; :func:`show_group` compares an earlier
export with what the group holds now and names what vanished. The values and judgements are in
:mod:`recovery.kafka.group_values` (pure).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from recovery.core.model import TopicPartition
from recovery.errors import GroupActive, InvalidInput, KafkaError, OffsetSpecError, RecoveryError
from recovery.kafka._errors import AUTHORIZATION, error_code, is_transient, needs, not_authorized, translate
from recovery.kafka._retry import Deadline, backoff, wait_for
from recovery.kafka.admin import KafkaAdmin, admin_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.group_values import (
    GroupChange,
    GroupOffsets,
    GroupReport,
    backup_rows,
    check_in_log,
    check_inactive,
    check_known,
    check_ours,
    commit_metadata,
    expired_offsets,
    group_report,
    read_offsets_file,
)
from recovery.kafka.values import TopicInfo

__all__ = [
    "GroupChange",
    "GroupOffsets",
    "GroupReport",
    "default_backup_dir",
    "expired_offsets",
    "group_offsets",
    "load_offsets_file",
    "read_offsets_file",
    "set_group_offsets",
    "show_group",
    "write_backup",
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
    committed, metadata = _committed(admin, group, deadline)
    retention = _retention_minutes(admin, coordinator, deadline)
    return GroupOffsets(group, state, members, committed, retention, metadata)


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
    force: bool = False,
    backup_dir: str | None = None,
    written_by: str = "group set",
) -> GroupChange:
    """Write ``offsets`` as ``group``'s committed offsets, marked as the toolkit's (``written_by``
    names the writer in the commit metadata); the change carries the group as it was.

    Refused, nothing written: GroupActive while the group has members (even with ``force``);
    InvalidInput for a partition the cluster does not have; OffsetOutsideLog for an offset outside
    its partition's [log start offset, high watermark]; GroupNotOurs when the group holds commits the
    toolkit did not write, unless ``force`` -- then, before writing, those offsets are saved to a
    ``topic,partition,offset`` file in ``backup_dir`` (default :func:`default_backup_dir`) named by
    ``GroupChange.backup``. A group with no commits is written as is. With ``execute=False`` only
    the checks run.

    Example::

        change = set_group_offsets(kafka, "billing", {TopicPartition("orders", 0): 42}, force=True)
        change.backup  # '/home/me/.local/state/stream-recovery/group-backups/billing-20261123T150102Z.csv'
    """
    admin = admin_for(config)
    deadline = Deadline(config.timeout_s)
    state, members, _ = _describe_group(admin, group, deadline)
    committed, metadata = _committed(admin, group, deadline)
    before = GroupOffsets(group, state, members, committed, metadata=metadata)
    check_inactive(before)
    if offsets:
        # One DescribeTopics serves the ranges and the Read check (the listener commits each batch).
        infos = admin.describe({tp.topic for tp in offsets}, deadline, operations=True)
        ranges = admin.offset_ranges(offsets, topics={n: i for n, i in infos.items() if i is not None})
        check_known(offsets, ranges)
        check_in_log(offsets, ranges)
        check_ours(before, force=force)
        _check_read(admin.config, group, infos)
    backup = None
    if execute and offsets:
        if before.foreign:
            backup = str(write_backup(before, backup_dir))
            log.info("group %s: its previous offsets are saved in %s", group, backup)
        _alter(admin, group, offsets, commit_metadata(written_by), deadline)
    return GroupChange(before, dict(sorted(offsets.items())), executed=execute, backup=backup)


# -- backups and offsets files (local files) -----------------------------------------------------------


def default_backup_dir() -> Path:
    """Where group backups go without a ``backup_dir``: ``$XDG_STATE_HOME/stream-recovery/group-backups``
    (``~/.local/state/...`` when unset), the XDG base-directory place for state worth keeping."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "stream-recovery" / "group-backups"


def write_backup(before: GroupOffsets, backup_dir: str | os.PathLike[str] | None = None) -> Path:
    """Save ``before``'s committed offsets to a new file ``<group>-<UTC time>.csv`` in ``backup_dir``
    (created if missing) and return its path. Written to a temporary name, flushed to disk, then
    linked into place, so the file is whole or absent and an existing file is never replaced. Any OS
    error is bad input (InvalidInput: the directory is the user's choice) and leaves no file behind."""
    if backup_dir is not None and "://" in str(backup_dir):
        raise InvalidInput(
            f"backup_dir {backup_dir}: group backups go to a local directory", parameter="backup_dir"
        )
    directory = Path(backup_dir) if backup_dir is not None else default_backup_dir()
    # The caller's directory is named as the parameter; the default one as what it is.
    named = (
        f"backup_dir {directory}" if backup_dir is not None else f"{directory} (the default backup directory)"
    )
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", before.group)[:100] or "group"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    data = backup_rows(before).encode()
    temp: Path | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for attempt in range(100):
            target = directory / f"{safe}-{stamp}{f'-{attempt}' if attempt else ''}.csv"
            if not target.exists():
                break
        temp = directory / f".{target.name}.{os.getpid()}.tmp"
        with open(temp, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temp, target)  # fails instead of replacing a file that appeared meanwhile
        os.unlink(temp)
        _fsync_dir(directory)
        return target
    except OSError as exc:
        if temp is not None:
            temp.unlink(missing_ok=True)
        raise InvalidInput(
            f"{named}: cannot write the backup of group {before.group} "
            f"({exc.strerror or type(exc).__name__}). Nothing was written.",
            parameter="backup_dir" if backup_dir is not None else None,
        ) from None


def _fsync_dir(directory: Path) -> None:
    """Make the new directory entry durable (POSIX: a file's fsync does not cover its name)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_offsets_file(path: str, *, name: str = "path") -> dict[TopicPartition, int]:
    """:func:`read_offsets_file` on the file at ``path``, read as bytes so a line that is not UTF-8
    is named exactly. A path that is not a regular file (a directory, a FIFO that would block) or
    cannot be read is OffsetSpecError (exit 2), one line. Messages start with ``name`` (the CLI
    passes its flag)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise OffsetSpecError(f"{name} {path}: not a regular file", parameter=name)
        with open(path, "rb") as handle:
            return read_offsets_file(handle, path, name=name)
    except OSError as exc:
        raise OffsetSpecError(
            f"{name} {path}: cannot read ({exc.strerror or type(exc).__name__})", parameter=name
        ) from None


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
            desc = wait_for(future, deadline, what, admin.config, admin.check_access)
            coordinator = getattr(desc.coordinator, "id", None)
            return _state_name(desc.state), len(desc.members), coordinator
        except KafkaException as exc:
            if error_code(exc) == "GROUP_ID_NOT_FOUND":
                return "Dead", 0, None
            if not is_transient(exc) or not deadline.allows(attempt):
                raise translate(exc, what, admin.config, group=group) from exc
            log.debug("%s (%s): retrying", what, error_code(exc))
            time.sleep(backoff(attempt))
            attempt += 1


def _committed(
    admin: KafkaAdmin, group: str, deadline: Deadline
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """The group's committed offsets and each one's commit metadata (OffsetFetch returns both)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    what = f"reading the offsets of group {group}"
    futures = admin.client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=max(1.0, deadline.remaining())
    )
    try:
        result = wait_for(futures[group], deadline, what, admin.config, admin.check_access)
    except KafkaException as exc:
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return {}, {}
        raise translate(exc, what, admin.config, group=group) from exc
    committed: dict[TopicPartition, int] = {}
    metadata: dict[TopicPartition, str] = {}
    for ktp in result.topic_partitions or ():
        if ktp.error is not None:
            raise KafkaError(
                f"reading the offset of group {group} for {ktp.topic} [{ktp.partition}]: {ktp.error}"
            )
        if ktp.offset >= 0:
            tp = TopicPartition(ktp.topic, ktp.partition)
            committed[tp] = int(ktp.offset)
            metadata[tp] = ktp.metadata or ""
    return dict(sorted(committed.items())), metadata


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
        what = "describing a broker"
        entries = wait_for(futures[resource], deadline, what, admin.config, admin.check_access)
        entry = entries.get("offsets.retention.minutes")
        return int(entry.value) if entry is not None and entry.value is not None else None
    except (KafkaException, ValueError, RecoveryError) as exc:
        log.debug("offsets.retention.minutes not readable: %s", type(exc).__name__)
        return None


def _check_read(config: KafkaConfig, group: str, infos: Mapping[str, TopicInfo | None]) -> None:
    """Refuse before writing when the principal may not Read a topic: Kafka commits the partitions
    of the topics it may Read and refuses the others, which would leave the group half-written.
    (A broker without an authorizer reports no operations: nothing to check.)"""
    for topic, info in sorted(infos.items()):
        allowed = info.operations if info is not None else None
        if allowed is not None and not {"READ", "ALL"} & allowed:
            raise not_authorized(
                f"setting the offsets of group {group} (nothing was written)",
                "TOPIC_AUTHORIZATION_FAILED",
                config,
                f"Read on topic {topic}",
            )


def _alter(
    admin: KafkaAdmin, group: str, offsets: Mapping[TopicPartition, int], metadata: str, deadline: Deadline
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    what = f"setting the offsets of group {group}"
    request = ConsumerGroupTopicPartitions(
        group,
        [
            KafkaTP(tp.topic, tp.partition, offset, metadata=metadata)
            for tp, offset in sorted(offsets.items())
        ],
    )
    future = admin.client.alter_consumer_group_offsets(
        [request], request_timeout=max(1.0, deadline.remaining())
    )[group]
    try:
        result = wait_for(future, deadline, what, admin.config, admin.check_access)
    except KafkaException as exc:
        if error_code(exc) in _BECAME_ACTIVE:
            raise GroupActive(
                f"group {group} became active while its offsets were being set ({error_code(exc)}); "
                "stop its consumers and try again"
            ) from exc
        raise translate(exc, what, admin.config, operation="Read", group=group) from exc
    failed = [ktp for ktp in result.topic_partitions or () if ktp.error is not None]
    refused = [k for k in failed if k.error.name() in AUTHORIZATION]
    if refused:
        # OffsetCommit: Read on the group and Read on each topic (the broker answers per partition).
        k = refused[0]
        code = str(k.error.name())
        acl = needs(code, "Read", topic=str(k.topic), group=group)
        written = len(result.topic_partitions or ()) - len(failed)
        wrote = f"; the offsets of {written} other partitions were written" if written else ""
        raise not_authorized(f"{what} ({k.topic} [{k.partition}]{wrote})", code, admin.config, acl)
    if failed:
        raise KafkaError(f"{what}: " + "; ".join(f"{k.topic} [{k.partition}]: {k.error}" for k in failed[:5]))
