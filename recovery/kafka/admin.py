"""Partition offsets, topic identity and metadata from a Kafka cluster (AdminClient edge).

The truth about each partition, as ``ListOffsets`` answers it (see KIP-79, KIP-734 and Kafka's
``OffsetSpec`` javadoc):

* log start offset (``earliest``, -2): the first offset still readable;
* high watermark (``latest``, -1, read_uncommitted): what a read_uncommitted reader can reach;
* last stable offset (``latest`` under read_committed): what a read_committed reader can reach;
* max-timestamp (-3): the offset of the record with the largest timestamp;
* for a timestamp T ≥ 0: the first offset whose timestamp ≥ T, or no answer (offset -1).

Each kind of lookup is one ``AdminClient.list_offsets`` call for all partitions; librdkafka groups
the partitions by leader and sends one ListOffsets request per leader broker, so the number of
requests grows with brokers, not partitions (benchmarks/: 3 requests for 2,000 partitions).

Transient errors (OFFSET_NOT_AVAILABLE after a leader change — KIP-207 —, NOT_LEADER_OR_FOLLOWER,
leader epochs, timeouts) are retried with a bounded backoff until the config's deadline; if a
partition still has no answer, the whole call fails with :class:`~recovery.errors.KafkaUnavailable`:
there are no partial answers.

A partition that does not exist is never omitted: it comes back as :class:`MissingPartition` with
``TOPIC_GONE`` or ``PARTITION_GONE``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from recovery.errors import (
    ConfigError,
    KafkaError,
    KafkaUnavailable,
    NoOffsetForTime,
    RecoveryError,
    TopicNotFound,
)
from recovery.kafka.config import KafkaConfig, is_secret
from recovery.kafka.specs import TimeKind, TimeSpec, TopicPattern, TopicSelection
from recovery.model import Isolation, NoMatch, OffsetRange, TopicPartition

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient


class MissingReason(StrEnum):
    TOPIC_GONE = "TOPIC_GONE"  # the cluster has no topic of that name
    PARTITION_GONE = "PARTITION_GONE"  # the topic exists but has fewer partitions


@dataclass(frozen=True)
class TopicInfo:
    """A topic as the metadata describes it; ``topic_id`` is its KIP-516 id (new on recreation)."""

    name: str
    topic_id: str
    partitions: int
    internal: bool = False


@dataclass(frozen=True)
class MissingPartition:
    """A partition that was asked for and does not exist."""

    tp: TopicPartition
    reason: MissingReason


@dataclass(frozen=True)
class PartitionOffsets:
    """What a partition holds now.

    ``last_stable`` is ``None`` unless read_committed was asked for. ``topic_id`` tells a recreated
    topic from the old one (KIP-516).
    """

    tp: TopicPartition
    log_start: int
    high_watermark: int
    last_stable: int | None
    topic_id: str

    @property
    def end(self) -> int:
        """The end a reader sees: the last stable offset when known, else the high watermark."""
        return self.high_watermark if self.last_stable is None else self.last_stable

    @property
    def range(self) -> OffsetRange:
        return OffsetRange(self.log_start, self.end)


@dataclass(frozen=True)
class TimeLookup:
    """The answer to ``--time`` for one partition.

    ``offset`` is where a reader would start; ``timestamp_ms`` the timestamp of the record found
    (``None`` for earliest/latest, and when nothing matched). ``no_match`` is set when no record
    matched and the policy chose ``offset`` instead.
    """

    tp: TopicPartition
    time: TimeSpec
    offset: int
    timestamp_ms: int | None = None
    no_match: NoMatch | None = None


@dataclass(frozen=True)
class OffsetRow:
    """One row of ``stream-recovery offsets``: a partition's positions and the requested offset."""

    offsets: PartitionOffsets
    lookup: TimeLookup


# -- errors ----------------------------------------------------------------------------------------

_UNREACHABLE = {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "REQUEST_TIMED_OUT", "_RESOLVE"}
_UNREACHABLE |= {"NETWORK_EXCEPTION", "_TIMED_OUT_QUEUE", "_DESTROY"}
# Retried until the deadline (KIP-207 OFFSET_NOT_AVAILABLE; leadership moving; coordinator loading).
_TRANSIENT = _UNREACHABLE | {
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
_GONE = {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"}
# librdkafka answers _NOENT ("No leaders found") when no partition of a ListOffsets call has a
# leader, e.g. when every one of them is missing; the metadata then tells missing from leaderless.
_NO_LEADER = {"_NOENT"}


def error_code(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    return str(name()) if callable(name) else type(exc).__name__


def _reason(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    text = getattr(err, "str", None)
    return str(text()) if callable(text) else str(exc)


def is_transient(exc: BaseException) -> bool:
    err = exc.args[0] if exc.args else None
    retriable = getattr(err, "retriable", None)
    return error_code(exc) in _TRANSIENT or (callable(retriable) and bool(retriable()))


def translate(exc: BaseException, what: str, config: KafkaConfig) -> RecoveryError:
    """Map a confluent_kafka exception to ours (the caller raises it ``from exc``)."""
    code = error_code(exc)
    if code in _UNREACHABLE or is_transient(exc):
        return KafkaUnavailable(
            f"{what}: no answer from the Kafka cluster at {config.bootstrap_servers} within "
            f"{config.timeout_s:g}s ({code}). Check the brokers are up and reachable, and the "
            "--bootstrap-server and --command-config settings."
        )
    if code in _GONE:
        return TopicNotFound(f"{what}: {_reason(exc)}")
    return KafkaError(f"{what}: {code}: {_reason(exc)}")


def scrub(message: str, config: KafkaConfig) -> str:
    for key, value in config.properties.items():
        if is_secret(key) and value:
            message = message.replace(value, "[redacted]")
    return message


def _is_topic_name(regex: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*", regex) is not None


def explicit_partitions(pattern: TopicPattern) -> tuple[int, ...] | None:
    """The partitions a ``topic:N,M`` item names one by one; None if it is a regex or open range."""
    if not _is_topic_name(pattern.regex) or not pattern.partitions:
        return None
    if any(r.hi is None or r.hi - r.lo > 10_000 for r in pattern.partitions):
        return None
    return tuple(sorted({p for r in pattern.partitions for p in range(r.lo, r.hi or r.lo)}))


# -- the client --------------------------------------------------------------------------------------


class Deadline:
    """A monotonic deadline shared by the retries of one call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0


def wait_for(future: Any, deadline: Deadline, what: str, config: KafkaConfig) -> Any:
    """``future.result()`` bounded by the deadline; a future librdkafka never completes is unreachable."""
    import concurrent.futures

    try:
        return future.result(timeout=deadline.remaining() + 5)
    except concurrent.futures.TimeoutError as exc:
        raise KafkaUnavailable(
            f"{what}: no answer from the Kafka cluster at {config.bootstrap_servers} within "
            f"{config.timeout_s:g}s"
        ) from exc


def _backoff(attempt: int) -> float:
    return float(min(2.0, 0.1 * 2**attempt))


class KafkaAdmin:
    """An AdminClient with our timeouts, retries and error mapping. Use :func:`kafka_admin`."""

    def __init__(self, config: KafkaConfig) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        self.config = config
        try:
            self.client: AdminClient = AdminClient(config.client_config())
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(f"Kafka client settings are invalid: {scrub(str(exc), config)}") from None

    # -- metadata ---------------------------------------------------------------------------------

    def topic_names(self, deadline: Deadline | None = None) -> dict[str, bool]:
        """Every topic of the cluster, with whether it is internal."""
        from confluent_kafka import KafkaException

        deadline = deadline or Deadline(self.config.timeout_s)
        attempt = 0
        while True:
            try:
                metadata = self.client.list_topics(timeout=max(0.5, deadline.remaining()))
                return {name: name.startswith("__") for name in metadata.topics}
            except KafkaException as exc:
                if not is_transient(exc) or deadline.remaining() < _backoff(attempt):
                    raise translate(exc, "listing topics", self.config) from exc
                time.sleep(_backoff(attempt))
                attempt += 1

    def describe(
        self, topics: Iterable[str], deadline: Deadline | None = None
    ) -> dict[str, TopicInfo | None]:
        """Describe ``topics`` (partition count, KIP-516 topic id); ``None`` for a missing topic."""
        from confluent_kafka import KafkaException, TopicCollection

        deadline = deadline or Deadline(self.config.timeout_s)
        pending = sorted(set(topics))
        found: dict[str, TopicInfo | None] = {}
        attempt = 0
        while pending:
            futures = self.client.describe_topics(
                TopicCollection(pending), request_timeout=self._request_timeout(deadline)
            )
            retry: list[str] = []
            for name, future in futures.items():
                try:
                    desc = wait_for(future, deadline, f"describing topic {name}", self.config)
                except KafkaException as exc:
                    if error_code(exc) in _GONE:
                        found[name] = None
                    elif is_transient(exc) and deadline.remaining() > _backoff(attempt):
                        retry.append(name)
                    else:
                        raise translate(exc, f"describing topic {name}", self.config) from exc
                else:
                    found[name] = TopicInfo(name, str(desc.topic_id), len(desc.partitions), desc.is_internal)
            pending = retry
            if pending:
                time.sleep(_backoff(attempt))
                attempt += 1
        return found

    def resolve(self, selection: TopicSelection) -> tuple[tuple[TopicPartition, ...], dict[str, TopicInfo]]:
        """The partitions a selection names, sorted, and the topics they belong to.

        Partitions named explicitly (``orders:0,7``) are kept even when they do not exist, so the
        answer can say PARTITION_GONE / TOPIC_GONE instead of leaving them out (as kafka-get-offsets
        does). A selection that matches nothing raises TopicNotFound.
        """
        deadline = Deadline(self.config.timeout_s)
        names = self.topic_names(deadline)
        matched = [n for n, internal in names.items() if selection.matches_topic(n, internal=internal)]
        infos = {n: i for n, i in self.describe(matched, deadline).items() if i is not None}
        wanted = {
            TopicPartition(info.name, p)
            for info in infos.values()
            for p in range(info.partitions)
            if selection.matches(info.name, p, internal=info.internal)
        }
        for pattern in selection.patterns:
            explicit = explicit_partitions(pattern)
            if explicit is None:
                if _is_topic_name(pattern.regex) and pattern.regex not in infos:
                    raise TopicNotFound(
                        f"topic {pattern.regex} does not exist on the cluster at "
                        f"{self.config.bootstrap_servers}"
                    )
                continue
            wanted.update(TopicPartition(pattern.regex, p) for p in explicit)
        if not wanted:
            regexes = ", ".join(p.regex for p in selection.patterns)
            raise TopicNotFound(
                f"no partition of the cluster at {self.config.bootstrap_servers} matches {regexes}"
            )
        return tuple(sorted(wanted)), infos

    # -- ListOffsets --------------------------------------------------------------------------------

    def _request_timeout(self, deadline: Deadline) -> float:
        # One attempt may use a third of the budget, so a slow answer still leaves time to retry.
        return max(1.0, min(deadline.remaining(), max(self.config.timeout_s / 3, 1.0)))

    def list_offsets(
        self,
        queries: Mapping[str, tuple[Mapping[TopicPartition, Any], Isolation]],
        deadline: Deadline,
    ) -> tuple[dict[str, dict[TopicPartition, tuple[int, int]]], set[TopicPartition]]:
        """Run several ListOffsets lookups at once: ``{name: ({tp: OffsetSpec}, isolation)}``.

        Returns ``{name: {tp: (offset, timestamp)}}`` and the partitions the cluster does not know.
        Transient errors are retried until ``deadline``; then KafkaUnavailable.
        """
        from confluent_kafka import IsolationLevel, KafkaException
        from confluent_kafka import TopicPartition as KafkaTP

        levels = {
            Isolation.READ_UNCOMMITTED: IsolationLevel.READ_UNCOMMITTED,
            Isolation.READ_COMMITTED: IsolationLevel.READ_COMMITTED,
        }
        answers: dict[str, dict[TopicPartition, tuple[int, int]]] = {name: {} for name in queries}
        pending = {name: dict(specs) for name, (specs, _iso) in queries.items()}
        gone: set[TopicPartition] = set()
        attempt = 0
        last_error: BaseException | None = None
        while any(pending.values()):
            if attempt and deadline.remaining() < _backoff(attempt - 1):
                assert last_error is not None
                raise self._unavailable(pending, last_error) from last_error
            if attempt:
                time.sleep(_backoff(attempt - 1))
            submitted = {
                name: self.client.list_offsets(
                    {KafkaTP(tp.topic, tp.partition): spec for tp, spec in specs.items()},
                    isolation_level=levels[queries[name][1]],
                    request_timeout=self._request_timeout(deadline),
                )
                for name, specs in pending.items()
                if specs
            }
            for name, futures in submitted.items():
                for ktp, future in futures.items():
                    tp = TopicPartition(ktp.topic, ktp.partition)
                    try:
                        info = wait_for(future, deadline, f"ListOffsets for {tp}", self.config)
                    except KafkaException as exc:
                        if error_code(exc) in _GONE | _NO_LEADER:
                            gone.add(tp)
                            del pending[name][tp]
                        elif is_transient(exc):
                            last_error = exc
                        else:
                            raise translate(exc, f"ListOffsets for {tp}", self.config) from exc
                    else:
                        answers[name][tp] = (int(info.offset), int(info.timestamp))
                        del pending[name][tp]
            attempt += 1
        return answers, gone

    def _unavailable(
        self, pending: Mapping[str, Mapping[TopicPartition, Any]], exc: BaseException
    ) -> KafkaError:
        left = sorted({tp for specs in pending.values() for tp in specs})
        named = ", ".join(str(tp) for tp in left[:3]) + (
            f" and {len(left) - 3} more" if len(left) > 3 else ""
        )
        error = translate(exc, f"offsets of {named}", self.config)
        return error if isinstance(error, KafkaError) else KafkaError(str(error))

    def _missing(
        self, tps: Iterable[TopicPartition], deadline: Deadline
    ) -> dict[TopicPartition, MissingPartition]:
        """Which of ``tps`` (answered "unknown") the metadata confirms missing, and why."""
        tps = sorted(set(tps))
        if not tps:
            return {}
        infos = self.describe({tp.topic for tp in tps}, deadline)
        missing: dict[TopicPartition, MissingPartition] = {}
        for tp in tps:
            info = infos.get(tp.topic)
            if info is None:
                missing[tp] = MissingPartition(tp, MissingReason.TOPIC_GONE)
            elif tp.partition >= info.partitions:
                missing[tp] = MissingPartition(tp, MissingReason.PARTITION_GONE)
        return missing

    def offset_ranges(
        self,
        partitions: Iterable[TopicPartition],
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        *,
        topics: Mapping[str, TopicInfo] | None = None,
    ) -> dict[TopicPartition, PartitionOffsets | MissingPartition]:
        """Log start, high watermark and (read_committed) last stable offset of each partition."""
        rows = self._rows(partitions, TimeSpec(TimeKind.LATEST), isolation, NoMatch.LATEST, topics)
        return {tp: (row.offsets if isinstance(row, OffsetRow) else row) for tp, row in rows.items()}

    def offset_rows(
        self,
        partitions: Iterable[TopicPartition],
        time_spec: TimeSpec,
        isolation: Isolation,
        no_match: NoMatch,
        *,
        topics: Mapping[str, TopicInfo] | None = None,
    ) -> dict[TopicPartition, OffsetRow | MissingPartition]:
        """Each partition's positions (last stable offset always included) and the ``time_spec`` offset."""
        return self._rows(partitions, time_spec, isolation, no_match, topics, always_lso=True)

    def _rows(
        self,
        partitions: Iterable[TopicPartition],
        time_spec: TimeSpec,
        isolation: Isolation,
        no_match: NoMatch,
        topics: Mapping[str, TopicInfo] | None,
        *,
        always_lso: bool = False,
    ) -> dict[TopicPartition, OffsetRow | MissingPartition]:
        from confluent_kafka.admin import OffsetSpec

        tps = sorted(set(partitions))
        deadline = Deadline(self.config.timeout_s)
        infos = dict(topics or {})
        unknown = {tp.topic for tp in tps} - set(infos)
        if unknown:
            infos.update({n: i for n, i in self.describe(unknown, deadline).items() if i is not None})
        with_lso = always_lso or isolation is Isolation.READ_COMMITTED

        queries: dict[str, tuple[dict[TopicPartition, Any], Isolation]] = {
            "earliest": ({tp: OffsetSpec.earliest() for tp in tps}, Isolation.READ_UNCOMMITTED),
            "hw": ({tp: OffsetSpec.latest() for tp in tps}, Isolation.READ_UNCOMMITTED),
        }
        if with_lso:
            queries["lso"] = ({tp: OffsetSpec.latest() for tp in tps}, Isolation.READ_COMMITTED)
        if time_spec.kind is TimeKind.MAX_TIMESTAMP:
            queries["time"] = ({tp: OffsetSpec.max_timestamp() for tp in tps}, isolation)
        elif time_spec.kind is TimeKind.TIMESTAMP:
            assert time_spec.timestamp_ms is not None
            queries["time"] = (
                {tp: OffsetSpec.for_timestamp(time_spec.timestamp_ms) for tp in tps},
                isolation,
            )

        # ListOffsets of different kinds go out together; a DeleteRecords or a commit landing between
        # them can make them disagree (log start > high watermark), so such partitions are read again.
        # A partition answered "unknown" that the metadata still lists (a leader moving, metadata
        # propagating) is asked again too, until the deadline.
        missing: dict[TopicPartition, MissingPartition] = {}
        for attempt in range(1000):
            answers, gone = self.list_offsets(queries, deadline)
            missing = self._missing(gone | {tp for tp in tps if tp.topic not in infos}, deadline)
            unsure = sorted(gone - set(missing))
            if unsure:
                if deadline.remaining() < _backoff(attempt):
                    named = ", ".join(str(tp) for tp in unsure[:3])
                    raise KafkaUnavailable(
                        f"no leader answered for {named} within {self.config.timeout_s:g}s "
                        f"(cluster at {self.config.bootstrap_servers}); try again later"
                    )
                time.sleep(_backoff(attempt))
                continue
            torn = [
                tp
                for tp in tps
                if tp not in gone
                and tp.topic in infos
                and not (
                    answers["earliest"][tp][0]
                    <= answers.get("lso", answers["hw"])[tp][0]
                    <= answers["hw"][tp][0]
                )
            ]
            if not torn or deadline.expired():
                break
            time.sleep(_backoff(attempt))
        result: dict[TopicPartition, OffsetRow | MissingPartition] = dict(missing)
        unmatched: list[TopicPartition] = []
        for tp in tps:
            if tp in result:
                continue
            hw = answers["hw"][tp][0]
            lso = answers["lso"][tp][0] if with_lso else None
            start = answers["earliest"][tp][0]
            offsets = PartitionOffsets(
                tp,
                log_start=start,
                high_watermark=hw,
                last_stable=lso if (always_lso or isolation is Isolation.READ_COMMITTED) else None,
                topic_id=infos[tp.topic].topic_id,
            )
            end = lso if isolation is Isolation.READ_COMMITTED and lso is not None else hw
            if time_spec.kind is TimeKind.EARLIEST:
                lookup = TimeLookup(tp, time_spec, start)
            elif time_spec.kind is TimeKind.LATEST:
                lookup = TimeLookup(tp, time_spec, end)
            else:
                offset, ts = answers["time"][tp]
                if offset >= 0:
                    lookup = TimeLookup(tp, time_spec, offset, ts if ts >= 0 else None)
                else:
                    # KIP-79: -1 means no record at or after T (or the match is not yet readable).
                    unmatched.append(tp)
                    fallback = start if no_match is NoMatch.EARLIEST else end
                    lookup = TimeLookup(tp, time_spec, fallback, None, no_match)
            result[tp] = OffsetRow(offsets, lookup)
        if unmatched and no_match is NoMatch.FAIL:
            raise NoOffsetForTime(tuple(unmatched), time_spec.label())
        return dict(sorted(result.items()))


@contextmanager
def kafka_admin(config: KafkaConfig) -> Iterator[KafkaAdmin]:
    """An admin session: ``with kafka_admin(config) as admin: admin.offset_ranges(tps)``."""
    yield KafkaAdmin(config)


# -- module-level API ---------------------------------------------------------------------------------


def offset_ranges(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> dict[TopicPartition, PartitionOffsets | MissingPartition]:
    """Log start, high watermark and (under read_committed) last stable offset of each partition.

    ``partitions`` is explicit (missing ones come back as :class:`MissingPartition`) or a
    :class:`TopicSelection` resolved against the cluster's metadata. Sorted by topic, partition.

    Example::

        ranges = offset_ranges(KafkaConfig("localhost:9092"), [TopicPartition("orders", 0)])
        ranges[TopicPartition("orders", 0)].range  # OffsetRange(start=0, end=1042)
    """
    admin = KafkaAdmin(config)
    topics: dict[str, TopicInfo] | None = None
    if isinstance(partitions, TopicSelection):
        partitions, topics = admin.resolve(partitions)
    return admin.offset_ranges(partitions, isolation, topics=topics)


def offsets_for_time(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    time_spec: TimeSpec | int,
    *,
    no_match: NoMatch = NoMatch.FAIL,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> dict[TopicPartition, TimeLookup | MissingPartition]:
    """The offset ``time_spec`` maps to in each partition (an int is a timestamp in ms).

    For a timestamp: the first offset whose timestamp ≥ T (KIP-79). A partition with no such record
    gets the ``no_match`` policy's offset and ``TimeLookup.no_match`` set; with ``NoMatch.FAIL``,
    :class:`~recovery.errors.NoOffsetForTime` is raised instead. Never omits a partition.
    """
    spec = TimeSpec(TimeKind.TIMESTAMP, time_spec) if isinstance(time_spec, int) else time_spec
    rows = offset_table(config, partitions, spec, isolation=isolation, no_match=no_match)
    return {tp: (row.lookup if isinstance(row, OffsetRow) else row) for tp, row in rows.items()}


def offset_table(
    config: KafkaConfig,
    partitions: Iterable[TopicPartition] | TopicSelection,
    time_spec: TimeSpec,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    no_match: NoMatch = NoMatch.FAIL,
) -> dict[TopicPartition, OffsetRow | MissingPartition]:
    """What ``stream-recovery offsets`` prints: positions plus the ``time_spec`` offset per partition."""
    admin = KafkaAdmin(config)
    topics: dict[str, TopicInfo] | None = None
    if isinstance(partitions, TopicSelection):
        partitions, topics = admin.resolve(partitions)
    return admin.offset_rows(partitions, time_spec, isolation, no_match, topics=topics)


def topic_ids(config: KafkaConfig, topics: Iterable[str]) -> dict[str, str | None]:
    """The KIP-516 topic id of each topic (``None``: no such topic). A recreated topic has a new id."""
    infos = KafkaAdmin(config).describe(topics)
    return {name: (info.topic_id if info else None) for name, info in sorted(infos.items())}


def describe_topics(config: KafkaConfig, topics: Iterable[str]) -> dict[str, TopicInfo | None]:
    """Partition count, topic id and internal flag of each topic (``None``: no such topic)."""
    return dict(sorted(KafkaAdmin(config).describe(topics).items()))
