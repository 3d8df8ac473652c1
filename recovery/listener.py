"""In-job lag export: a ``StreamingQueryListener`` that shows a running query's Kafka lag.

Spark commits nothing to Kafka, so lag tools cannot see a Structured Streaming job, and a checkpoint
read from cron (``jobs/lag_export.py``) is stale between runs. Attached to the job's SparkSession, a
:class:`QueryMonitor` does, after every micro-batch of *its* query (events are filtered by query id):

* commits each Kafka source's ``endOffset`` to a monitor-only consumer group, through
  :func:`recovery.kafka.groups.set_group_offsets` (``written_by="listener"``), which refuses a group
  with members: the group is never used to consume, so ``kafka-consumer-groups --describe``, Burrow
  and friends show the job's lag;
* publishes lag (log end - ``endOffset``, per partition; one ListOffsets round for the log ends),
  records already deleted unread, rows/s and, at most every ``runway_interval_s``, the retention
  runway and the age of the oldest unread record (:mod:`recovery.core.runway`) as Prometheus metrics
  (its own ``CollectorRegistry``; an HTTP endpoint when asked) and one log line per batch;
* keeps the checkpoint's heartbeat (:mod:`recovery.checkpoint.heartbeat`) on started, progress and idle
  events, at most every ``interval_s`` so object stores are not flooded, and says ``terminated``
  when the query stops: the write path uses it to know the query is alive.

Spark's Kafka offsets are "the next offset to read" (apache/spark
connector/kafka-0-10-sql/.../KafkaSourceOffset.scala, ``KafkaMicroBatchStream``), so ``endOffset``
is committed as is, as a consumer commits its position. Sources are told apart by their
description (``KafkaV2[Subscribe[orders]]``), never by position: HeartSaVioR's
spark-sql-kafka-offset-committer pairs them with plan nodes by position, which breaks multi-source
queries (its issue #13). Where two sources read the same partition, the one further behind speaks
for it, as ``jobs/lag_export.py`` does.

Listener callbacks run on Spark's listener bus thread, not the query's: a failure here (Kafka down,
a refused group) is logged and counted, never raised, so the monitor cannot kill the query.

Example::

    monitor = QueryMonitor.attach(spark, "/chk/orders", KafkaConfig("kafka:9092"),
                                  group="spark-orders-monitor", metrics_port=9108)
    query = frame.writeStream.option("checkpointLocation", "/chk/orders").start("/lake/orders")
    try:
        query.awaitTermination()
    finally:
        monitor.close()
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, Unpack

from recovery.checkpoint import format as fmt
from recovery.checkpoint.heartbeat import write_heartbeat
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.store import Store
from recovery.core.model import Isolation, JsonObject, OffsetRange, TopicPartition
from recovery.core.runway import runway_of
from recovery.errors import RecoveryError, mask_credentials
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import set_group_offsets
from recovery.kafka.offsets import offset_ranges
from recovery.kafka.runway_facts import runway_facts
from recovery.kafka.values import PartitionOffsets

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry, Counter, Gauge
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
METRIC_PREFIX = "stream_recovery"


# -- what a progress event says (no IO) --------------------------------------------------------------


def is_kafka_source(description: str) -> bool:
    """Spark's Kafka sources describe themselves ``KafkaV2[Subscribe[t]]`` (micro-batch, DSv2) or
    ``KafkaSourceV1[...]`` (apache/spark KafkaMicroBatchStream.toString, KafkaSource.toString)."""
    return description.startswith(("KafkaV2[", "KafkaSourceV1[", "KafkaSource["))


def parse_kafka_offsets(value: object, *, where: str) -> dict[TopicPartition, int]:
    """A Kafka source's offset as progress reports it, ``{"topic": {"0": 42}}`` (a JSON string or the
    parsed object), as positions. Raises ValueError naming ``where`` when it is not that shape."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: not a {{topic: {{partition: offset}}}} object")
    positions: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"{where}: topic {topic!r} has no {{partition: offset}} object")
        for partition, offset in partitions.items():
            if (
                not str(partition).lstrip("-").isdigit()
                or isinstance(offset, bool)
                or not isinstance(offset, int)
            ):
                raise ValueError(f"{where}: {topic} [{partition}] has offset {offset!r}, not an integer")
            positions[TopicPartition(str(topic), int(partition))] = offset
    return positions


@dataclass(frozen=True)
class SourceBatch:
    """One Kafka source's part of a batch: where it ended and how fast it read."""

    description: str
    end: Mapping[TopicPartition, int]
    input_rows: int
    input_rows_per_s: float | None
    processed_rows_per_s: float | None


@dataclass(frozen=True)
class BatchProgress:
    """The parts of a ``StreamingQueryProgress`` (its JSON) the monitor uses."""

    query_id: str
    run_id: str
    name: str | None
    batch_id: int
    input_rows: int
    input_rows_per_s: float | None
    processed_rows_per_s: float | None
    sources: tuple[SourceBatch, ...]
    skipped: tuple[str, ...] = ()  # Kafka sources whose endOffset could not be read, with why

    def positions(self) -> dict[TopicPartition, int]:
        """The position per partition over all Kafka sources; the furthest behind wins a shared one."""
        merged: dict[TopicPartition, int] = {}
        for source in self.sources:
            for tp, offset in source.end.items():
                merged[tp] = min(offset, merged.get(tp, offset))
        return dict(sorted(merged.items()))


def _rate(value: object) -> float | None:
    # Spark leaves NaN and infinite rates out of the JSON (StreamingQueryProgress.safeDoubleToJValue).
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_progress(progress: JsonObject) -> BatchProgress:
    """Read a progress event's JSON (``StreamingQueryProgress.json``): Kafka sources by description."""
    sources: list[SourceBatch] = []
    skipped: list[str] = []
    for source in progress.get("sources") or ():
        description = str(source.get("description", ""))
        if not is_kafka_source(description):
            continue
        try:
            end = parse_kafka_offsets(source.get("endOffset"), where=f"{description} endOffset")
        except json.JSONDecodeError:
            skipped.append(f"{description} endOffset: not JSON")
            continue
        except ValueError as exc:
            skipped.append(str(exc))
            continue
        sources.append(
            SourceBatch(
                description,
                end,
                _count(source.get("numInputRows")),
                _rate(source.get("inputRowsPerSecond")),
                _rate(source.get("processedRowsPerSecond")),
            )
        )
    return BatchProgress(
        query_id=str(progress.get("id", "")),
        run_id=str(progress.get("runId", "")),
        name=progress.get("name") or None,
        batch_id=_count(progress.get("batchId")),
        input_rows=_count(progress.get("numInputRows")),
        input_rows_per_s=_rate(progress.get("inputRowsPerSecond")),
        processed_rows_per_s=_rate(progress.get("processedRowsPerSecond")),
        sources=tuple(sources),
        skipped=tuple(skipped),
    )


@dataclass(frozen=True)
class PartitionLagNow:
    """One partition after a batch: the query's position against the log as it is now."""

    tp: TopicPartition
    position: int
    log_start: int
    log_end: int

    @property
    def lag(self) -> int:
        """Records still to read: log end - position (deleted ones included, as lag_export counts)."""
        return max(0, self.log_end - self.position)

    @property
    def deleted_unread(self) -> int:
        """Records retention deleted before the query read them."""
        return max(0, min(self.log_start, self.log_end) - self.position)

    @property
    def commit_offset(self) -> int:
        """What the monitor group gets: the position, moved into the log (a group commit outside it
        is refused, as kafka-consumer-groups refuses it)."""
        return min(max(self.position, self.log_start), self.log_end)


# -- the monitor --------------------------------------------------------------------------------------


@dataclass
class _Metrics:
    registry: CollectorRegistry
    gauges: dict[str, Gauge] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)

    @classmethod
    def create(cls, registry: CollectorRegistry | None) -> _Metrics:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        reg = registry if registry is not None else CollectorRegistry(auto_describe=True)
        tp = ("query", "source", "topic", "partition")
        q = ("query",)

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            # registry=None: not prometheus_client's process-wide default registry (two monitors in
            # one driver would clash there); registered in this monitor's own below.
            return Gauge(f"{METRIC_PREFIX}_{name}", doc, labels, registry=None)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(f"{METRIC_PREFIX}_{name}", doc, labels, registry=None)

        gauges = {
            "lag": gauge("kafka_lag_records", "Log end minus the query's position, per partition.", tp),
            "position": gauge("kafka_position", "The query's next offset to read (endOffset).", tp),
            "log_end": gauge(
                "kafka_log_end_offset", "The partition's log end (HW, or LSO under read_committed).", tp
            ),
            "deleted": gauge(
                "kafka_deleted_unread_records", "Records retention deleted before the query read them.", tp
            ),
            "runway": gauge(
                "kafka_runway_seconds",
                "Seconds until retention may delete the oldest unread record (+Inf: not by time).",
                tp,
            ),
            "age": gauge(
                "kafka_oldest_unread_age_seconds", "Age of the oldest unread record (lag in time).", tp
            ),
            "source_rate": gauge(
                "source_input_rows_per_second", "Rows/s a source read in the last batch.", ("query", "source")
            ),
            "input_rate": gauge("input_rows_per_second", "Rows/s the query read in the last batch.", q),
            "processed_rate": gauge(
                "processed_rows_per_second", "Rows/s the query processed in the last batch.", q
            ),
            "batch": gauge("batch_id", "The last batch id the query reported.", q),
            "progress_time": gauge(
                "last_progress_timestamp_seconds", "When the monitor last saw progress.", q
            ),
        }
        counters = {
            "rows": counter("input_rows", "Rows the query read (sum of numInputRows).", q),
            "errors": counter(
                "listener_errors",
                "Listener steps that failed (logged; the query goes on).",
                ("query", "step"),
            ),
        }
        for metric in (*gauges.values(), *counters.values()):
            reg.register(metric)
        return cls(reg, gauges, counters)


class MonitorOptions(TypedDict, total=False):
    """The keyword options of :class:`QueryMonitor`, as :meth:`QueryMonitor.attach` passes them on."""

    group: str | None
    query_id: str | None
    isolation: Isolation
    interval_s: float
    storage_options: StorageOptions | None
    registry: CollectorRegistry | None
    runway_interval_s: float | None
    clock: Callable[[], float]


class QueryMonitor:
    """Lag export, monitor-group commits and heartbeat for one streaming query (see the module doc).

    ``query_id``: the query to follow; by default the id in ``checkpoint``'s ``metadata`` file, which
    Spark writes before the query starts (StreamExecution) and keeps across restarts.
    ``group``: the monitor-only consumer group (None: no commits). ``interval_s``: the least time
    between two heartbeat writes. ``runway_interval_s``: the least time between two retention
    runway readings (a one-record fetch per partition behind and one DescribeConfigs; None: never).
    """

    def __init__(
        self,
        checkpoint: str,
        kafka: KafkaConfig,
        *,
        group: str | None = None,
        query_id: str | None = None,
        isolation: Isolation = Isolation.READ_UNCOMMITTED,
        interval_s: float = DEFAULT_INTERVAL_S,
        storage_options: StorageOptions | None = None,
        registry: CollectorRegistry | None = None,
        runway_interval_s: float | None = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s}")
        self.checkpoint = checkpoint
        self.kafka = kafka
        self.group = group
        self.query_id = query_id
        self.isolation = isolation
        self.interval_s = interval_s
        self.storage_options = dict(storage_options or {})
        self._clock = clock
        self.runway_interval_s = runway_interval_s
        self._last_runway: float | None = None
        self._metrics = _Metrics.create(registry)
        self._last_beat: float | None = None
        self._run_id = ""
        self._label = query_id or ""
        self._terminated = threading.Event()
        self._stop_beating = threading.Event()
        self._beater: threading.Thread | None = None
        self._lock = threading.Lock()  # callbacks of one query come in order; close() may race them
        self._last_refusal = ""
        self._server: WSGIServer | None = None
        self.metrics_port: int | None = None  # the HTTP port serving the metrics, once serving
        self._spark: SparkSession | None = None
        self._listener: StreamingQueryListener | None = None
        self.batches = 0  # batches handled (tests, logs)

    # -- set-up --------------------------------------------------------------------------------------

    @classmethod
    def attach(
        cls,
        spark: SparkSession,
        checkpoint: str,
        kafka: KafkaConfig,
        *,
        metrics_port: int | None = None,
        metrics_addr: str = "0.0.0.0",
        **options: Unpack[MonitorOptions],
    ) -> QueryMonitor:
        """A monitor registered with ``spark.streams`` (before ``start()``, to see the start event);
        ``metrics_port`` also serves the Prometheus text on http://ADDR:PORT/metrics."""
        monitor = cls(checkpoint, kafka, **options)
        if metrics_port is not None:
            monitor.serve_metrics(metrics_port, metrics_addr)
        monitor._listener = spark_listener(monitor)
        monitor._spark = spark
        spark.streams.addListener(monitor._listener)
        return monitor

    def serve_metrics(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve this monitor's registry over HTTP (prometheus_client's server, a daemon thread);
        returns the port (``0`` picks a free one)."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr, registry=self._metrics.registry)
        self._server = server
        bound = int(server.server_address[1])
        self.metrics_port = bound
        log.info("metrics on http://%s:%d/metrics", addr, bound)
        return bound

    def metrics_text(self) -> str:
        """The Prometheus text exposition of this monitor's metrics."""
        from prometheus_client import generate_latest

        return generate_latest(self._metrics.registry).decode()

    def wait_terminated(self, timeout_s: float) -> bool:
        """Whether the query's terminated event reached the monitor within ``timeout_s`` (listener
        events are delivered asynchronously, after ``awaitTermination`` may have returned)."""
        return self._terminated.wait(timeout_s)

    def close(self, *, timeout_s: float = 30.0) -> None:
        """After the query stopped: wait for its terminated event (writing the terminated heartbeat
        ourselves if it does not come), unregister the listener, stop the HTTP server."""
        if self._listener is not None and not self.wait_terminated(timeout_s):
            log.warning(
                "query %s: no terminated event within %.0fs; heartbeat set to terminated",
                self._label,
                timeout_s,
            )
            with self._guard("heartbeat"), self._lock:
                self._stop_beating.set()
                if self.query_id is not None:
                    self._beat(self.query_id, self._run_id, "terminated", force=True)
        self._stop_beating.set()
        if self._spark is not None and self._listener is not None:
            with contextlib.suppress(Exception):  # the session may be gone already
                self._spark.streams.removeListener(self._listener)
            self._listener = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- events (each guarded: a listener must never kill the query) ----------------------------------

    def on_started(self, query_id: str, run_id: str, name: str | None = None) -> None:
        with self._guard("started"), self._lock:
            if not self._mine(query_id):
                return
            self._run_id = run_id
            self._label = name or query_id
            self._terminated.clear()
            self._beat(query_id, run_id, "running", force=True)
            self._keep_beating(query_id)

    def on_progress(self, progress: JsonObject) -> None:
        with self._guard("progress"), self._lock:
            batch = parse_progress(progress)
            if not self._mine(batch.query_id):
                return
            self._run_id = batch.run_id
            self._label = batch.name or batch.query_id
            with self._guard("heartbeat"):
                self._beat(batch.query_id, batch.run_id, "running")
                self._keep_beating(batch.query_id)  # attached after start(): no started event came
            self._export(batch)

    def on_idle(self, query_id: str, run_id: str) -> None:
        with self._guard("idle"), self._lock:
            if self._mine(query_id):
                self._beat(query_id, run_id, "running")

    def on_terminated(self, query_id: str, run_id: str, exception: str | None = None) -> None:
        with self._guard("terminated"), self._lock:
            if not self._mine(query_id):
                return
            self._stop_beating.set()
            try:
                self._beat(query_id, run_id, "terminated", force=True)
            finally:
                self._terminated.set()
            if exception:
                # The first line only: Spark's message can be long, and the job reports it anyway.
                log.warning("query %s stopped with an error: %s", self._label, exception.splitlines()[0])
            else:
                log.info("query %s stopped", self._label)

    # -- internals --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self, step: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # the query must go on whatever fails here
            log.warning("listener %s (query %s) failed: %s", step, self._label or "?", _one_line(exc))
            with contextlib.suppress(Exception):
                self._metrics.counters["errors"].labels(self._label or "?", step).inc()

    def _mine(self, query_id: str) -> bool:
        if self.query_id is None:
            self.query_id = _checkpoint_query_id(self.checkpoint, self.storage_options)
            if self.query_id is None:
                return False
            self._label = self._label or self.query_id
        return query_id == self.query_id

    def _keep_beating(self, query_id: str) -> None:
        """A batch can run longer than the heartbeat stays fresh (a catch-up after an outage), and
        it sends no event meanwhile: a daemon thread beats every ``interval_s`` until the terminated
        event (or ``close()``), so the write path never mistakes a long batch for a stopped query.
        It dies with the driver, so a killed job's heartbeat goes stale as it should."""
        if self._beater is not None and self._beater.is_alive():
            return
        self._stop_beating.clear()

        def beat_between_events() -> None:
            while not self._stop_beating.wait(self.interval_s):
                with self._guard("heartbeat"), self._lock:
                    if not self._stop_beating.is_set():
                        self._beat(query_id, self._run_id, "running")

        self._beater = threading.Thread(
            target=beat_between_events, name="stream-recovery-heartbeat", daemon=True
        )
        self._beater.start()

    def _beat(self, query_id: str, run_id: str, state: str, *, force: bool = False) -> None:
        now = self._clock()
        if not force and self._last_beat is not None and now - self._last_beat < self.interval_s:
            return
        write_heartbeat(
            self.checkpoint,
            query_id=query_id,
            run_id=run_id,
            state=state,
            interval_s=self.interval_s,
            storage_options=self.storage_options or None,
        )
        self._last_beat = now

    def _export(self, batch: BatchProgress) -> None:
        for reason in batch.skipped:
            log.warning("query %s batch %d: %s", self._label, batch.batch_id, reason)
        positions = batch.positions()
        rows = self._measure(batch, positions) if positions else []
        self._publish(batch, rows)
        now = self._clock()
        every = self.runway_interval_s
        due = every is not None and (self._last_runway is None or now - self._last_runway >= every)
        if rows and due:
            self._last_runway = now
            with self._guard("runway"):
                self._publish_runway(batch, rows)
        committed = ""
        if self.group and rows:
            with self._guard("group commit"):
                self._commit({r.tp: r.commit_offset for r in rows})
                committed = f", committed to group {self.group}"
        self.batches += 1
        total = sum(r.lag for r in rows)
        worst = max(rows, key=lambda r: r.lag, default=None)
        log.info(
            "query %s batch %d: %d rows (%s rows/s), lag %d records%s%s",
            self._label,
            batch.batch_id,
            batch.input_rows,
            "-" if batch.processed_rows_per_s is None else f"{batch.processed_rows_per_s:.1f}",
            total,
            f" (most on {worst.tp}: {worst.lag})" if worst is not None and worst.lag else "",
            committed,
        )

    def _measure(
        self, batch: BatchProgress, positions: Mapping[TopicPartition, int]
    ) -> list[PartitionLagNow]:
        ranges = offset_ranges(self.kafka, positions, self.isolation)
        rows = []
        for tp, position in positions.items():
            found = ranges.get(tp)
            if isinstance(found, PartitionOffsets):
                rows.append(PartitionLagNow(tp, position, found.log_start, found.end))
            else:
                log.warning(
                    "query %s batch %d: %s [%d] is not on the cluster",
                    self._label,
                    batch.batch_id,
                    tp.topic,
                    tp.partition,
                )
        return rows

    def _publish(self, batch: BatchProgress, rows: Sequence[PartitionLagNow]) -> None:
        g = self._metrics.gauges
        q = self._label
        owner = {tp: s.description for s in batch.sources for tp in s.end}
        for r in rows:
            labels = (q, owner.get(r.tp, ""), r.tp.topic, str(r.tp.partition))
            g["lag"].labels(*labels).set(r.lag)
            g["position"].labels(*labels).set(r.position)
            g["log_end"].labels(*labels).set(r.log_end)
            g["deleted"].labels(*labels).set(r.deleted_unread)
        for s in batch.sources:
            if s.input_rows_per_s is not None:
                g["source_rate"].labels(q, s.description).set(s.input_rows_per_s)
        if batch.input_rows_per_s is not None:
            g["input_rate"].labels(q).set(batch.input_rows_per_s)
        if batch.processed_rows_per_s is not None:
            g["processed_rate"].labels(q).set(batch.processed_rows_per_s)
        self._metrics.counters["rows"].labels(q).inc(batch.input_rows)
        g["batch"].labels(q).set(batch.batch_id)
        g["progress_time"].labels(q).set_to_current_time()

    def _publish_runway(self, batch: BatchProgress, rows: Sequence[PartitionLagNow]) -> None:
        """Retention runway and lag in time (recovery.core.runway): the timestamp of the first unread
        record (a one-record fetch per partition behind) plus the topic's retention.ms."""
        unread = [(r.tp, r.commit_offset) for r in rows if r.commit_offset < r.log_end]
        facts = runway_facts(self.kafka, unread, self.isolation)
        now_ms = int(time.time() * 1000)
        g = self._metrics.gauges
        owner = {tp: s.description for s in batch.sources for tp in s.end}
        for r in rows:
            labels = (self._label, owner.get(r.tp, ""), r.tp.topic, str(r.tp.partition))
            if r.commit_offset >= r.log_end:  # nothing unread: nothing at risk
                g["runway"].labels(*labels).set(math.inf)
                g["age"].labels(*labels).set(0)
                continue
            runway = runway_of(
                r.commit_offset,
                facts.retention.get(r.tp.topic),
                facts.stamps.get((r.tp, r.commit_offset)),
                size=facts.sizes.get(r.tp),
                log=OffsetRange(r.log_start, max(r.log_start, r.log_end)),
                now_ms=now_ms,
            )
            left, age = runway.left_ms(now_ms), runway.age_ms(now_ms)
            if left is not None:
                g["runway"].labels(*labels).set(left / 1000)
            elif runway.reason.startswith(("compacted", "infinite")):  # no time limit at all
                g["runway"].labels(*labels).set(math.inf)
            else:  # not known: no value rather than a wrong one
                with contextlib.suppress(KeyError):
                    g["runway"].remove(*labels)
            if age is not None:
                g["age"].labels(*labels).set(age / 1000)
            else:
                with contextlib.suppress(KeyError):
                    g["age"].remove(*labels)

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        assert self.group is not None
        try:
            set_group_offsets(self.kafka, self.group, offsets, execute=True, written_by="listener")
        except RecoveryError as exc:
            # A refusal (members, not our commits) repeats every batch: say it once per reason.
            message = _one_line(exc)
            if message != self._last_refusal:
                log.warning("query %s: not committing to group %s: %s", self._label, self.group, message)
                self._last_refusal = message
            self._metrics.counters["errors"].labels(self._label, "group commit").inc()
            return
        self._last_refusal = ""


def _one_line(exc: BaseException) -> str:
    text = mask_credentials(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _checkpoint_query_id(checkpoint: str, storage_options: StorageOptions) -> str | None:
    """The query id in ``checkpoint/metadata`` (None while there is none)."""
    store = Store(checkpoint, storage_options)
    data = store.read("metadata")
    if data is None:
        return None
    return fmt.parse_stream_metadata(data, path=store.display("metadata")).query_id


def spark_listener(monitor: QueryMonitor) -> StreamingQueryListener:
    """A pyspark ``StreamingQueryListener`` (PySpark ≥ 3.4; ``onQueryIdle`` from 3.5) feeding
    ``monitor``. pyspark is imported here, not with this module: the CLI never loads it."""
    from pyspark.sql.streaming import StreamingQueryListener
    from pyspark.sql.streaming.listener import (
        QueryIdleEvent,
        QueryProgressEvent,
        QueryStartedEvent,
        QueryTerminatedEvent,
    )

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: QueryStartedEvent) -> None:
            monitor.on_started(str(event.id), str(event.runId), event.name)

        def onQueryProgress(self, event: QueryProgressEvent) -> None:
            with monitor._guard("progress"):
                monitor.on_progress(json.loads(event.progress.json))

        def onQueryIdle(self, event: QueryIdleEvent) -> None:
            monitor.on_idle(str(event.id), str(event.runId))

        def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
            monitor.on_terminated(str(event.id), str(event.runId), event.exception)

    return _Listener()
