"""Consumer-group offsets as values, and the judgements made on them (pure: no IO).

* :class:`GroupOffsets`    a group's committed offsets, state and members, as read;
* :class:`GroupPartition`  one committed offset judged against its partition's log, in the
  toolkit's :class:`~recovery.core.model.Verdict` words (or ``EXPIRED``: KIP-211 deleted it);
* :class:`GroupReport`     ``group show``: every partition judged, with its exit code;
* :class:`GroupChange`     ``group set``: what was (or would be) written, with its exit code.

The rules are kafka-consumer-groups' (``ConsumerGroupCommand``): offsets are written only while the
group is Empty or Dead, and (our addition: the broker does not check) only inside the log. Ours too:
every offset the toolkit commits carries :data:`MARKER` in its commit metadata (the free-form string
of ``OffsetCommit``, kept by the broker next to the offset), so a group whose commits lack it is
someone else's and is written only with ``force``, after a backup (:func:`backup_rows`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from recovery.core.model import TopicPartition, Verdict
from recovery.errors import (
    ExitCode,
    GroupActive,
    GroupNotOurs,
    InvalidInput,
    OffsetOutsideLog,
    OffsetSpecError,
)
from recovery.kafka.values import MissingPartition, PartitionOffsets

# Kafka's group states (ConsumerGroupState / GroupState), as kafka-consumer-groups prints them.
INACTIVE_STATES = frozenset({"Empty", "Dead"})

# Not a Verdict: the group has no committed offset there any more, though an earlier export had one
# (KIP-211 expiry after offsets.retention.minutes with the group Empty, or the group/topic deleted).
EXPIRED = "EXPIRED"

# The commit metadata of every offset the toolkit writes starts with this (":1:" versions the form;
# what follows names the writer: "group set", "lag_export", "listener"). Consumers write "" there.
MARKER = "stream-recovery:1:"


def commit_metadata(written_by: str) -> str:
    """The commit metadata the toolkit writes with an offset, e.g. ``stream-recovery:1:group set``."""
    return MARKER + written_by


def is_ours(metadata: str | None) -> bool:
    """Whether an offset's commit metadata says the toolkit wrote it."""
    return bool(metadata) and str(metadata).startswith(MARKER)


@dataclass(frozen=True)
class GroupOffsets:
    """A consumer group's committed offsets and whether it is in use.

    ``offsets`` holds only partitions with a committed offset. ``retention_minutes`` is the broker's
    ``offsets.retention.minutes`` when it could be read. ``metadata`` is each offset's commit metadata
    (absent or ``""`` when the committer left none).
    """

    group: str
    state: str
    members: int
    offsets: Mapping[TopicPartition, int]
    retention_minutes: int | None = None
    metadata: Mapping[TopicPartition, str] = field(default_factory=dict)

    @property
    def is_active(self) -> bool:
        return self.members > 0 or self.state not in INACTIVE_STATES

    @property
    def foreign(self) -> tuple[TopicPartition, ...]:
        """Partitions whose committed offset the toolkit did not write (no :data:`MARKER`)."""
        return tuple(tp for tp in sorted(self.offsets) if not is_ours(self.metadata.get(tp)))


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
        """A :class:`~recovery.core.model.Verdict` value, or ``EXPIRED``."""
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
    """``group set``: the group before, the offsets written (or to write), and whether they were.

    ``backup`` is the file the group's previous offsets were saved to before they were overwritten
    (only when they were not the toolkit's own, i.e. with ``force``; ``None`` otherwise).
    """

    before: GroupOffsets
    offsets: Mapping[TopicPartition, int]
    executed: bool
    backup: str | None = None

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


def check_ours(now: GroupOffsets, *, force: bool) -> None:
    """Raise GroupNotOurs when ``now`` holds offsets the toolkit did not commit, unless ``force``.

    A group with no commits is anybody's to write; one whose commits all carry :data:`MARKER` is the
    toolkit's (a monitor group lag_export keeps, a group restored by ``group set``). Anything else
    belongs to a consumer (or an operator's kafka-consumer-groups run): a typo in the group's name
    must not destroy it.
    """
    foreign = now.foreign
    if not foreign or force:
        return
    shown = ", ".join(f"{tp} at {now.offsets[tp]}" for tp in foreign[:3])
    more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
    raise GroupNotOurs(
        f"group {now.group} has committed offsets stream-recovery did not write ({shown}{more}): "
        "it looks like another application's group. Check the group name; to overwrite them anyway "
        "add `force=True` (their current offsets are backed up first). Nothing was written."
    )


def check_known(
    offsets: Mapping[TopicPartition, int],
    ranges: Mapping[TopicPartition, PartitionOffsets | MissingPartition],
) -> None:
    """Raise InvalidInput naming the partitions to write that do not exist on the cluster."""
    unknown = [
        f"{tp} ({current.reason.value if isinstance(current, MissingPartition) else 'not found'})"
        for tp in sorted(offsets)
        if isinstance(current := ranges.get(tp), MissingPartition) or current is None
    ]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InvalidInput(
            f"no such partition on the cluster: {', '.join(unknown[:5])}{more}. Nothing was written."
        )


def backup_rows(before: GroupOffsets) -> str:
    """The group's committed offsets as ``topic,partition,offset`` lines, no header: the
    kafka-consumer-groups ``--export`` form, which ``group set --from-file`` (and
    ``kafka-consumer-groups --reset-offsets --from-file``) reads back."""
    return "".join(f"{tp.topic},{tp.partition},{offset}\n" for tp, offset in sorted(before.offsets.items()))


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


_DIGITS = re.compile(r"-?[0-9]+")
# Kafka's legal topic names (org.apache.kafka.common.internals.Topic: [a-zA-Z0-9._-], 1-249 chars).
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_OFFSET_COLUMNS = ("offset", "committed_offset")
MAX_OFFSET = 2**63 - 1


def read_offsets_file(
    lines: Iterable[str] | Iterable[bytes], source: str, *, name: str = ""
) -> dict[TopicPartition, int]:
    """Parse ``topic,partition,offset`` rows (kafka-consumer-groups ``--export`` / ``--from-file``),
    strictly: anything else is OffsetSpecError ``SOURCE:LINE: what is wrong`` (exit 2), preceded by
    ``name`` when given (what the rows were given as: a parameter, or the CLI's flag).

    * exactly three cells a row, split on ``,`` and trimmed as kafka-consumer-groups does
      (``ConsumerGroupCommand.parseResetPlan``); blank lines are skipped, a UTF-8 BOM is dropped;
    * or a header naming the columns (``topic,partition,offset``, or ``group show --output csv``'s
      ``topic,partition,committed_offset,...``), then every row has as many cells as the header
      (a row whose ``committed_offset`` is empty, an EXPIRED one, is skipped);
    * UTF-8 (give binary lines to have the bad line named exactly), a legal topic name, a partition
      in [0, 2^31), an offset in [0, 2^63), each topic/partition once, and at least one row.
    """
    try:
        return _offsets(lines, f"{name} {source}" if name else source)
    except OffsetSpecError as exc:
        exc.parameter = name or None  # every message starts with it
        raise


def _offsets(lines: Iterable[str] | Iterable[bytes], label: str) -> dict[TopicPartition, int]:
    layout = _Layout()
    offsets: dict[TopicPartition, int] = {}
    seen: dict[TopicPartition, int] = {}
    number = first = 0
    for number, text in _numbered_lines(lines, label):
        where = f"{label}:{number}"
        cells = [cell.strip() for cell in text.split(",")]
        first = first or number
        if number == first and [cell.lower() for cell in cells[:2]] == ["topic", "partition"]:
            layout = _Layout.of_header([cell.lower() for cell in cells], where)
            continue
        row = layout.row(cells, where)
        if row is None:
            continue
        tp, offset = row
        if tp in seen:
            raise OffsetSpecError(f"{where}: {tp} is also on line {seen[tp]} (one offset per partition)")
        seen[tp] = number
        offsets[tp] = offset
    if not offsets:
        raise OffsetSpecError(f"{label}:{max(number, 1)}: no topic,partition,offset rows")
    return offsets


def _numbered_lines(lines: Iterable[str] | Iterable[bytes], where: str) -> Iterator[tuple[int, str]]:
    """The non-blank lines with their 1-based numbers, decoded as UTF-8 (a leading BOM dropped)."""
    iterator: Iterator[str | bytes] = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            raw = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:  # a text handle decodes ahead: the line is approximate
            raise OffsetSpecError(f"{where}:{number}: not UTF-8 text ({exc.reason})") from None
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise OffsetSpecError(
                    f"{where}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start} of the line)"
                ) from None
        text = raw.rstrip("\r\n")
        if number == 1:
            text = text.removeprefix("\ufeff")
        if text.strip():
            yield number, text


@dataclass(frozen=True)
class _Layout:
    """Where a row's cells are: three without a header, else as the header names them."""

    width: int = 3
    column: int = 2  # the offset's
    optional: bool = False  # group show's committed_offset: empty in an EXPIRED row

    @classmethod
    def of_header(cls, header: list[str], where: str) -> _Layout:
        names = [name for name in _OFFSET_COLUMNS if name in header]
        if not names:
            raise OffsetSpecError(f"{where}: the header has no offset column ({','.join(header)})")
        return cls(len(header), header.index(names[0]), names[0] == "committed_offset")

    def row(self, cells: list[str], where: str) -> tuple[TopicPartition, int] | None:
        """One row's partition and offset (None: an EXPIRED row of a ``group show`` export)."""
        if len(cells) != self.width:
            raise OffsetSpecError(
                f"{where}: {len(cells)} column(s), expected {self.width} (topic,partition,offset)"
            )
        topic, partition_text, offset_text = cells[0], cells[1], cells[self.column]
        if self.optional and not offset_text:
            return None
        if not _TOPIC.fullmatch(topic):
            raise OffsetSpecError(f"{where}: {_shown(topic)} is not a Kafka topic name")
        partition = _integer(partition_text, "partition", where)
        if not 0 <= partition < 2**31:
            raise OffsetSpecError(f"{where}: partition {partition} is out of range [0, 2^31)")
        offset = _integer(offset_text, "offset", where)
        if not 0 <= offset <= MAX_OFFSET:
            raise OffsetSpecError(
                f"{where}: offset {offset} of {topic} [{partition}] is out of range [0, 2^63)"
            )
        return TopicPartition(topic, partition), offset


def _integer(text: str, name: str, where: str) -> int:
    """A decimal integer (ASCII digits, optional minus: no ``+``, ``_`` or other scripts' digits
    that ``int()`` would take); more than 20 digits is out of any range we take."""
    if not _DIGITS.fullmatch(text):
        raise OffsetSpecError(f"{where}: {name} {_shown(text)} is not an integer")
    if len(text) > 21:
        raise OffsetSpecError(f"{where}: {name} {_shown(text)} is out of range")
    return int(text)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")
