"""Hold retention while a query is down, and put it back once the query has caught up.

    hold_retention("/chk", kafka, keep_s=2 * 86400)                 -> HoldPlan     (dry run)
    hold_retention("/chk", kafka, keep_s=2 * 86400, execute=True)   -> HoldPlan     (raised)
    release_retention("/chk", kafka, execute=True)                  -> ReleasePlan  (put back)

The facts come from the checkpoint and the cluster (a validation with runways, DescribeConfigs,
DescribeLogDirs, the oldest record of each partition); :mod:`recovery.core.hold` decides.

**The record.** What a hold changed is kept in the checkpoint's ``_recovery/retention-hold.json``
(Spark never reads ``_recovery/``): per topic, each value before and as held (``original`` null:
the topic had no value of its own), the offsets the hold protects, when, by whom and why. It is
written *before* the change, so it is also the intent record:

* killed after the record, before the change: the next ``hold_retention(execute=True)`` finds the
  values not raised and raises them (the originals are the record's, never the raised ones);
* killed during or after the change: the values are the held ones; a rerun changes nothing, and
  ``release_retention`` puts them back;
* ``release_retention`` changes the values first and rewrites the record after: killed between, the
  rerun finds the original values in place and only drops the record.

A value someone changed since the hold is never overwritten (compared first, said, left). Both
commands hold the checkpoint's write lock, so two of them never interleave their record writes.
"""

from __future__ import annotations

import getpass
import json
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recovery.api import validate_checkpoint
from recovery.checkpoint import open_checkpoint
from recovery.checkpoint.intent import checkpoint_lock
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.recovery_dir import HOLD_FILE
from recovery.checkpoint.store import Store, fault_point
from recovery.core.hold import (
    DEFAULT_MAX_RETENTION_MS,
    DEFAULT_MIN_FREE_RATIO,
    RETENTION_BYTES,
    RETENTION_MS,
    HeldValue,
    HoldAction,
    HoldLimits,
    HoldPlan,
    ReleaseAction,
    ReleasePlan,
    TopicHoldRecord,
    decide_release,
    plan_hold,
)
from recovery.core.model import Isolation, TopicPartition, Verdict
from recovery.errors import CheckpointFormatError, InvalidInput
from recovery.kafka.config import KafkaConfig
from recovery.kafka.logdirs import log_dirs
from recovery.kafka.runway_facts import record_stamps, topic_retention
from recovery.kafka.topic_config import alter_topic_values, topic_values

log = logging.getLogger(__name__)

__all__ = ["hold_retention", "read_holds", "release_retention"]

_NAMES = (RETENTION_MS, RETENTION_BYTES)
_VERSION = 1


def hold_retention(
    location: str,
    kafka: KafkaConfig,
    *,
    keep_s: float,
    execute: bool = False,
    max_retention_s: float = DEFAULT_MAX_RETENTION_MS / 1000,
    max_extra_bytes: int | None = None,
    min_free_ratio: float = DEFAULT_MIN_FREE_RATIO,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    why: str = "",
) -> HoldPlan:
    """Raise the retention of each topic the checkpoint reads whose unread records retention could
    delete within ``keep_s`` seconds, so that they are kept that long (dry run unless ``execute``).
    Values are only raised; a topic is refused (the others still held) above ``max_retention_s``,
    when its replicas would take more than ``max_extra_bytes`` on a broker (all held topics
    together), or leave a log directory with less than ``min_free_ratio`` of its disk free.
    ``why``: recorded beside the values (default: the plan's reason).

    Example: ``hold_retention("/chk", KafkaConfig("kafka:9092"), keep_s=2 * 86400, execute=True)``
    """
    limits = _limits(keep_s, max_retention_s, max_extra_bytes, min_free_ratio)
    report = validate_checkpoint(location, kafka, isolation=isolation, storage_options=storage_options)
    findings = report.findings
    tps = sorted({f.tp for f in findings if f.available is not None}, key=lambda tp: (tp.topic, tp.partition))
    retention = topic_retention(kafka, {tp.topic for tp in tps})
    starts = {
        (f.tp, f.available.start)
        for f in findings
        if f.available is not None and f.available.start < f.available.end
    }
    stamps = {tp: stamp for (tp, _), stamp in record_stamps(kafka, starts, isolation).items()}
    plan = plan_hold(
        report.checkpoint,
        findings,
        retention,
        stamps,
        log_dirs(kafka, tps),
        limits,
        report.runway_at_ms or _now_ms(),
    )
    if not execute or not plan.raising:
        return plan
    store = Store(location, storage_options)
    with checkpoint_lock(store, command="hold_retention"):
        store.remove_temp_files(HOLD_FILE)  # of a hold or release killed while writing the record
        return _execute_hold(store, kafka, plan, why)


def _limits(
    keep_s: float, max_retention_s: float, max_extra_bytes: int | None, min_free_ratio: float
) -> HoldLimits:
    if keep_s <= 0:
        raise InvalidInput(f"keep_s must be positive, not {keep_s:g}", parameter="keep_s")
    if max_retention_s <= 0:
        raise InvalidInput(
            f"max_retention_s must be positive, not {max_retention_s:g}", parameter="max_retention_s"
        )
    if max_extra_bytes is not None and max_extra_bytes < 0:
        raise InvalidInput(
            f"max_extra_bytes must be 0 or more, not {max_extra_bytes}", parameter="max_extra_bytes"
        )
    if not 0 <= min_free_ratio < 1:
        raise InvalidInput(
            f"min_free_ratio must be at least 0 and below 1, not {min_free_ratio:g}",
            parameter="min_free_ratio",
        )
    return HoldLimits(int(keep_s * 1000), int(max_retention_s * 1000), max_extra_bytes, min_free_ratio)


def _execute_hold(store: Store, kafka: KafkaConfig, plan: HoldPlan, why: str) -> HoldPlan:
    """Record, then raise. The values are read again first: one no longer below the plan's (raised
    meanwhile, or -1: no limit) is left alone, so a hold never lowers anything. A topic whose values
    cannot be read is not changed (its original could not be recorded); a topic the broker refused
    keeps its earlier record, if any."""
    before = read_holds(store)
    now = topic_values(kafka, [t.topic for t in plan.raising], _NAMES)
    errors: dict[str, str] = {}
    changes: dict[str, dict[str, str]] = {}
    for hold in plan.raising:
        values = now.get(hold.topic, "not answered")
        if isinstance(values, str):
            errors[hold.topic] = f"not changed: {values}"
            continue
        missing = sorted(set(hold.changes) - set(values))
        if missing:
            errors[hold.topic] = f"not changed: DescribeConfigs did not answer {', '.join(missing)}"
            continue
        wanted = {n: v for n, v in hold.changes.items() if _below(values[n].value, v)}
        if wanted:
            changes[hold.topic] = wanted
    records = dict(before)
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    for hold in plan.raising:
        if hold.topic not in changes:
            continue
        values = now[hold.topic]
        assert not isinstance(values, str)
        earlier = before.get(hold.topic)
        held = dict(earlier.values) if earlier else {}  # a value held earlier and not raised now stays
        for name, value in changes[hold.topic].items():
            first = held.get(name)
            if first is None:
                held[name] = HeldValue(values[name].value if values[name].own else None, value)
            else:  # the first hold's original stays; what it set is still ours
                held[name] = HeldValue(first.original, value, (*first.earlier, first.held))
        protect = dict(hold.protect_until)
        if earlier is None:
            records[hold.topic] = TopicHoldRecord(
                hold.topic, held, protect, plan.now_ms, by, why or hold.reason
            )
        else:  # who held it first, when and why stay (a new ``why`` is added)
            protect = {p: max(o, earlier.protect_until.get(p, o)) for p, o in protect.items()}
            said = f"{earlier.why}; {why}" if why and why not in earlier.why else earlier.why
            records[hold.topic] = TopicHoldRecord(
                hold.topic, held, protect, earlier.held_at_ms, earlier.by, said
            )
    if changes:
        _write_holds(store, records)  # first: the record is the intent
    fault_point("IncrementalAlterConfigs")
    answers = alter_topic_values(kafka, changes)
    refused = {t: e for t, e in answers.items() if e is not None}
    errors.update(refused)
    definite = {t for t, e in refused.items() if "may have been applied" not in e}
    if definite:  # not raised: the record goes back to what it was for those topics
        kept = {t: r for t, r in records.items() if t not in definite}
        kept.update({t: before[t] for t in definite if t in before})
        _write_holds(store, kept)
    topics = tuple(
        replace(t, error=errors[t.topic])
        if t.topic in errors
        else replace(t, action=HoldAction.ENOUGH, reason=f"raised meanwhile: {t.reason}")
        if t.action is HoldAction.RAISE and t.topic not in changes
        else t
        for t in plan.topics
    )
    return replace(plan, topics=topics, executed=True)


def _below(current: str | None, new: str) -> bool:
    """Whether the value in effect is lower than ``new`` (-1, no limit, is never lower)."""
    try:
        value = int(current) if current is not None else -1
    except ValueError:
        return False  # not a number: not ours to judge, and never lowered
    return value != -1 and value < int(new)


def release_retention(
    location: str,
    kafka: KafkaConfig,
    *,
    execute: bool = False,
    now: bool = False,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
) -> ReleasePlan:
    """Put back the values :func:`hold_retention` raised, for each topic whose protected records the
    query has read (all of them with ``now``), unless someone changed a value since: then that value
    is left and said. Dry run unless ``execute``; the record of a topic goes once its hold ended.

    Example: ``release_retention("/chk", KafkaConfig("kafka:9092"), execute=True)``
    """
    store = open_checkpoint(location, storage_options).store  # a checkpoint, or bad input (exit 2)
    records = read_holds(store)
    if not records:
        return ReleasePlan(store.display(), ())
    report = validate_checkpoint(
        location, kafka, isolation=isolation, storage_options=storage_options, runway=False
    )
    positions: dict[TopicPartition, int] = {}
    for f in report.findings:
        # A new partition is read from its start: nothing read yet.
        at = f.available.start if f.verdict is Verdict.NEW_PARTITION and f.available else f.position
        if at is not None:
            positions[f.tp] = min(at, positions.get(f.tp, at))
    if not execute:
        return _decide(store, kafka, records, positions, now)
    with checkpoint_lock(store, command="release_retention"):
        store.remove_temp_files(HOLD_FILE)  # of a hold or release killed while writing the record
        records = read_holds(store)  # again, under the lock
        plan = _decide(store, kafka, records, positions, now)
        restore = {t.topic: t.changes for t in plan.topics if t.action is ReleaseAction.RESTORE}
        answers = alter_topic_values(kafka, restore)
        fault_point("IncrementalAlterConfigs")  # put back, the record not yet rewritten
        ended = {
            t.topic
            for t in plan.topics
            if t.action in (ReleaseAction.RESTORED, ReleaseAction.CHANGED)
            or (t.action is ReleaseAction.RESTORE and answers.get(t.topic) is None)
        }
        _write_holds(store, {t: r for t, r in records.items() if t not in ended})
        topics = tuple(replace(t, error=answers[t.topic]) if answers.get(t.topic) else t for t in plan.topics)
        return replace(plan, topics=topics, executed=True)


def _decide(
    store: Store,
    kafka: KafkaConfig,
    records: Mapping[str, TopicHoldRecord],
    positions: Mapping[TopicPartition, int],
    now: bool,
) -> ReleasePlan:
    values = topic_values(kafka, records, _NAMES)
    current = {
        topic: v if isinstance(v, str) else {n: (tv.value, tv.own) for n, tv in v.items()}
        for topic, v in values.items()
    }
    return decide_release(store.display(), records.values(), current, positions, now=now)


# -- the record -----------------------------------------------------------------------------------


def read_holds(
    checkpoint: str | Store, storage_options: StorageOptions | None = None
) -> dict[str, TopicHoldRecord]:
    """The holds recorded in a checkpoint, by topic (empty: none). A record that cannot be read is
    bad input: nothing may be put back from a guess."""
    store = checkpoint if isinstance(checkpoint, Store) else Store(checkpoint, storage_options)
    data = store.read(HOLD_FILE)
    if data is None:
        return {}
    where = store.display(HOLD_FILE)
    try:
        body = _Record.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "the file"
        raise CheckpointFormatError(
            f"{where}: the hold record is malformed: {field}: {first['msg']}"
        ) from None
    except RecursionError:
        raise CheckpointFormatError(f"{where}: the hold record is malformed: nested too deep") from None
    if body.version != _VERSION:
        raise CheckpointFormatError(f"{where}: version {body.version} is not {_VERSION}")
    return {
        topic: TopicHoldRecord(
            topic,
            {name: HeldValue(v.original, v.held, tuple(v.earlier)) for name, v in entry.values.items()},
            {int(p): o for p, o in entry.protect_until.items()},
            entry.held_at_ms,
            entry.by,
            entry.why,
        )
        for topic, entry in body.topics.items()
    }


# The record's format, read strictly (pydantic): a value of the wrong type is refused, never coerced
# (a ``true`` offset, a ``null`` held value) into something a release would act on.
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
_Offset = Annotated[int, Field(ge=0)]
_Partition = Annotated[str, Field(pattern=r"^[0-9]{1,9}$")]


class _Held(BaseModel):
    model_config = _STRICT
    original: str | None
    held: str
    earlier: list[str] = Field(default_factory=list)


class _Entry(BaseModel):
    model_config = _STRICT
    values: dict[str, _Held]
    protect_until: dict[_Partition, _Offset]
    held_at_ms: int
    by: str
    why: str


class _Record(BaseModel):
    model_config = _STRICT
    version: int  # strict: ``true`` is not 1
    topics: dict[str, _Entry]


def _write_holds(store: Store, records: Mapping[str, TopicHoldRecord]) -> None:
    if not records:
        if store.exists(HOLD_FILE):
            store.remove(HOLD_FILE)
        return
    body = {
        "version": _VERSION,
        "topics": {
            r.topic: {
                "values": {
                    n: {"original": v.original, "held": v.held, "earlier": list(v.earlier)}
                    for n, v in sorted(r.values.items())
                },
                "protect_until": {str(p): o for p, o in sorted(r.protect_until.items())},
                "held_at_ms": r.held_at_ms,
                "by": r.by,
                "why": r.why,
            }
            for r in sorted(records.values(), key=lambda r: r.topic)
        },
    }
    store.write_atomic(HOLD_FILE, (json.dumps(body, indent=2) + "\n").encode())


def _now_ms() -> int:
    return int(time.time() * 1000)
