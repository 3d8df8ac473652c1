"""The AdminClient edge: topic metadata and ListOffsets, with our timeouts, retries and errors.

IO only: the answers become values in :mod:`recovery.kafka.answers` and
:mod:`recovery.kafka.selection` (pure). One client per :class:`KafkaConfig` serves a whole command:
:func:`admin_for` hands out the process's shared :class:`KafkaAdmin` for a config, so a
``validate`` that asks for metadata, ranges and time lookups opens one set of connections.

Each kind of lookup is one ``AdminClient.list_offsets`` call per 200 partitions of one leader, as
the topics' last description said (:data:`LIST_OFFSETS_LEADER_CHUNK`), or per 500 partitions of
topics not described (:data:`LIST_OFFSETS_CHUNK`): librdkafka's cost per call grows with the square
of its partitions. Every call of every lookup is sent before any answer is awaited; librdkafka
groups a call's partitions by leader and sends one ListOffsets request per leader broker: log start
+ high watermark (+ last stable offset under read_committed, + the time lookup for a timestamp, +
the recreation evidence of ``validate``) = 2 to 4 requests per broker per 200 partitions, all in
flight at once (benchmarks/README.md counts them).
Metadata: one DescribeTopics (Metadata) request for named topics; a regex selection first lists
the cluster's topics (one more: the listing has the partition counts, but only DescribeTopics
carries the topic ids), and its DescribeTopics goes out with the ListOffsets requests.

Transient errors (OFFSET_NOT_AVAILABLE after a leader change — KIP-207 —, NOT_LEADER_OR_FOLLOWER,
leader epochs, timeouts) are retried with a bounded backoff until the config's deadline; if a
partition still has no answer, the whole call fails with :class:`~recovery.errors.KafkaUnavailable`:
there are no partial answers. A partition that does not exist is never omitted: it comes back as
:class:`~recovery.kafka.values.MissingPartition` with ``TOPIC_GONE`` or ``PARTITION_GONE``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from recovery.core.model import Isolation, NoMatch, TopicPartition, TopicSelection
from recovery.core.specs import TimeKind, TimeSpec, check_timestamp_ms
from recovery.errors import ConfigError, KafkaError, KafkaUnavailable
from recovery.kafka import answers as ans
from recovery.kafka._errors import (
    GONE,
    NO_LEADER,
    error_code,
    error_text,
    is_refusal,
    is_transient,
    refused_access,
    scrub,
    translate,
)
from recovery.kafka._retry import Deadline, backoff, wait_for
from recovery.kafka.config import KafkaConfig
from recovery.kafka.selection import exact_names, selected_partitions
from recovery.kafka.values import (
    ListedTopic,
    MissingPartition,
    MissingReason,
    OffsetRow,
    PartitionOffsets,
    TopicInfo,
    kafka_topic_id,
)

if TYPE_CHECKING:
    from confluent_kafka import KafkaError as RdKafkaError
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as KafkaTP
    from confluent_kafka.admin import (
        AdminClient,
        ClusterMetadata,
        ListOffsetsResultInfo,
        OffsetSpec,
        TopicDescription,
    )

    # One ListOffsets call's answer: each partition's result, or the error it got instead.
    OffsetsAnswer = Mapping[KafkaTP, ListOffsetsResultInfo | RdKafkaError]
    # A call's partitions, and its answer or why the whole call failed.
    CallAnswer = tuple[list[KafkaTP], OffsetsAnswer | KafkaException]

log = logging.getLogger(__name__)

# Partitions per ``list_offsets`` call of topics not described (their leaders not known here).
# librdkafka's cost per call grows with the square of its partitions (measured with librdkafka 2.x:
# 2,000 partitions take ~25 ms of CPU to submit and ~100 ms more until the answer; four calls of
# 500, sent together, ~10 ms and ~30 ms), so a lookup of many partitions is split, all in flight at
# once (benchmarks/README.md).
LIST_OFFSETS_CHUNK = 500
# Partitions per call when they share a leader (as last described): one request a call. librdkafka
# merges each answer into its call's result by a linear search (rd_kafka_ListOffsets_response_merge,
# librdkafka 2.x), so a call of n partitions costs ~n²/2 string comparisons: at 500 they were a
# seventh of ``fleet serve``'s CPU at 100,000 partitions. At 200 of one leader: two fifths of the
# comparisons, and fewer requests (a lookup of 100,000 partitions on 7 brokers: 500, not 1,400).
LIST_OFFSETS_LEADER_CHUNK = 200

# librdkafka's RD_KAFKA_OFFSET_INVALID (confluent_kafka.OFFSET_INVALID): in a ListOffsets answer, no
# offset at all (its partition's leader died under the request), never a position.
OFFSET_INVALID = -1001

# {timestamp: {partition: first offset whose record is at least that new, None if none is}}
FirstOffsets = dict[int, dict[TopicPartition, int | None]]
# Topics known before a lookup: described (TopicInfo), or only listed by a regex selection
# (ListedTopic: described during the lookup, and left out if gone by then).
Topics = Mapping[str, TopicInfo | ListedTopic]

__all__ = ["KafkaAdmin", "admin_for", "kafka_admin"]


class _Answered(NamedTuple):
    """One round of lookups, consistent, before rows are made of it."""

    present: list[TopicPartition]  # answered in every lookup, sorted
    answers: ans.Answers
    topic_ids: dict[str, str]
    missing: dict[TopicPartition, MissingPartition]  # the ones to report
    found: FirstOffsets  # the time lookups of ``times``


REFUSAL_FRESH_S = 15.0  # see KafkaAdmin.check_access
# A broker that failed a connection this recently may be the controller the client waits for: see
# KafkaAdmin.await_controller (librdkafka says so again at each reconnect, at least every 10 s).
BROKER_DOWN_FRESH_S = 60.0


class KafkaAdmin:
    """An AdminClient with our timeouts, retries and error mapping. Use :func:`admin_for`."""

    def __init__(self, config: KafkaConfig) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        self.config = config
        # Why the cluster refused our credentials, and when (monotonic) it last said so.
        self._refused: tuple[str, float] | None = None
        self._broker_down_at = -1e18  # when (monotonic) a connection to a broker last failed
        # topic -> each partition's leader (broker id; -1: none) when last described
        self._leaders: dict[str, tuple[int, ...]] = {}
        try:
            # librdkafka's admin client is a producer, whose metadata requests for a topic by name
            # create it where the brokers allow (auto.create.topics.enable): never ours.
            settings: dict[str, Any] = {
                **config.client_config(),
                "allow.auto.create.topics": False,
                "error_cb": self._on_error,
            }
            self.client: AdminClient = AdminClient(settings)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigError(
                f"Kafka client settings are invalid: {scrub(error_text(exc), config)}"
            ) from None

    def _on_error(self, err: Any) -> None:
        """librdkafka's error events (served by ``poll``): a refused SASL or TLS handshake is said
        only here; its requests would wait for the whole timeout."""
        if is_refusal(err.name(), str(err.str())):
            self._refused = (scrub(str(err.str()), self.config), time.monotonic())
        elif err.name() in ("_TRANSPORT", "_ALL_BROKERS_DOWN"):
            self._broker_down_at = time.monotonic()

    def await_controller(self, topic: str, deadline: Deadline) -> None:
        """Before a request librdkafka sends to the controller (DescribeTopics, DescribeConfigs,
        IncrementalAlterConfigs): while a broker is failing connections, wait until the broker the
        client takes for the controller takes one.

        In KRaft the "controller" of a Metadata answer is any live broker, chosen at random, and
        librdkafka sends such requests to the last one named. Once that broker is dead it waits for
        it, reconnecting in a tight loop (7,163 connects and 6.4 s of CPU in 30 s, measured), until
        some metadata names another; none comes while it waits, so the request waits out its
        timeout. A Metadata request for ``topic`` (answered by a live broker) names one, once the
        dead broker is fenced (``broker.session.timeout.ms``). Nothing is asked while no broker has
        failed a connection lately (:data:`BROKER_DOWN_FRESH_S`); a broker that stays down (a
        bootstrap address of a retired node) costs one Metadata request and one TCP connect each
        time."""
        self.client.poll(0)  # the error events say whether a broker failed lately
        if time.monotonic() - self._broker_down_at > BROKER_DOWN_FRESH_S:
            return
        for attempt in itertools.count():
            metadata = self._fresh_metadata(topic, deadline)
            if metadata is None:
                return  # the request itself will say what is wrong
            controller = metadata.brokers.get(metadata.controller_id)
            if controller is None or not _refuses(str(controller.host), controller.port, deadline):
                return
            if not deadline.allows(attempt):
                return
            where = _address(str(controller.host), controller.port)
            self._pause(attempt, f"the controller {where} refuses connections")

    def _fresh_metadata(self, topic: str, deadline: Deadline) -> ClusterMetadata | None:
        """A Metadata answer for ``topic`` (it also tells librdkafka the leaders and the controller
        named now); None when none came within the deadline (at most 5 s)."""
        from confluent_kafka import KafkaException

        try:
            return self.client.list_topics(topic, timeout=max(0.1, min(5.0, deadline.remaining())))
        except KafkaException:
            return None

    def check_access(self) -> None:
        """Raise KafkaAccessDenied while the cluster refuses our credentials (polls the client's
        error events). librdkafka tries again at least every reconnect.backoff.max.ms (10 s) and
        says so each time: a refusal older than :data:`REFUSAL_FRESH_S` is history (credentials
        fixed since, in a long-running process such as ``fleet serve``)."""
        self.client.poll(0)
        refused = self._refused
        if refused is not None and time.monotonic() - refused[1] < REFUSAL_FRESH_S:
            raise refused_access(refused[0], self.config)

    # -- metadata ---------------------------------------------------------------------------------

    def ping(self, deadline: Deadline | None = None) -> None:
        """Whether the cluster answers (and takes the credentials): one Metadata request for its
        brokers only (librdkafka's DescribeCluster), no topic listed, so it costs the same on a
        cluster of 100 partitions or of 100,000 (listing every topic took ~0.5 s of CPU there);
        raises as :meth:`listed_topics` does."""
        what = "describing the cluster"

        def ask(window: float, deadline: Deadline) -> None:
            future = self.client.describe_cluster(request_timeout=window)
            wait_for(future, deadline, what, self.config, self.check_access)

        self._in_slices(what, ask, deadline)

    def topic_names(self, deadline: Deadline | None = None) -> dict[str, bool]:
        """Every topic of the cluster, with whether it is internal."""
        return {name: topic.internal for name, topic in self.listed_topics(deadline).items()}

    def listed_topics(self, deadline: Deadline | None = None) -> dict[str, ListedTopic]:
        """Every topic of the cluster with its partition count (one Metadata request; no topic ids)."""

        def ask(window: float, _deadline: Deadline) -> dict[str, ListedTopic]:
            metadata = self.client.list_topics(timeout=window)
            return {
                name: ListedTopic(name, len(topic.partitions), name.startswith("__"))
                for name, topic in metadata.topics.items()
            }

        return self._in_slices("listing topics", ask, deadline)

    def _in_slices(self, what: str, ask: Callable[[float, Deadline], _T], deadline: Deadline | None) -> _T:
        """``ask(window, deadline)`` in growing slices (2 s, 4 s, ...) until the config's timeout:
        between them the client's error events are looked at, so refused credentials are said at
        once, not after the whole timeout; transient errors are asked again."""
        from confluent_kafka import KafkaException

        deadline = deadline or Deadline(self.config.timeout_s)
        for attempt in itertools.count():
            try:
                return ask(max(0.5, min(deadline.remaining(), 2.0 * 2**attempt)), deadline)
            except KafkaException as exc:
                self.check_access()
                if not is_transient(exc) or not deadline.allows(attempt):
                    raise translate(exc, what, self.config) from exc
                self._pause(attempt, what, exc)
        raise AssertionError("unreachable")

    def describe(
        self, topics: Iterable[str], deadline: Deadline | None = None, *, operations: bool = False
    ) -> dict[str, TopicInfo | None]:
        """Describe ``topics`` (partition count, KIP-516 topic id; with ``operations``, what the
        principal may do with each); ``None`` for a missing topic."""
        return self._describing(topics, deadline or Deadline(self.config.timeout_s), operations)()

    def _describing(
        self, topics: Iterable[str], deadline: Deadline, operations: bool = False
    ) -> Callable[[], dict[str, TopicInfo | None]]:
        """Send the DescribeTopics request for ``topics`` now; the function returned waits for the
        answer (asking again after transient errors): :meth:`describe`'s."""
        pending = sorted(set(topics))
        futures = self._send_describe(pending, deadline, operations, 0) if pending else {}

        def answer() -> dict[str, TopicInfo | None]:
            found: dict[str, TopicInfo | None] = {}
            retry = self._described(futures, found, deadline, 0)
            for attempt in itertools.count(1):
                if not retry:
                    break
                self._pause(attempt - 1, f"describing {len(retry)} topic(s)")
                again = self._send_describe(retry, deadline, operations, attempt)
                retry = self._described(again, found, deadline, attempt)
            return found

        return answer

    def _send_describe(
        self, names: list[str], deadline: Deadline, operations: bool = False, attempt: int = 0
    ) -> dict[str, concurrent.futures.Future[TopicDescription]]:
        """Send DescribeTopics (attempt ``attempt``, from 0). It waits 2 s, doubled at each attempt,
        plus 1 s per 100 topics, within a third of the budget: a controller that died under it is
        waited for in a busy loop (:meth:`await_controller`, run before each)."""
        from confluent_kafka import TopicCollection

        self.await_controller(names[0], deadline)
        timeout = min(self._request_timeout(deadline), 2.0 * 2 ** min(attempt, 8) + len(names) / 100)
        collection = TopicCollection(names)
        return dict(
            self.client.describe_topics(
                collection, request_timeout=timeout, include_authorized_operations=operations
            )
        )

    def _described(
        self,
        futures: Mapping[str, concurrent.futures.Future[TopicDescription]],
        found: dict[str, TopicInfo | None],
        deadline: Deadline,
        attempt: int,
    ) -> list[str]:
        """One DescribeTopics round's answers into ``found``; the names to ask again (transient)."""
        from confluent_kafka import KafkaException

        retry: list[str] = []
        for name, future in futures.items():
            what = f"describing topic {name}"
            try:
                desc = wait_for(future, deadline, what, self.config, self.check_access)
            except KafkaException as exc:
                if error_code(exc) in GONE:
                    found[name] = None
                    self._leaders.pop(name, None)
                elif is_transient(exc) and deadline.allows(attempt):
                    retry.append(name)
                else:
                    raise translate(exc, what, self.config, topic=name) from exc
            else:
                topic_id = kafka_topic_id(str(desc.topic_id))
                # where each partition's ListOffsets goes (_send_list_offsets groups them by it)
                leaders = {p.id: p.leader.id if p.leader is not None else -1 for p in desc.partitions}
                self._leaders[name] = tuple(leaders.get(p, -1) for p in range(len(desc.partitions)))
                allowed = desc.authorized_operations
                ops = None if allowed is None else frozenset(op.name for op in allowed)
                found[name] = TopicInfo(name, topic_id, len(desc.partitions), desc.is_internal, ops)
        return retry

    def timestamp_types(self, topics: Iterable[str]) -> dict[str, str]:
        """Each topic's ``message.timestamp.type`` (``CreateTime``: the producer's clock, or
        ``LogAppendTime``: the broker's), in one DescribeConfigs request. A topic whose answer
        could not be read is left out (logged): callers treat it as not known."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ConfigResource

        names = sorted(set(topics))
        if not names:
            return {}
        deadline = Deadline(self.config.timeout_s)
        self.await_controller(names[0], deadline)
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
        found: dict[str, str] = {}
        try:
            futures = self.client.describe_configs(resources, request_timeout=self._request_timeout(deadline))
            for resource, future in futures.items():
                entries = wait_for(
                    future, deadline, f"DescribeConfigs of {resource.name}", self.config, self.check_access
                )
                entry = entries.get("message.timestamp.type")
                if entry is not None and entry.value:
                    found[resource.name] = str(entry.value)
        except (KafkaException, KafkaError, ValueError, TypeError) as exc:
            log.warning("message.timestamp.type of %s not known: %s", ", ".join(names), exc)
        return found

    def resolve(
        self, selection: TopicSelection
    ) -> tuple[tuple[TopicPartition, ...], dict[str, TopicInfo | ListedTopic]]:
        """The partitions a selection names, sorted, and the topics described on the way (see
        :func:`recovery.kafka.selection.selected_partitions`): pass them on as ``topics=``.

        Literal names are described (the one metadata request). A regex selection is matched
        against the topic listing, which has the partition counts but not the topic ids: its topics
        come back listed (:class:`ListedTopic`), and the offset lookup describes them while its
        ListOffsets are in flight."""
        deadline = Deadline(self.config.timeout_s)
        exact = exact_names(selection)
        if exact is not None:
            described = self.describe(exact, deadline)
            infos: dict[str, TopicInfo | ListedTopic] = {
                n: i
                for n, i in described.items()
                if i is not None and selection.matches_topic(n, internal=n.startswith("__"))
            }
            return selected_partitions(selection, infos, self.config.bootstrap_servers), infos
        listed = self.listed_topics(deadline)
        matched: dict[str, TopicInfo | ListedTopic] = {
            n: t for n, t in listed.items() if selection.matches_topic(n, internal=t.internal)
        }
        return selected_partitions(selection, matched, self.config.bootstrap_servers), matched

    # -- ListOffsets --------------------------------------------------------------------------------

    def offset_ranges(
        self,
        partitions: Iterable[TopicPartition],
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        *,
        topics: Topics | None = None,
    ) -> dict[TopicPartition, PartitionOffsets | MissingPartition]:
        """Log start, high watermark and (read_committed) last stable offset of each partition.

        ``topics``: the partitions' topics already described (else they are described here)."""
        ranges, _ = self.ranges_and_times(partitions, isolation, {}, topics=topics)
        return ranges

    def ranges_and_times(
        self,
        partitions: Iterable[TopicPartition],
        isolation: Isolation,
        times: Mapping[int, Iterable[TopicPartition]],
        *,
        topics: Topics | None = None,
    ) -> tuple[dict[TopicPartition, PartitionOffsets | MissingPartition], FirstOffsets]:
        """:meth:`offset_ranges` and, in the same round of requests, the first offset at or after
        each timestamp of ``times`` (KIP-79) in its partitions, None where no record is that new;
        partitions not among ``partitions`` are not asked. Under read_committed the ranges carry
        the high watermark and the last stable offset."""
        got = self._answered(
            partitions,
            TimeSpec(TimeKind.LATEST),
            isolation,
            topics,
            times,
            with_lso=isolation is Isolation.READ_COMMITTED,
        )
        # The positions alone: no time lookup row per partition (100,000 of them in a large plan).
        ranges = ans.partition_offsets(got.present, got.answers, got.topic_ids)
        return _with_missing(ranges, got.missing), got.found

    def offset_rows(
        self,
        partitions: Iterable[TopicPartition],
        time_spec: TimeSpec,
        isolation: Isolation,
        no_match: NoMatch,
        *,
        topics: Topics | None = None,
    ) -> dict[TopicPartition, OffsetRow | MissingPartition]:
        """Each partition's positions and the ``time_spec`` offset.

        The last stable offset is asked for (and set) only under read_committed: it costs one more
        ListOffsets request per broker, and whether a topic has transactions cannot be told
        without asking (``last_stable`` is None otherwise)."""
        return self._rows(
            partitions, time_spec, isolation, no_match, topics, with_lso=isolation is Isolation.READ_COMMITTED
        )

    def _rows(
        self,
        partitions: Iterable[TopicPartition],
        time_spec: TimeSpec,
        isolation: Isolation,
        no_match: NoMatch,
        topics: Topics | None,
        *,
        with_lso: bool,
    ) -> dict[TopicPartition, OffsetRow | MissingPartition]:
        got = self._answered(partitions, time_spec, isolation, topics, {}, with_lso=with_lso)
        rows = ans.offset_rows(got.present, got.answers, got.topic_ids, time_spec, isolation, no_match)
        return _with_missing(rows, got.missing)

    def _answered(
        self,
        partitions: Iterable[TopicPartition],
        time_spec: TimeSpec,
        isolation: Isolation,
        topics: Topics | None,
        times: Mapping[int, Iterable[TopicPartition]],
        *,
        with_lso: bool,
    ) -> _Answered:
        tps = sorted(set(partitions))  # TopicPartition tuples sort by topic, then partition
        deadline = Deadline(self.config.timeout_s)
        listed = {name for name, topic in (topics or {}).items() if isinstance(topic, ListedTopic)}
        known = {name: t for name, t in (topics or {}).items() if isinstance(t, TopicInfo)}
        infos = self._known_topics({tp.topic for tp in tps}, known, listed, deadline)
        queries = ans.queries(time_spec, isolation, with_lso=with_lso)
        asked = set(tps)
        wanted = {ts: [tp for tp in some if tp in asked] for ts, some in times.items()}
        lookups = {f"times {k}": one for k, one in enumerate(packed_times(wanted))}
        for name in lookups:  # KIP-79 by time, over every record written (not only committed ones)
            queries[name] = (TimeSpec(TimeKind.TIMESTAMP, 0), Isolation.READ_UNCOMMITTED)
        answers, missing, topics_now = self._consistent_answers(tps, queries, infos, deadline, lookups)
        found: FirstOffsets = {ts: {} for ts, some in wanted.items() if some}
        for name, one in lookups.items():
            for tp, (offset, _) in answers[name].items():
                found[one[tp]][tp] = offset if offset >= 0 else None
        # A listed topic deleted before it could be described was matched a moment too early: left
        # out, as the listing would now leave it out (a topic named outright is reported gone).
        reported = {
            tp: row for tp, row in missing.items() if tp.topic not in listed or tp.topic in topics_now
        }
        return _Answered(
            present=[tp for tp in tps if tp not in missing],
            answers=answers,
            topic_ids={name: info.topic_id for name, info in topics_now.items()},
            missing=reported,
            found=found,
        )

    def first_offsets(
        self, times: Mapping[int, Iterable[TopicPartition]], isolation: Isolation, deadline: Deadline
    ) -> FirstOffsets:
        """KIP-79 for each ``T: partitions`` of ``times``, the lookups sent together: the first
        offset whose record's timestamp is >= T, None where no record is that new. A partition
        that does not exist is left out; one the metadata still lists but no leader answers for is
        asked again until ``deadline``, then KafkaUnavailable (as for the log ranges: no partial
        answer)."""
        found: FirstOffsets = {ts: {} for ts in times}
        pending = {f"times {k}": lookups for k, lookups in enumerate(packed_times(times))}
        for attempt in itertools.count():
            pending = {name: lookups for name, lookups in pending.items() if lookups}
            if not pending:
                break
            queries = {name: (TimeSpec(TimeKind.TIMESTAMP, 0), isolation) for name in pending}
            everything = {tp for lookups in pending.values() for tp in lookups}
            answers, gone = self.list_offsets(everything, queries, deadline, pending, pending)
            for name, lookups in pending.items():
                for tp, (offset, _) in answers[name].items():
                    found[lookups[tp]][tp] = offset if offset >= 0 else None
            unsure = set(gone) - set(self._missing(gone, deadline))
            if not unsure:
                break
            if not deadline.allows(attempt):
                raise self._no_leader(sorted(unsure, key=tp_key))
            self._pause(attempt, f"no leader answered for {min(unsure, key=tp_key)}")
            pending = {
                name: {tp: ts for tp, ts in lookups.items() if tp in unsure}
                for name, lookups in pending.items()
            }
        return {ts: dict(sorted(got.items(), key=item_key)) for ts, got in found.items()}

    def _known_topics(
        self, names: set[str], known: Mapping[str, TopicInfo], listed: set[str], deadline: Deadline
    ) -> Callable[[], dict[str, TopicInfo]]:
        """The existing topics among ``names``: those in ``known``; the ``listed`` ones, whose
        DescribeTopics request is sent now; and the others, described now, before the ListOffsets:
        the description fills the client's metadata cache, where each ListOffsets call finds the
        partitions' leaders (sent before it, each call would ask the cluster for them again; a
        topic listing already filled it for the listed ones). The function returned waits for the
        listed topics' answer (once: later calls return it again)."""
        infos = {name: info for name, info in known.items() if name in names}
        if cold := names - set(infos) - listed:
            infos.update({n: i for n, i in self.describe(cold, deadline).items() if i is not None})
        describing = self._describing((names & listed) - set(infos), deadline)

        @functools.cache
        def answer() -> dict[str, TopicInfo]:
            infos.update({n: i for n, i in describing().items() if i is not None})
            return infos

        return answer

    def _consistent_answers(
        self,
        tps: list[TopicPartition],
        queries: Mapping[str, ans.Query],
        topics: Callable[[], Mapping[str, TopicInfo]],
        deadline: Deadline,
        lookups: Mapping[str, Mapping[TopicPartition, int]] | None = None,
    ) -> tuple[ans.Answers, dict[TopicPartition, MissingPartition], Mapping[str, TopicInfo]]:
        """Answers to every query that agree with each other, the partitions that do not exist, and
        the existing topics (``topics()``, awaited after the first round of ListOffsets: a listed
        topic's DescribeTopics goes out with them).

        The lookups go out together; a DeleteRecords or a commit landing between them can make them
        disagree (log start > high watermark), so such partitions are read again. A partition
        answered "unknown" that the metadata still lists (a leader moving, metadata propagating) is
        asked again too, until the deadline.
        """
        for attempt in itertools.count():
            answers, gone = self.list_offsets(tps, queries, deadline, lookups, lookups)
            infos = topics()
            # A topic the description does not have is gone (as when it was described first: its
            # partitions were never in the view); only unknown partitions of a described topic
            # are described again, to tell a missing partition from a lagging leader.
            undescribed = {tp for tp in tps if tp.topic not in infos}
            missing = {tp: MissingPartition(tp, MissingReason.TOPIC_GONE) for tp in undescribed}
            missing.update(self._missing(gone - undescribed, deadline))
            unsure = sorted(gone - set(missing), key=tp_key)
            if unsure:
                if not deadline.allows(attempt):
                    raise self._no_leader(unsure)
                self._pause(attempt, f"no leader answered for {unsure[0]}")
                continue
            if not ans.torn(tps, answers) or deadline.expired():
                return answers, missing, infos
            self._pause(attempt, "offsets changed between lookups")
        raise AssertionError("unreachable")

    def list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        queries: Mapping[str, ans.Query],
        deadline: Deadline,
        only: Mapping[str, Iterable[TopicPartition]] | None = None,
        times: Mapping[str, Mapping[TopicPartition, int]] | None = None,
    ) -> tuple[dict[str, dict[TopicPartition, tuple[int, int]]], set[TopicPartition]]:
        """Run several ListOffsets lookups of ``partitions`` at once: ``{name: (TimeSpec, isolation)}``;
        ``only``: the partitions of some lookups, when not all of ``partitions``; ``times``: for
        some lookups by time, each partition's own timestamp (one request asks each partition for
        its own, KIP-79), instead of their TimeSpec's.

        Returns ``{name: {tp: (offset, timestamp)}}`` and the partitions the cluster does not know.
        Transient errors are retried until ``deadline``; then KafkaUnavailable.
        """
        tps = set(partitions)
        answers: dict[str, dict[TopicPartition, tuple[int, int]]] = {name: {} for name in queries}
        pending = {name: set((only or {}).get(name, tps)) for name in queries}
        gone: set[TopicPartition] = set()
        # The answers name partitions by (topic, partition): map them back to the very objects
        # asked for, so the sets and dicts below compare by identity first (no string compare).
        asked = {(tp.topic, tp.partition): tp for tps_ in pending.values() for tp in tps_}
        live: set[tuple[str, int]] = set()  # leaders that took a connection: not probed again
        for attempt in itertools.count():
            last_error = self._list_offsets_once(
                queries, pending, answers, gone, deadline, asked, attempt, times or {}
            )
            if not any(pending.values()):
                break
            assert last_error is not None  # a partition is left only after a transient error
            if not deadline.allows(attempt):
                raise self._unavailable(pending, last_error) from last_error
            self._pause(attempt, "ListOffsets", last_error)
            left = {tp for tps in pending.values() for tp in tps}
            if self._await_live_leaders(left, deadline, live):  # never sent to a leader that refuses
                raise self._unavailable(pending, last_error) from last_error
        return answers, gone

    def _await_live_leaders(
        self, partitions: set[TopicPartition], deadline: Deadline, live: set[tuple[str, int]]
    ) -> bool:
        """Ask for the partitions' metadata before asking again, and wait while a leader it names
        refuses connections; whether one still does when ``deadline`` comes.

        librdkafka keeps sending a partition's requests to the leader it knows until its metadata
        is refreshed, and neither an answer without an error code (a dead leader's no offset) nor a
        request that timed out against a dead broker refreshes it. And while an admin request waits
        for a leader that refuses connections, librdkafka reconnects to it in a tight loop (~300
        connects a second, a core busy for as long as the request waits): on a loaded machine that
        starved the brokers' controller quorum, and no leader moved for 30 s. The controller names
        a new leader once it fences the dead broker (``broker.session.timeout.ms``)."""
        for attempt in itertools.count():
            down = self._refused_leaders(partitions, deadline, live)
            if not down:
                return False
            if not deadline.allows(attempt):
                return True
            self._pause(attempt, f"leader(s) {', '.join(sorted(down))} refuse connections")
        raise AssertionError("unreachable")

    def _refused_leaders(
        self, partitions: set[TopicPartition], deadline: Deadline, live: set[tuple[str, int]]
    ) -> set[str]:
        """The leaders of ``partitions`` (``host:port``) that refuse a TCP connection, from fresh
        metadata (one request per topic, while the deadline lasts); ``live`` gathers those that
        took one, so a leader is probed once per call unless it refused."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        leaders: set[tuple[str, int]] = set()
        for topic, numbers in sorted(by_topic.items()):
            if deadline.expired():
                break
            metadata = self._fresh_metadata(topic, deadline)
            found = metadata.topics.get(topic) if metadata is not None else None
            if metadata is None or found is None:
                continue
            for number in numbers:
                partition = found.partitions.get(number)
                broker = metadata.brokers.get(partition.leader) if partition is not None else None
                if broker is not None and broker.host:
                    leaders.add((str(broker.host), int(broker.port)))
        down: set[str] = set()
        for host, port in sorted(leaders - live):
            if _refuses(host, port, deadline):
                down.add(_address(host, port))
            else:
                live.add((host, port))
        return down

    def _list_offsets_once(
        self,
        queries: Mapping[str, ans.Query],
        pending: dict[str, set[TopicPartition]],
        answers: dict[str, dict[TopicPartition, tuple[int, int]]],
        gone: set[TopicPartition],
        deadline: Deadline,
        asked: Mapping[tuple[str, int], TopicPartition],
        attempt: int,
        times: Mapping[str, Mapping[TopicPartition, int]],
    ) -> BaseException | None:
        """One round (``attempt``, from 0) of every pending lookup, all sent before any answer is
        awaited: answered and gone partitions leave ``pending``; returns the last transient error
        (the others are asked again)."""
        from confluent_kafka import KafkaError as RdKafkaError
        from confluent_kafka import KafkaException

        last_error: BaseException | None = None

        def judge(name: str, tp: TopicPartition, exc: KafkaException) -> None:
            nonlocal last_error
            if error_code(exc) in GONE | NO_LEADER:
                gone.add(tp)
                pending[name].discard(tp)
            elif is_transient(exc):
                last_error = exc
            else:
                raise translate(exc, f"ListOffsets for {tp}", self.config, topic=tp.topic) from exc

        for name, wait in self._submit(queries, pending, deadline, attempt, times).items():
            got = answers[name]
            for request, answer in wait():
                if isinstance(answer, KafkaException):  # the whole call failed: so did each of its partitions
                    for key in sorted((ktp.topic, ktp.partition) for ktp in request):
                        judge(name, asked.get(key) or TopicPartition(*key), answer)
                    continue
                # for every partition of every lookup (200,000 a round in fleet serve): lean
                for ktp, info in answer.items():
                    key = (ktp.topic, ktp.partition)
                    tp = asked.get(key) or TopicPartition(*key)
                    if isinstance(info, RdKafkaError):
                        judge(name, tp, KafkaException(info))
                        continue
                    offset = info.offset
                    if offset == OFFSET_INVALID:
                        # librdkafka's "no offset" (-1001): the partition's leader died under the
                        # request. Never a value: asked again until the deadline, as a moving leader.
                        reason = f"ListOffsets for {tp} answered no offset ({OFFSET_INVALID}): leader gone"
                        error = RdKafkaError(RdKafkaError.LEADER_NOT_AVAILABLE, reason)
                        judge(name, tp, KafkaException(error))
                    else:
                        got[tp] = (offset, info.timestamp)
            pending[name].difference_update(got)
        return last_error

    def _submit(
        self,
        queries: Mapping[str, ans.Query],
        pending: Mapping[str, set[TopicPartition]],
        deadline: Deadline,
        attempt: int,
        times: Mapping[str, Mapping[TopicPartition, int]],
    ) -> dict[str, Callable[[], list[CallAnswer]]]:
        """Send the ListOffsets calls of each query with pending partitions, all at once: ``{name:
        wait}``, ``wait()`` returning each call's partitions and answer, ``{confluent TopicPartition:
        ListOffsetsResultInfo | KafkaError}``, or the KafkaException that failed the whole call.

        Each waits at most 2 s (doubled at each attempt) plus 1 s per 1,000 partitions asked, within
        a third of the budget: an answer takes milliseconds per thousand partitions, and a request
        for a leader that just died busies librdkafka for as long as it waits (_await_live_leaders)."""
        asked = sum(len(tps) for tps in pending.values())
        window = min(self._request_timeout(deadline), 2.0 * 2 ** min(attempt, 8) + asked / 1000)
        return {
            name: self._send_list_offsets(tps, *queries[name], deadline, window, times.get(name))
            for name, tps in pending.items()
            if tps
        }

    def _send_list_offsets(
        self,
        tps: Iterable[TopicPartition],
        spec: TimeSpec,
        isolation: Isolation,
        deadline: Deadline,
        timeout: float,
        times: Mapping[TopicPartition, int] | None = None,
    ) -> Callable[[], list[CallAnswer]]:
        """Send the ``list_offsets`` calls for ``tps``, in chunks (:meth:`_by_leader`; librdkafka
        sends one request per leader broker per call), all before any answer is awaited.
        ``times``: each partition's own timestamp (the spec's, else).

        They go through confluent_kafka's C entry point with one future per call: the public
        wrapper makes and checks a future per partition, which costs more than the request
        itself for thousands of partitions. A confluent_kafka without that entry point gets the
        public call."""
        from confluent_kafka import IsolationLevel, KafkaException

        level = {
            Isolation.READ_UNCOMMITTED: IsolationLevel.READ_UNCOMMITTED,
            Isolation.READ_COMMITTED: IsolationLevel.READ_COMMITTED,
        }[isolation]
        requests = self._by_leader(tps, _spec_value(spec), times)
        what = f"ListOffsets of {sum(map(len, requests))} partition(s)"
        calls: list[concurrent.futures.Future[OffsetsAnswer]] = []
        try:
            from confluent_kafka.cimpl import _AdminClientImpl

            for request in requests:
                future: concurrent.futures.Future[OffsetsAnswer] = concurrent.futures.Future()
                future.set_running_or_notify_cancel()
                _AdminClientImpl.list_offsets(
                    self.client, request, future, isolation_level_value=level.value, request_timeout=timeout
                )
                calls.append(future)
        except (ImportError, AttributeError, TypeError):
            if calls:  # the entry point worked for a chunk: a real error, not a missing API
                raise
            every = [ktp for request in requests for ktp in request]
            if times is None:
                offset_spec = _offset_spec(spec)
                specs = {ktp: offset_spec for ktp in every}
            else:
                specs = {ktp: _offset_spec(TimeSpec(TimeKind.TIMESTAMP, ktp.offset)) for ktp in every}
            futures = self.client.list_offsets(specs, isolation_level=level, request_timeout=timeout)
            return lambda: [(every, _gather(futures, deadline, what, self.config, self.check_access))]

        def wait() -> list[CallAnswer]:
            answered: list[CallAnswer] = []
            for request, call in zip(requests, calls, strict=True):
                try:
                    answered.append((request, wait_for(call, deadline, what, self.config, self.check_access)))
                except KafkaException as exc:  # the call failed as a whole: each of its partitions did
                    answered.append((request, exc))
            return answered

        return wait

    def _by_leader(
        self, tps: Iterable[TopicPartition], value: int, times: Mapping[TopicPartition, int] | None
    ) -> list[list[KafkaTP]]:
        """The request of ``tps`` (each asked for ``value``, or its own of ``times``) in the chunks of
        one ``list_offsets`` call each: partitions of one leader (as last described) together,
        :data:`LIST_OFFSETS_LEADER_CHUNK` a call (one request each); those of topics not described,
        :data:`LIST_OFFSETS_CHUNK` a call (librdkafka sends one request per leader among them). A
        leader moved since costs only a request more."""
        from confluent_kafka import TopicPartition as KafkaTP

        leaders = self._leaders
        by: dict[int, list[KafkaTP]] = {}
        for tp in tps:
            topic, partition = tp
            known = leaders.get(topic)
            leader = known[partition] if known is not None and partition < len(known) else -1
            if (bucket := by.get(leader)) is None:
                bucket = by[leader] = []
            bucket.append(KafkaTP(topic, partition, value if times is None else times[tp]))
        chunks: list[list[KafkaTP]] = []
        for leader, bucket in by.items():
            size = LIST_OFFSETS_CHUNK if leader < 0 else LIST_OFFSETS_LEADER_CHUNK
            chunks.extend(bucket[at : at + size] for at in range(0, len(bucket), size))
        return chunks

    def _missing(
        self, tps: Iterable[TopicPartition], deadline: Deadline
    ) -> dict[TopicPartition, MissingPartition]:
        """Which of ``tps`` (answered "unknown") the metadata confirms missing, and why."""
        asked = sorted(set(tps), key=tp_key)
        if not asked:
            return {}
        infos = self.describe({tp.topic for tp in asked}, deadline)
        missing: dict[TopicPartition, MissingPartition] = {}
        for tp in asked:
            info = infos.get(tp.topic)
            if info is None:
                missing[tp] = MissingPartition(tp, MissingReason.TOPIC_GONE)
            elif tp.partition >= info.partitions:
                missing[tp] = MissingPartition(tp, MissingReason.PARTITION_GONE)
        return missing

    # -- helpers --------------------------------------------------------------------------------------

    def _request_timeout(self, deadline: Deadline) -> float:
        # One attempt may use a third of the budget, so a slow answer still leaves time to retry.
        return max(1.0, min(deadline.remaining(), max(self.config.timeout_s / 3, 1.0)))

    def _pause(self, attempt: int, what: str, error: BaseException | None = None) -> None:
        code = f" ({error_code(error)})" if error is not None else ""
        log.debug("%s%s: retrying in %.1fs", what, code, backoff(attempt))
        time.sleep(backoff(attempt))

    def _unavailable(self, pending: Mapping[str, Iterable[TopicPartition]], exc: BaseException) -> KafkaError:
        left = sorted({tp for tps in pending.values() for tp in tps}, key=tp_key)
        named = ", ".join(str(tp) for tp in left[:3]) + (
            f" and {len(left) - 3} more" if len(left) > 3 else ""
        )
        error = translate(exc, f"offsets of {named}", self.config)
        return error if isinstance(error, KafkaError) else KafkaError(str(error))

    def _no_leader(self, unsure: list[TopicPartition]) -> KafkaUnavailable:
        named = ", ".join(str(tp) for tp in unsure[:3])
        return KafkaUnavailable(
            f"no leader answered for {named} within {self.config.timeout_s:g}s "
            f"(cluster at {self.config.bootstrap_servers}); try again later"
        )


def _refuses(host: str, port: int, deadline: Deadline) -> bool:
    """Whether every address of ``host:port`` refuses a TCP connection (nothing listens: a dead
    broker on a live machine), tried for at most a second within ``deadline``. A timeout or an
    unreachable host is not a refusal: librdkafka waits those out without a busy loop."""
    timeout_s = min(1.0, max(0.1, deadline.remaining()))
    try:
        with socket.create_connection((host, port), timeout=timeout_s, all_errors=True):
            return False
    except ExceptionGroup as errors:
        return all(isinstance(e, ConnectionRefusedError) for e in errors.exceptions)
    except OSError:  # the name did not resolve
        return False


def _address(host: str, port: int) -> str:
    """``host:port`` as an operator types it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _spec_value(spec: TimeSpec) -> int:
    """Our TimeSpec as the ListOffsets timestamp field: -2 earliest, -1 latest, -3 max-timestamp, or T."""
    if spec.kind is TimeKind.EARLIEST:
        return -2
    if spec.kind is TimeKind.LATEST:
        return -1
    if spec.kind is TimeKind.MAX_TIMESTAMP:
        return -3
    assert spec.timestamp_ms is not None
    return spec.timestamp_ms


def _offset_spec(spec: TimeSpec) -> OffsetSpec:
    """Our TimeSpec as confluent_kafka's OffsetSpec (ListOffsets -2, -1, -3 or a timestamp)."""
    from confluent_kafka.admin import OffsetSpec as _OffsetSpec

    factories: Any = _OffsetSpec  # its factory methods are unannotated (untyped calls under --strict)
    made: OffsetSpec
    if spec.kind is TimeKind.EARLIEST:
        made = factories.earliest()
    elif spec.kind is TimeKind.LATEST:
        made = factories.latest()
    elif spec.kind is TimeKind.MAX_TIMESTAMP:
        made = factories.max_timestamp()
    else:
        assert spec.timestamp_ms is not None
        made = factories.for_timestamp(spec.timestamp_ms)
    return made


def _gather(
    futures: Mapping[KafkaTP, concurrent.futures.Future[ListOffsetsResultInfo]],
    deadline: Deadline,
    what: str,
    config: KafkaConfig,
    check: Callable[[], None] | None = None,
) -> OffsetsAnswer:
    """Per-partition futures of the public ``list_offsets`` as one answer (errors as values)."""
    from confluent_kafka import KafkaException

    answered: dict[KafkaTP, ListOffsetsResultInfo | RdKafkaError] = {}
    for ktp, future in futures.items():
        try:
            answered[ktp] = wait_for(future, deadline, what, config, check)
        except KafkaException as exc:
            answered[ktp] = exc.args[0]
    return answered


_Row = TypeVar("_Row")
_T = TypeVar("_T")


def _with_missing(
    rows: Mapping[TopicPartition, _Row], missing: Mapping[TopicPartition, MissingPartition]
) -> dict[TopicPartition, _Row | MissingPartition]:
    """``rows`` (in the sorted order the partitions were asked in) with the ``missing`` partitions
    in their places: sorted again only when there are some."""
    merged: dict[TopicPartition, _Row | MissingPartition] = dict(rows)
    if not missing:
        return merged
    merged.update(missing)
    return dict(sorted(merged.items(), key=item_key))


def packed_times(times: Mapping[int, Iterable[TopicPartition]]) -> list[dict[TopicPartition, int]]:
    """KIP-79 lookups ``{T: partitions}`` packed into as few ListOffsets lookups as can carry them:
    each partition asked for its own timestamp, once per lookup (a thousand checkpoints, each with
    its batch's time, made a thousand requests per broker; packed, one, unless two of them read the
    same partition). Each T is checked as any timestamp asked for (a negative one would be read as
    latest, earliest or max-timestamp)."""
    packed: list[dict[TopicPartition, int]] = []
    uses: dict[TopicPartition, int] = {}  # how many lookups hold the partition already
    for ts, tps in sorted(times.items()):
        check_timestamp_ms(ts)
        for tp in tps:
            n = uses.get(tp, 0)
            if n == len(packed):
                packed.append({})
            packed[n][tp] = ts
            uses[tp] = n + 1
    return packed


def tp_key(tp: TopicPartition) -> tuple[str, int]:
    """Sort key of a partition: by topic, then partition."""
    return (tp.topic, tp.partition)


def item_key(item: tuple[TopicPartition, object]) -> tuple[str, int]:
    return (item[0].topic, item[0].partition)


def admin_for(config: KafkaConfig) -> KafkaAdmin:
    """The process's shared admin client for ``config``: one per config (and per process: a
    librdkafka handle must not cross a fork), so a whole command talks to Kafka over one client.

    Example::

        admin_for(KafkaConfig("localhost:9092")).offset_ranges([TopicPartition("orders", 0)])
    """
    return _shared(config, os.getpid())


@functools.lru_cache(maxsize=8)
def _shared(config: KafkaConfig, pid: int) -> KafkaAdmin:
    log.debug("new Kafka admin client for %s (pid %d)", config.bootstrap_servers, pid)
    return KafkaAdmin(config)


@contextmanager
def kafka_admin(config: KafkaConfig) -> Iterator[KafkaAdmin]:
    """An admin session on the shared client: ``with kafka_admin(config) as admin: ...``."""
    yield admin_for(config)
