"""From what the user asked to a :class:`~recovery.core.model.Strategy` (pure: no IO, no clock).

``repair`` and ``ledger repair`` take the reset strategies of ``kafka-consumer-groups
--reset-offsets`` (``--to-datetime``, ``--by-duration``, ``--shift-by``, ``--to-offset``,
``--from-file``) plus ``clamp``. A :class:`StrategyRequest` holds the options as given; a value
option implies its strategy. :func:`resolve_strategy` checks that they fit together and resolves the
time- and file-based kinds into per-partition targets through the callables it is handed (the
Kafka lookup and the file reader are IO, and so is the clock: ``now_ms`` is an argument).

    request = StrategyRequest(by_duration="PT30M")
    strategy = resolve_strategy(request, now_ms=now, time_targets=lookup, file_targets=read_csv)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from recovery.core.model import NoMatch, OnBeyondEnd, Strategy, StrategyKind, TopicPartition, TopicSelection
from recovery.core.specs import parse_timestamp_ms
from recovery.errors import OffsetSpecError

# ISO-8601 durations as kafka-consumer-groups' --by-duration takes them (java.time.Duration.parse,
# without the sign and fraction forms it also allows): PnDTnHnMnS.
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)
# Larger durations reach before the epoch: no Kafka timestamp is that old, so it is a typo.
MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000
_VALUE_OPTIONS = {
    StrategyKind.TO_DATETIME: "to_datetime",
    StrategyKind.BY_DURATION: "by_duration",
    StrategyKind.SHIFT_BY: "shift_by",
    StrategyKind.TO_OFFSET: "to_offset",
    StrategyKind.FROM_FILE: "from_file",
}

TimeTargets = Callable[[int, NoMatch], Mapping[TopicPartition, int]]


class FileTargets(Protocol):
    """Reads the ``topic,partition,offset`` file at ``path``; its messages start with ``name``."""

    def __call__(self, path: str, *, name: str) -> Mapping[TopicPartition, int]: ...


def parse_duration_ms(text: str, name: str = "by_duration") -> int:
    """An ISO-8601 ``PnDTnHnMnS`` duration (as kafka-consumer-groups' ``--by-duration`` takes it), in
    milliseconds; messages start with ``name`` (the CLI passes its flag).

    >>> parse_duration_ms("PT1M30S")
    90000
    """
    match = _DURATION.match(text.strip())
    if not match or text.strip().upper() in ("P", "PT"):
        raise OffsetSpecError(
            f"{name} {text!r}: expected ISO-8601 like PT30M, P1DT2H or PT90S", parameter=name
        )
    # Exact arithmetic: a float turns P<400 digits>D into infinity, which int() refuses (OverflowError).
    days, hours, minutes, seconds = (Fraction(g) if g else Fraction(0) for g in match.groups())
    ms = int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
    if ms > MAX_DURATION_MS:
        raise OffsetSpecError(
            f"{name} {text!r}: longer than 100 years; no record is that old", parameter=name
        )
    return ms


def parse_datetime_ms(text: str, name: str = "to_datetime") -> int:
    """An ISO-8601 date-time (UTC unless it carries an offset) or epoch milliseconds, from 1970 to
    9999 (:func:`recovery.core.specs.check_timestamp_ms`); the words ``earliest``/``latest`` are
    strategies of their own, not times. Messages start with ``name`` (the CLI passes its flag)."""
    return parse_timestamp_ms(
        text, name, "give an ISO-8601 date-time such as 2026-11-22T06:00:00Z, or epoch milliseconds"
    )


@dataclass(frozen=True)
class StrategyRequest:
    """The strategy options as the user gave them (None: not given)."""

    kind: StrategyKind | None = None
    on_beyond_end: OnBeyondEnd | None = None
    to_datetime: str | None = None
    by_duration: str | None = None
    shift_by: int | None = None
    to_offset: int | None = None
    from_file: str | None = None
    no_match: NoMatch = NoMatch.LATEST
    scope: TopicSelection | None = None

    def chosen_kind(self, names: Mapping[str, str] | None = None) -> StrategyKind:
        """The strategy asked for: ``kind``, else the one a value field implies, else clamp.

        Messages name the fields by their names here, or as ``names`` maps them (the CLI passes
        its flags: ``{"kind": "--strategy", "shift_by": "--shift-by", ...}``).
        """

        def name(field: str) -> str:
            return (names or {}).get(field, field)

        given = [kind for kind, attr in _VALUE_OPTIONS.items() if getattr(self, attr) is not None]
        kind = self.kind or (given[0] if len(given) == 1 else StrategyKind.CLAMP)
        if len(given) > 1 or (given and given[0] is not kind):
            named = ", ".join(name(_VALUE_OPTIONS[k]) for k in given)
            raise OffsetSpecError(f"{name('kind')} {kind.value} does not go with {named}")
        if kind in _VALUE_OPTIONS and getattr(self, _VALUE_OPTIONS[kind]) is None:
            raise OffsetSpecError(
                f"{name('kind')} {kind.value} needs a value for {name(_VALUE_OPTIONS[kind])}"
            )
        if self.on_beyond_end is not None and kind is not StrategyKind.CLAMP:
            raise OffsetSpecError(
                f"{name('on_beyond_end')} goes with the clamp strategy, not {kind.value}",
                parameter=name("on_beyond_end"),
            )
        return kind

    def timestamp_ms(self, now_ms: int) -> int | None:
        """The time a time-based strategy starts from: ``to_datetime``, or now minus ``by_duration``."""
        if self.to_datetime is not None:
            return parse_datetime_ms(self.to_datetime)
        if self.by_duration is not None:
            since = now_ms - parse_duration_ms(self.by_duration)
            if since < 0:
                # ListOffsets would read -1/-2/-3 as latest/earliest/max-timestamp, any other
                # negative time as an invalid request: neither is what was asked.
                raise OffsetSpecError(
                    f"by_duration {self.by_duration!r}: reaches back before 1970-01-01; "
                    "no record is that old",
                    parameter="by_duration",
                )
            return since
        return None


def resolve_strategy(
    request: StrategyRequest,
    *,
    now_ms: int,
    time_targets: TimeTargets,
    file_targets: FileTargets,
) -> Strategy:
    """The :class:`Strategy` ``request`` asks for, with time- and file-based targets resolved.

    Raises :class:`~recovery.errors.OffsetSpecError` (exit 2) naming the fields that do not fit.
    """
    kind = request.chosen_kind()
    targets: Mapping[TopicPartition, int] = {}
    if kind in (StrategyKind.TO_DATETIME, StrategyKind.BY_DURATION):
        timestamp_ms = request.timestamp_ms(now_ms)
        assert timestamp_ms is not None  # chosen_kind checked that the value is there
        targets = time_targets(timestamp_ms, request.no_match)
    elif kind is StrategyKind.FROM_FILE:
        assert request.from_file is not None
        targets = file_targets(request.from_file, name="from_file")
    return Strategy(
        kind=kind,
        on_beyond_end=request.on_beyond_end or OnBeyondEnd.LATEST,
        shift=request.shift_by or 0,
        offset=request.to_offset,
        targets=targets,
        scope=request.scope,
    )
