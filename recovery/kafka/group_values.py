"""Consumer-group offsets as values, and the judgements made on them (pure: no IO).

* :class:`GroupOffsets`    a group's committed offsets, state and members, as read;
* :class:`GroupPartition`  one committed offset judged against its partition's log, in the
  toolkit's :class:`~recovery.model.Verdict` words (or ``EXPIRED``: KIP-211 deleted it);
* :class:`GroupReport`     ``group show``: every partition judged, with its exit code;
* :class:`GroupChange`     ``group set``: what was (or would be) written, with its exit code.

The rules are kafka-consumer-groups' (``ConsumerGroupCommand``): offsets are written only while the
group is Empty or Dead, and (our addition: the broker does not check) only inside the log.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from recovery.errors import ExitCode, GroupActive, InvalidInput, OffsetOutsideLog
from recovery.kafka.values import MissingPartition, PartitionOffsets
from recovery.model import TopicPartition, Verdict

# Kafka's group states (ConsumerGroupState / GroupState), as kafka-consumer-groups prints them.
INACTIVE_STATES = frozenset({"Empty", "Dead"})

# Not a Verdict: the group has no committed offset there any more, though an earlier export had one
# (KIP-211 expiry after offsets.retention.minutes with the group Empty, or the group/topic deleted).
EXPIRED = "EXPIRED"


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


def judge(committed: int, available: PartitionOffsets | MissingPartition) -> Verdict:
    """A committed offset against its partition now: inside [log start, high watermark] is OK."""
    if isinstance(available, MissingPartition):
        return Verdict(available.reason.value)
    if committed < available.log_start:
        return Verdict.BELOW_LOG_START
    if committed > available.high_watermark:
        return Verdict.BEYOND_LOG_END
    return Verdict.OK


@dataclass(frozen=True)
class GroupPartition:
    """One partition of a group: its committed offset (``None``: EXPIRED) and the log now."""

    tp: TopicPartition
    committed: int | None
    available: PartitionOffsets | MissingPartition

    @property
    def verdict(self) -> Verdict | None:
        """The committed offset judged against the log; ``None`` when it expired."""
        return None if self.committed is None else judge(self.committed, self.available)

    @property
    def status(self) -> str:
        """A :class:`~recovery.model.Verdict` value, or ``EXPIRED``."""
        return EXPIRED if self.verdict is None else self.verdict.value

    @property
    def lag(self) -> int | None:
        """High watermark minus the committed offset (None when either is unknown)."""
        if self.committed is None or isinstance(self.available, MissingPartition):
            return None
        return self.available.high_watermark - self.committed


@dataclass(frozen=True)
class GroupReport:
    """``group show``: the group and each partition it has (or had in ``expired``), sorted."""

    group: GroupOffsets
    partitions: tuple[GroupPartition, ...]
    expired: tuple[TopicPartition, ...] = ()

    @property
    def needs_action(self) -> bool:
        """An offset below the log start, beyond its end, of a gone partition, or expired."""
        return any(p.status != Verdict.OK.value for p in self.partitions)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.ACTION_NEEDED if self.needs_action else ExitCode.OK


def group_report(
    now: GroupOffsets,
    ranges: Mapping[TopicPartition, PartitionOffsets | MissingPartition],
    expired: Iterable[TopicPartition] = (),
) -> GroupReport:
    """Judge every committed offset of ``now`` and every ``expired`` one against ``ranges``."""
    lost = tuple(sorted(set(expired)))
    wanted = sorted(set(now.offsets) | set(lost))
    partitions = tuple(GroupPartition(tp, now.offsets.get(tp), ranges[tp]) for tp in wanted)
    return GroupReport(now, partitions, lost)


@dataclass(frozen=True)
class GroupChange:
    """``group set``: the group before, the offsets written (or to write), and whether they were."""

    before: GroupOffsets
    offsets: Mapping[TopicPartition, int]
    executed: bool

    @property
    def pending(self) -> tuple[TopicPartition, ...]:
        """Partitions whose committed offset differs from the one to write (none once executed)."""
        if self.executed:
            return ()
        return tuple(
            tp for tp, offset in sorted(self.offsets.items()) if self.before.offsets.get(tp) != offset
        )

    @property
    def exit_code(self) -> ExitCode:
        """1 for a dry run with changes pending (as every other dry run), else 0."""
        return ExitCode.ACTION_NEEDED if self.pending else ExitCode.OK


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
        if current is None:
            problems.append(f"{tp} does not exist (not found)")
        elif isinstance(current, MissingPartition):
            problems.append(f"{tp} does not exist ({current.reason.value})")
        elif judge(offset, current) is not Verdict.OK:
            problems.append(
                f"{tp} offset {offset} is outside the log [{current.log_start}, {current.high_watermark}]"
            )
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise OffsetOutsideLog(f"{shown}. Nothing was written.")


def read_offsets_file(lines: Iterable[str], source: str) -> dict[TopicPartition, int]:
    """Parse ``topic,partition,offset`` rows (kafka-consumer-groups ``--export`` / ``--from-file``).

    A header row (``topic,partition,...``) and extra columns (our CSV output) are accepted.
    """
    try:
        rows = list(csv.reader(lines))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
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
