"""ListOffsets answers -> partition positions and time lookups (pure: no IO, no clock).

The truth about each partition, as ``ListOffsets`` answers it (KIP-79, KIP-734, Kafka's
``OffsetSpec`` javadoc): ``earliest`` is the log start offset, ``latest`` the high watermark under
read_uncommitted and the last stable offset under read_committed, ``max-timestamp`` the record with
the largest timestamp, and a timestamp T the first offset whose timestamp >= T, or no answer (-1).

The admin client asks the :func:`queries` together and hands the answers back here:
:func:`torn` names partitions whose answers disagree (a DeleteRecords or a commit landed between
them: ask again), :func:`offset_rows` builds the rows and applies the no-match policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from recovery.core.model import Isolation, NoMatch, TopicPartition
from recovery.core.specs import TimeKind, TimeSpec
from recovery.errors import NoOffsetForTime
from recovery.kafka.values import OffsetRow, PartitionOffsets, TimeLookup

# One lookup: what to ask (a TimeSpec is exactly Kafka's OffsetSpec) under which isolation level.
Query = tuple[TimeSpec, Isolation]
# {query name: {partition: (offset, timestamp)}}, as ListOffsets answered.
Answers = Mapping[str, Mapping[TopicPartition, tuple[int, int]]]

EARLIEST, HIGH_WATERMARK, LAST_STABLE, TIME = "earliest", "hw", "lso", "time"


def queries(time_spec: TimeSpec, isolation: Isolation, *, with_lso: bool) -> dict[str, Query]:
    """The lookups a row needs: log start, high watermark, the last stable offset when ``with_lso``,
    and the ``time_spec`` lookup when it is not simply earliest or latest."""
    wanted: dict[str, Query] = {
        EARLIEST: (TimeSpec(TimeKind.EARLIEST), Isolation.READ_UNCOMMITTED),
        HIGH_WATERMARK: (TimeSpec(TimeKind.LATEST), Isolation.READ_UNCOMMITTED),
    }
    if with_lso:
        wanted[LAST_STABLE] = (TimeSpec(TimeKind.LATEST), Isolation.READ_COMMITTED)
    if time_spec.kind in (TimeKind.MAX_TIMESTAMP, TimeKind.TIMESTAMP):
        wanted[TIME] = (time_spec, isolation)
    return wanted


def torn(tps: Iterable[TopicPartition], answers: Answers) -> list[TopicPartition]:
    """Partitions answered in every query whose answers disagree (log start <= LSO <= high
    watermark does not hold): something changed between the lookups, so they are read again."""
    starts, hws = answers[EARLIEST], answers[HIGH_WATERMARK]
    ends = answers.get(LAST_STABLE, hws)
    out = []
    for tp in tps:  # one dict lookup per answer and partition (thousands of partitions)
        start, hw = starts.get(tp), hws.get(tp)
        end = hw if ends is hws else ends.get(tp)
        if start is not None and hw is not None and end is not None and not start[0] <= end[0] <= hw[0]:
            out.append(tp)
    return out


def offset_row(
    tp: TopicPartition,
    answers: Answers,
    topic_id: str,
    time_spec: TimeSpec,
    isolation: Isolation,
    no_match: NoMatch,
) -> OffsetRow:
    """The row of one partition present in every answer (the last stable offset shown when asked)."""
    start, hw = answers[EARLIEST][tp][0], answers[HIGH_WATERMARK][tp][0]
    lsos = answers.get(LAST_STABLE)
    lso = lsos[tp][0] if lsos is not None else None
    offsets = PartitionOffsets(tp, log_start=start, high_watermark=hw, last_stable=lso, topic_id=topic_id)
    end = lso if isolation is Isolation.READ_COMMITTED and lso is not None else hw
    return OffsetRow(offsets, _lookup(tp, answers, time_spec, start, end, no_match))


def partition_offsets(
    tps: Iterable[TopicPartition], answers: Answers, topic_ids: Mapping[str, str]
) -> dict[TopicPartition, PartitionOffsets]:
    """Each of ``tps``' positions (every one answered), in the order of ``tps``: :func:`offset_row`'s
    ``offsets`` without a time lookup."""
    starts, hws, lsos = answers[EARLIEST], answers[HIGH_WATERMARK], answers.get(LAST_STABLE)
    return {
        tp: PartitionOffsets(
            tp, starts[tp][0], hws[tp][0], lsos[tp][0] if lsos is not None else None, topic_ids[tp.topic]
        )
        for tp in tps
    }


def _lookup(
    tp: TopicPartition, answers: Answers, time_spec: TimeSpec, start: int, end: int, no_match: NoMatch
) -> TimeLookup:
    if time_spec.kind is TimeKind.EARLIEST:
        return TimeLookup(tp, time_spec, start)
    if time_spec.kind is TimeKind.LATEST:
        return TimeLookup(tp, time_spec, end)
    offset, ts = answers[TIME][tp]
    if offset >= 0:
        return TimeLookup(tp, time_spec, offset, ts if ts >= 0 else None)
    # KIP-79: -1 means no record at or after T (or the match is not yet readable).
    fallback = start if no_match is NoMatch.EARLIEST else end
    return TimeLookup(tp, time_spec, fallback, None, no_match)


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)  # by topic, then partition


def offset_rows(
    tps: Iterable[TopicPartition],
    answers: Answers,
    topic_ids: Mapping[str, str],
    time_spec: TimeSpec,
    isolation: Isolation,
    no_match: NoMatch,
) -> dict[TopicPartition, OffsetRow]:
    """The rows of ``tps`` (every one answered), sorted; NoOffsetForTime when a time lookup found
    nothing in some partitions and ``no_match`` is FAIL."""
    rows = {
        tp: offset_row(tp, answers, topic_ids[tp.topic], time_spec, isolation, no_match)
        for tp in sorted(tps, key=_tp_key)
    }
    unmatched = tuple(tp for tp, row in rows.items() if row.lookup.no_match is not None)
    if unmatched and no_match is NoMatch.FAIL:
        raise NoOffsetForTime(unmatched, time_spec.label())
    return rows
