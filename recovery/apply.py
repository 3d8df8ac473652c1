"""The executor: the one place a Kafka repair plan is written into a checkpoint.

``repair --execute``, the pre-start gate in clamp mode, the jobs and Python callers all apply plans
through :func:`apply`, so each gets every refusal, in this order, before anything is written:

1. the plan's own policy: loss budget, offsets unreadable, a source emptied (LossBudgetExceeded);
2. the checkpoint is in use by a running query (its heartbeat, else file ages), unless ``force``
   (CheckpointInUse);
3. a re-plan on offsets read just now (from the checkpoint as it is under the lock: read again, or
   proven unchanged since the plan) must change the same partitions in the same files and pass
   the same policy: retention keeps moving (PlanOutdated, LossBudgetExceeded);
4. a Delta sink that would skip the changed batch, unless ``accept_sink_skip`` (SinkWouldSkip);

then it backs up the files it changes, rewrites them in place (temp file + rename, fresh ``.crc``),
and records the ids of the topics that are healthy afterwards, in the same backup set. All of it runs
under the checkpoint's write lock (:func:`recovery.checkpoint.checkpoint_lock`): a second writer is
refused naming the holder, and a command that was killed half-way is rolled back first, before the
checkpoint is read and re-planned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypedDict

from recovery.checkpoint import (
    BackupSet,
    Checkpoint,
    Interrupted,
    checkpoint_lock,
    open_checkpoint,
    rewrite_offsets,
)
from recovery.checkpoint.backup import backup_root, lists_backups, new_backup_id
from recovery.checkpoint.heartbeat import refuse_if_in_use
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.recovery_dir import HEARTBEAT_FILE, INTENT_FILE, RECOVERY_DIR
from recovery.core.model import DEFAULT_ACTIVE_WITHIN_S, CheckpointFile, ClusterView, Plan, TopicPartition
from recovery.core.plan import decide_repair, resolve_sink
from recovery.delta.sink import refuse_sink_skip
from recovery.errors import LossBudgetExceeded, PlanOutdated
from recovery.kafka.config import KafkaConfig
from recovery.resume import checkpoint_view, cluster_for, sink_facts
from recovery.topic_ids import TOPIC_IDS_FILE, record_topic_ids, topic_ids_file

log = logging.getLogger(__name__)


class _Announcement(TypedDict, total=False):
    """The backup set a lock's first intent record names: keywords of :func:`checkpoint_lock`."""

    backup_id: str
    backup_root: str
    files: tuple[str, ...]
    none_listed: bool


@dataclass(frozen=True)
class Applied:
    """What :func:`apply` wrote: the plan as re-made on fresh offsets, and the backup of the originals."""

    plan: Plan
    backup: BackupSet | None  # None when nothing needed to change
    recorded_topic_ids: Mapping[str, str]
    recovered: Interrupted | None = None  # a killed command this one rolled back first


def apply(
    plan: Plan,
    kafka: KafkaConfig,
    *,
    storage_options: StorageOptions | None = None,
    backup_dir: str | None = None,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
    sink: str | None = None,
    accept_sink_skip: bool = False,
    recorded_by: str = "apply",
    checkpoint: Checkpoint | None = None,
) -> Applied:
    """Apply ``plan`` to its checkpoint, or refuse and write nothing (see the module docstring).

    The fresh plan is the one applied (``Applied.plan``): a value that moved with the log (a log
    start after retention, a log end after new records) is taken as it is now, and the budget is
    checked on it.

    ``checkpoint``: the handle ``plan`` was made from (read before the lock). On an object store it
    is checked under the lock against one fresh LIST of ``offsets/`` and ``commits/`` and the lock's
    own listing of ``_recovery/`` (:meth:`~recovery.checkpoint.reader.Checkpoint.still_current`)
    instead of every file being read again; when anything differs or cannot be proven, and always
    on local paths, the checkpoint is read again, as without it. Either way the re-plan, the in-use
    check and every refusal above run under the lock. Its listing of ``_recovery/``, when it shows
    no intent record, also stands in for reading that record before the lock's own is created
    (``none_listed`` of :func:`~recovery.checkpoint.checkpoint_lock`): pass a handle read just now.

    Example: ``apply(plan_repair("/chk", kafka), kafka).backup.id``
    """
    if plan.refused:
        raise LossBudgetExceeded(f"{plan.checkpoint}: repair refused: {plan.refused}. Nothing was written.")
    reuse = checkpoint if _reusable(checkpoint, plan) else None
    announce: _Announcement = _announced_backup(reuse, plan, backup_dir, storage_options) if reuse else {}
    # The lock first: it rolls back a killed command, so what is read and re-planned is the original.
    with checkpoint_lock(plan.checkpoint, storage_options, command=recorded_by, **announce) as lock:
        if (
            reuse is not None
            and lock.depth == 1
            and lock.recovered is None
            and lock.recovery_listing is not None
            and reuse.still_current(lock.recovery_listing, volatile=_VOLATILE)
        ):
            chk = reuse  # verified unchanged since the plan, with the listings made under the lock
        else:
            chk = open_checkpoint(plan.checkpoint, storage_options)
        if not force:
            refuse_if_in_use(chk, active_within_s)
        # The same facts the plan was made from: the sink's batch, the recreation evidence.
        view, _ = checkpoint_view(chk)
        view = sink_facts(view, plan.sink.table if plan.sink else None, storage_options)
        cluster = cluster_for(kafka, resolve_sink(view), plan.isolation)
        strategy, policy = plan.made_with or (None, None)
        fresh = replace(decide_repair(view, cluster, strategy, policy), isolation=plan.isolation)
        if fresh.refused:
            raise LossBudgetExceeded(
                f"{plan.checkpoint}: repair refused on offsets read just now: {fresh.refused}. "
                "Nothing was written."
            )
        # After rolling back a killed command the checkpoint is the original again, so the plan made
        # on the half-written one is outdated by design: the fresh plan (policy checked above) wins.
        if lock.recovered is None and _touched(fresh) != _touched(plan):
            raise PlanOutdated(
                f"{plan.checkpoint}: the checkpoint or the cluster changed since the plan was made "
                "(partitions or batch files differ); plan the repair again. Nothing was written."
            )
        if sink is not None and not accept_sink_skip:
            # A batch the sink holds is skipped by Spark: its offsets/N is where batch N+1 starts,
            # and changing it is the point of the plan, not a batch the sink would skip.
            skipped = fresh.sink_skips_batch
            files = [f for f in fresh.files if skipped is None or f != CheckpointFile.offsets(skipped)]
            refuse_sink_skip(chk, sink, files, storage_options)
        healthy = _healthy_topic_ids(fresh, cluster)
        if not fresh.changes:
            return Applied(fresh, None, record_topic_ids(chk, healthy, recorded_by), lock.recovered)
        batches: dict[int, dict[int | str, dict[TopicPartition, int | None]]] = {}
        initial: dict[int | str, dict[TopicPartition, int | None]] = {}
        for change in fresh.changes:
            values = initial if change.file.is_initial else batches.setdefault(change.file.batch_id, {})
            values.setdefault(change.source_id, {})[change.tp] = change.new
        # The id record changes with the offsets, in the same backup set: a restore puts both back.
        ids, ids_file = topic_ids_file(chk, healthy, recorded_by, int(time.time() * 1000))
        backup = rewrite_offsets(
            chk,
            batches,
            initial=initial,
            backup_dir=backup_dir,
            storage_options=storage_options,
            extra={TOPIC_IDS_FILE: ids_file},
            force=True,  # the in-use check ran above, under this same lock (or was forced)
        )
        log.info("%s: rewrote %s; backup %s", chk.location, ", ".join(map(str, fresh.files)), backup.id)
        return Applied(fresh, backup, ids, lock.recovered)


# The ``_recovery/`` records that change without a writing command of the toolkit: the query's
# heartbeat (read under the lock by the in-use check) and the caller's own intent record.
_VOLATILE = frozenset({HEARTBEAT_FILE.rpartition("/")[2], INTENT_FILE.rpartition("/")[2]})


def _reusable(checkpoint: Checkpoint | None, plan: Plan) -> bool:
    """Whether ``checkpoint`` is a handle on the plan's own checkpoint, on an object store (local
    reads cost nothing, and a local reader must see what another process wrote)."""
    return (
        checkpoint is not None
        and not checkpoint.store.is_local
        and checkpoint.location == plan.checkpoint.rstrip("/")
    )


def _announced_backup(
    chk: Checkpoint, plan: Plan, backup_dir: str | None, storage_options: StorageOptions | None
) -> _Announcement:
    """The backup set the lock's first intent record names (see :func:`checkpoint_lock`): the id
    chosen now (one LIST of the backup directory, as it always was) and the files the plan changes
    plus the topic-id record, which :func:`recovery.checkpoint.rewrite.apply_rewrite` then finds
    already announced. Nothing when the plan changes nothing."""
    if not plan.changes:
        return {}
    root = backup_root(chk.store, backup_dir, storage_options)
    files = (*dict.fromkeys(str(c.file) for c in plan.changes), TOPIC_IDS_FILE)
    listed = chk.store.listing(RECOVERY_DIR)
    # The plan's listing of _recovery/ shows no backups/ yet: no set there to avoid, so no LIST of
    # it (the id is the time to the microsecond; a set made since shows in the lock's listing,
    # which must equal the plan's for the plan's reads to be used).
    empty = backup_dir is None and listed is not None and not lists_backups(listed)
    # Nor an intent record: the lock creates its own only if there is still none, unread.
    intent = INTENT_FILE.rpartition("/")[2]
    none_listed = listed is not None and all(e.name != intent for e in listed)
    return {
        "backup_id": new_backup_id(root, known_empty=empty),
        "backup_root": root.location,
        "files": files,
        "none_listed": none_listed,
    }


def _touched(plan: Plan) -> set[tuple[CheckpointFile, str, TopicPartition, bool]]:
    return {(c.file, c.source_id, c.tp, c.new is None) for c in plan.changes}


def _healthy_topic_ids(plan: Plan, cluster: ClusterView) -> dict[str, str]:
    """Ids of the topics whose every partition is fine once ``plan`` is applied. A topic left with
    a problem (out of ``--topic`` scope, say) keeps its old id, so a recreation stays visible."""
    moved = {(m.source_id, m.tp) for m in plan.moves}
    troubled = {f.tp.topic for f in plan.findings if f.needs_action and (f.source_id, f.tp) not in moved}
    return {topic: id_ for topic, id_ in cluster.topic_ids.items() if topic not in troubled}
