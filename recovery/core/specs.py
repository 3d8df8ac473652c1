"""Parse what users type: topic-partition selections and time specs (pure; no IO, no clock).

Topic-partition selection, as ``kafka-get-offsets --topic-partitions`` (GetOffsetShell's
``([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?`` items, comma-separated) reads it:

* ``orders`` or ``orders.*``   every partition of the topics the regex matches (whole name)
* ``orders:3``                 partition 3
* ``orders:2-5``               partitions 2, 3, 4 (upper bound exclusive, as in GetOffsetShell)
* ``orders:2-`` / ``orders:-5`` from 2 on / below 5
* ``orders:0,1,4``             partitions 0, 1 and 4 (the ``kafka-consumer-groups --topic t:0,1``
  form: a bare number or range after an item with partitions adds to that item)

Time spec, as ``--time`` of ``kafka-get-offsets`` plus ISO-8601 (``--to-datetime``, UTC unless the
value carries an offset, as Kafka's ``Utils.getDateTime`` does): ``earliest``/``-2``, ``latest``/``-1``,
``max-timestamp``/``-3``, a Unix time in milliseconds, or ``2026-11-22T06:00:00[.sss][Z|±hh:mm]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from recovery.core.model import PartitionRange, TopicPattern, TopicSelection
from recovery.errors import OffsetSpecError

__all__ = [
    "PartitionRange",
    "TimeKind",
    "TimeSpec",
    "TopicPattern",
    "TopicSelection",
    "check_timestamp_ms",
    "iso_utc",
    "parse_time",
    "parse_timestamp_ms",
    "parse_topic_partitions",
    "topic_regex",
]

_ITEM = re.compile(r"^(?P<topic>[^:]*)(?::(?P<parts>[0-9]*|[0-9]*-[0-9]*))?$")
_BARE_PARTS = re.compile(r"^(?:[0-9]+|[0-9]*-[0-9]*)$")


def _compile(regex: str, spec: str) -> None:
    try:
        re.compile(regex)
    except re.error as exc:
        raise OffsetSpecError(f"{spec!r}: {regex!r} is not a valid topic regex ({exc})") from exc


def _partition_range(text: str, spec: str) -> PartitionRange:
    if "-" not in text:
        n = int(text)
        return PartitionRange(n, n + 1)
    lo_text, hi_text = text.split("-", 1)
    if not lo_text and not hi_text:
        raise OffsetSpecError(f"{spec!r}: '-' is not a partition range; use N, N-M, N- or -M")
    lo = int(lo_text) if lo_text else 0
    hi = int(hi_text) if hi_text else None
    if hi is not None and hi <= lo:
        raise OffsetSpecError(f"{spec!r}: partition range {text} is empty (the upper bound is exclusive)")
    return PartitionRange(lo, hi)


def parse_topic_partitions(spec: str, *, exclude_internal: bool = False) -> TopicSelection:
    """Parse a ``--topic-partitions`` value (see the module docstring).

    >>> parse_topic_partitions("orders:0,1").patterns[0].partitions
    (PartitionRange(lo=0, hi=1), PartitionRange(lo=1, hi=2))
    """
    patterns: list[TopicPattern] = []
    for raw in spec.split(","):
        item = raw.strip()
        if patterns and patterns[-1].partitions and _BARE_PARTS.match(item):
            last = patterns[-1]
            patterns[-1] = TopicPattern(last.regex, (*last.partitions, _partition_range(item, spec)))
            continue
        match = _ITEM.match(item)
        if match is None or not item:
            raise OffsetSpecError(
                f"{spec!r}: {item!r} is not TOPIC_REGEX[:PARTITIONS] (PARTITIONS: N, N-M, N- or -M)"
            )
        regex, parts = match.group("topic") or ".*", match.group("parts")
        _compile(regex, spec)
        ranges = (_partition_range(parts, spec),) if parts else ()
        if parts == "":
            raise OffsetSpecError(f"{spec!r}: {item!r} ends in ':' but names no partitions")
        patterns.append(TopicPattern(regex, ranges))
    return TopicSelection(tuple(patterns), exclude_internal)


def topic_regex(regex: str, *, exclude_internal: bool = False) -> TopicSelection:
    """A ``--topic REGEX`` selection: every partition of the matching topics."""
    _compile(regex, regex)
    return TopicSelection((TopicPattern(regex),), exclude_internal)


class TimeKind(StrEnum):
    EARLIEST = "earliest"  # ListOffsets -2: log start offset
    LATEST = "latest"  # -1: high watermark, or last stable offset under read_committed
    MAX_TIMESTAMP = "max-timestamp"  # -3 (KIP-734): the record with the largest timestamp
    TIMESTAMP = "timestamp"  # >= 0 (KIP-79): first offset whose timestamp >= T


# The last instant ISO-8601 (and Python's datetime) can write: 9999-12-31T23:59:59.999Z. Kafka's
# ListOffsets takes any 64-bit time, but a later one could not be shown, and anything past a signed
# 64-bit integer cannot even be sent (confluent_kafka raises OverflowError).
MAX_TIMESTAMP_MS = 253_402_300_799_999


def check_timestamp_ms(value: int, name: str = "timestamp_ms") -> int:
    """``value`` when it is a Unix time in milliseconds from 1970-01-01 to 9999-12-31, else
    :class:`~recovery.errors.OffsetSpecError` naming ``name`` and the value.

    A negative value is refused, not sent: ListOffsets reads -1, -2 and -3 as latest, earliest and
    max-timestamp, so a time before 1970 would silently become one of them.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise OffsetSpecError(
            f"{name} {value!r}: not an integer (a Unix time in milliseconds)", parameter=name
        )
    wrong = _out_of_range(value)
    if wrong:
        raise OffsetSpecError(f"{name} {value}: {wrong}", parameter=name)
    return value


def _out_of_range(ms: int) -> str | None:
    """What is wrong with ``ms`` as a time to look up, None when nothing is."""
    if ms < 0:
        return "before 1970-01-01, the earliest time a record can have"
    if ms > MAX_TIMESTAMP_MS:
        return f"after 9999-12-31T23:59:59.999Z ({MAX_TIMESTAMP_MS}), the latest time ISO-8601 can write"
    return None


@dataclass(frozen=True)
class TimeSpec:
    """What ``--time`` asks for; ``timestamp_ms`` is set only for :attr:`TimeKind.TIMESTAMP`, and
    is then checked by :func:`check_timestamp_ms`."""

    kind: TimeKind
    timestamp_ms: int | None = None

    def __post_init__(self) -> None:
        if self.kind is TimeKind.TIMESTAMP:
            if self.timestamp_ms is None:
                raise OffsetSpecError(
                    "timestamp_ms is required for a timestamp lookup", parameter="timestamp_ms"
                )
            check_timestamp_ms(self.timestamp_ms)

    def __str__(self) -> str:
        return str(self.timestamp_ms) if self.kind is TimeKind.TIMESTAMP else self.kind.value

    def label(self) -> str:
        """For people: ``1795327200000 (2026-11-22T06:00:00.000Z)``, or the kind's name."""
        if self.kind is not TimeKind.TIMESTAMP or self.timestamp_ms is None:
            return self.kind.value
        return f"{self.timestamp_ms} ({iso_utc(self.timestamp_ms)})"


def iso_utc(ms: int) -> str:
    """``2026-11-22T06:00:00.000Z`` for a Unix time in milliseconds. A record's CreateTime is
    whatever its producer set: one ISO-8601 cannot write reads ``after 9999-12-31T23:59:59.999Z``
    (or ``before 0001-01-01``)."""
    try:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    except OverflowError:
        return "after 9999-12-31T23:59:59.999Z" if ms > 0 else "before 0001-01-01T00:00:00.000Z"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_NAMED = {
    "earliest": TimeKind.EARLIEST,
    "-2": TimeKind.EARLIEST,
    "latest": TimeKind.LATEST,
    "-1": TimeKind.LATEST,
    "max-timestamp": TimeKind.MAX_TIMESTAMP,
    "-3": TimeKind.MAX_TIMESTAMP,
}


def parse_time(text: str, name: str = "time") -> TimeSpec:
    """Parse a time spec; ``name`` says what ``text`` is in messages (the CLI passes its flag).

    >>> parse_time("2026-11-22T06:00:00")  # no zone: UTC, as kafka-consumer-groups --to-datetime
    TimeSpec(kind=<TimeKind.TIMESTAMP: 'timestamp'>, timestamp_ms=1795327200000)
    """
    value = text.strip()
    named = _NAMED.get(value.lower())
    if named is not None:
        return TimeSpec(named)
    if re.fullmatch(r"-[0-9]+", value):
        raise OffsetSpecError(
            f"{name} {text}: only -1 (latest), -2 (earliest) and -3 (max-timestamp) are supported",
            parameter=name,
        )
    return TimeSpec(
        TimeKind.TIMESTAMP,
        parse_timestamp_ms(
            text,
            name,
            "expected earliest, latest, max-timestamp, epoch milliseconds or ISO-8601 such as "
            "2026-11-22T06:00:00Z",
        ),
    )


def parse_timestamp_ms(text: str, name: str, expected: str) -> int:
    """Epoch milliseconds or an ISO-8601 date-time (UTC unless it carries an offset), checked by
    :func:`check_timestamp_ms`. Messages start with ``name`` (what ``text`` is: the parameter of
    the parser that calls this, or the CLI's flag); ``expected`` says what ``name`` takes when
    ``text`` is neither."""
    value = text.strip()
    if value.isascii() and value.isdigit():
        ms = int(value)
    else:
        try:
            moment = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError as exc:
            raise OffsetSpecError(f"{name} {text!r}: {expected}", parameter=name) from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        ms = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    wrong = _out_of_range(ms)
    if wrong:
        raise OffsetSpecError(f"{name} {text!r}: {wrong}", parameter=name)
    return ms
