"""Rewriting Kafka offsets in place, with a backup first; restoring a backup set.
(Backup sets themselves: :mod:`~recovery.checkpoint.backup`.)

    plan = plan_offset_rewrite(chk, {5: {0: {TopicPartition("orders", 1): 300}}})   # pure: bytes only
    backup = apply_rewrite(chk, plan)                                                # backup, then write

Rules (spec §5, §7, §8): only existing batch files are rewritten -- never created, deleted or
renumbered; the version line, the metadata line and every other source's line stay byte-identical;
each file is replaced atomically. Before the first write, the original bytes of every file about to
change (side files included) go to a backup set with a sha256 manifest.

Crash safety (every writing function holds :func:`~recovery.checkpoint.intent.checkpoint_lock`, and
the change itself is made by the one writer, :func:`~recovery.checkpoint.executor.execute_change`):

* the intent record ``_recovery/intent.json`` is written before the backup set and again (phase
  ``write``) once its manifest exists, before the first checkpoint file changes;
* each file with a Hadoop ``.crc`` side file is replaced as: remove the stale side file, replace the
  data file (temp file + rename), write the new side file. Hadoop's ChecksumFileSystem/ChecksumFs
  accept a data file without a side file (``FileNotFoundException`` on the ``.crc`` is "quietly
  ignored") but fail on a wrong one, so Spark can read the checkpoint at every kill point;
* ``.crc`` side files exist only on the local file system (ChecksumFs); on object stores none is
  created, deleted or recorded in a manifest;
* a failure rolls the files back in-process; a kill leaves the intent record, and the next writing
  command rolls back from the backup set before doing anything else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from recovery.checkpoint import format as fmt
from recovery.checkpoint.backup import (
    MANIFEST,
    BackupSet,
    backup_root,
    checked_rel_path,
    list_backups,
    lists_backups,
    new_backup_id,
    refuse_symlinked_backups,
    require_location,
    verified_originals,
)
from recovery.checkpoint.executor import execute_change
from recovery.checkpoint.heartbeat import refuse_if_in_use
from recovery.checkpoint.intent import Interrupted, Lock, checkpoint_lock
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.reader import Checkpoint
from recovery.checkpoint.replacement import crc_rel, side_file, with_side_files
from recovery.checkpoint.store import Store
from recovery.core.model import DEFAULT_ACTIVE_WITHIN_S, CheckpointFile, TopicPartition
from recovery.errors import (
    CheckpointFormatError,
    ExitCode,
    InvalidInput,
    PlanOutdated,
    StateError,
)

log = logging.getLogger(__name__)

OffsetChanges = Mapping[TopicPartition, int | None]


@dataclass(frozen=True)
class FileChange:
    """One checkpoint file to replace: its bytes now and after."""

    path: str
    before: bytes
    after: bytes


@dataclass(frozen=True)
class RewritePlan:
    checkpoint: str
    changes: tuple[FileChange, ...]


@dataclass(frozen=True)
class RestoreResult:
    """What a restore put back (or, on a dry run, would put back)."""

    backup: BackupSet
    written: tuple[str, ...]  # files put back (their bytes differed)
    removed: tuple[str, ...]  # files that did not exist when the backup was taken
    unchanged: tuple[str, ...]
    safety_backup: BackupSet | None  # the state before the restore (None on a dry run)
    executed: bool
    recovered: Interrupted | None = None  # an interrupted command rolled back first

    @property
    def has_changes(self) -> bool:
        return bool(self.written or self.removed)

    @property
    def exit_code(self) -> ExitCode:
        """0 restored or nothing to change; 1 a dry run with changes pending (as ``repair``)."""
        return ExitCode.ACTION_NEEDED if self.has_changes and not self.executed else ExitCode.OK


# -- plan ------------------------------------------------------------------------------------------


def plan_offset_rewrite(
    chk: Checkpoint,
    batches: Mapping[int, Mapping[int | str, OffsetChanges]] | None = None,
    *,
    initial: Mapping[int | str, OffsetChanges] | None = None,
) -> RewritePlan:
    """The new bytes of each file to change. ``batches``: ``{batch_id: {source_id: {tp: offset}}}``;
    ``initial``: ``{source_id: {tp: offset}}`` for ``sources/<i>/0``. ``None`` as an offset drops
    the partition. Files whose bytes would not change are left out."""
    changes = _batch_changes(chk, batches or {}, fmt.with_kafka_offsets)
    for source_id, tps in sorted((initial or {}).items(), key=lambda kv: str(kv[0])):
        rel = f"sources/{source_id}/0"
        current = chk.initial_offsets(source_id)
        if current is None:
            raise InvalidInput(f"{chk.store.display(rel)}: no Kafka initial-offset file to rewrite")
        try:
            updated = fmt.with_initial_kafka_offsets(current, tps)
        except ValueError as exc:
            raise InvalidInput(f"{chk.store.display(rel)}: {exc}") from None
        before = chk.read(rel)
        assert before is not None
        after = fmt.serialize_initial_offsets(updated)
        if after != before:
            changes.append(FileChange(rel, before, after))
    return RewritePlan(chk.location, tuple(changes))


# -- apply -----------------------------------------------------------------------------------------


def apply_rewrite(
    chk: Checkpoint,
    plan: RewritePlan,
    *,
    backup_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    extra: Mapping[str, bytes] | None = None,
    command: str = "apply_rewrite",
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
) -> BackupSet:
    """Back up, then replace each planned file and its side file. Raises PlanOutdated (nothing
    written) if a file changed since the plan was made.

    Holds the checkpoint's lock (:func:`~recovery.checkpoint.intent.checkpoint_lock`; reused if the
    caller holds it) and refuses a checkpoint Spark could not restart from (CheckpointFormatError)
    and, unless ``force``, one a query looks like it runs on (CheckpointInUse: a fresh heartbeat,
    else a batch file younger than ``active_within_s``; callers that checked under the same lock
    pass ``force``).
    ``extra`` are further files (relative path -> new bytes; the tool's own bookkeeping under
    ``_recovery/``) written last and kept in the same backup set, so a restore puts them back too.
    If a write fails part-way, every file already replaced is put back from the originals and the
    error names the backup set; the checkpoint is never left half-rewritten.
    """
    store = chk.store
    with checkpoint_lock(store, command=command) as lock:
        if lock.recovered is not None and lock.depth == 1:  # the plan predates the rollback
            raise PlanOutdated(
                f"{store.display()}: {lock.recovered.intent.holder.describe()} had been interrupted and "
                "was rolled back just now; plan again. Nothing else was written"
            )
        for change in plan.changes:
            if store.read(change.path) != change.before:
                raise PlanOutdated(
                    f"{store.display(change.path)}: changed since the plan was made; nothing was written"
                )
        if lock.depth == 1:
            # Re-read under the lock: never write into what Spark cannot read. A caller that held
            # the lock already (a repair) opened ``chk`` under it: reading the checkpoint again
            # would only cost requests (9 on an object store).
            chk = Checkpoint(store)
            chk.verify()
        if not force:
            refuse_if_in_use(chk, active_within_s)  # a running query would overwrite or skip them
        extra = {checked_rel_path(rel, "extra file"): data for rel, data in (extra or {}).items()}
        paths = with_side_files(store, tuple(c.path for c in plan.changes) + tuple(extra))
        root = backup_root(store, backup_dir, storage_options)
        if backup_dir is None:
            refuse_symlinked_backups(store)
        announced = lock.intent.backup_id if lock.intent is not None else None
        if (
            announced
            and lock.announces(announced, root.location, paths)
            and not _set_exists(announced, root, backup_dir, lock)
        ):
            backup_id, recorded = announced, True  # the record written when the lock was taken says so
        else:
            backup_id = new_backup_id(root, known_empty=backup_dir is None and _no_backups_yet(lock))
            recorded = False
        new: dict[str, bytes | None] = {}
        for change in plan.changes:
            new[change.path] = change.after
            if store.keeps_crc:
                new[crc_rel(change.path)] = side_file(store, change.path, change.after)
        new.update(extra)
        backup = execute_change(
            store,
            lock,
            new,
            backup_id=backup_id,
            backup_root=root,
            reason="rewrite-offsets",
            query_id=chk.query_id,
            backup_dir=backup_dir,
            storage_options=storage_options,
            backed_up=paths,
            announced=recorded,
        )
    log.info(
        "%s: rewrote %s; the originals are in backup %s",
        store.display(),
        ", ".join(c.path for c in plan.changes) or "nothing",
        backup.id,
    )
    return backup


def _set_exists(backup_id: str, root: Store, backup_dir: str | None, lock: Lock) -> bool:
    """Whether ``root`` already holds a set named ``backup_id`` (an id chosen before the lock was
    taken, so a set made meanwhile could have it): no, when the lock's listing of ``_recovery/``
    shows no ``backups/`` at all; else one LIST of ``root`` says (never write over another set)."""
    listing = lock.recovery_listing
    if backup_dir is None and listing is not None and not lists_backups(listing):
        return False
    return backup_id in {e.name for e in root.list()}


def _no_backups_yet(lock: Lock) -> bool:
    """Whether the checkpoint's own backup directory holds no set: the listing of ``_recovery/``
    made once ``lock`` was held shows no ``backups/``, and no set was begun under the lock since.
    Every set there is made under this lock, so none can have appeared meanwhile."""
    listing = lock.recovery_listing
    return (
        listing is not None
        and (lock.intent is None or lock.intent.backup_id is None)
        and not lists_backups(listing)
    )


def rewrite_offsets(
    chk: Checkpoint,
    batches: Mapping[int, Mapping[int | str, OffsetChanges]] | None = None,
    *,
    initial: Mapping[int | str, OffsetChanges] | None = None,
    backup_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    extra: Mapping[str, bytes] | None = None,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
) -> BackupSet:
    """Set Kafka offsets in existing batch files (and ``sources/<i>/0``), in place, after a backup;
    ``extra`` files ride along in the same backup set; refused while a query runs on the checkpoint
    unless ``force`` (see :func:`apply_rewrite`).

    Example: ``rewrite_offsets(chk, {5: {0: {TopicPartition("orders", 1): 300}}})``
    """
    with checkpoint_lock(chk.store, command="rewrite_offsets") as lock:
        if lock.depth == 1:  # re-read under the lock, unless the caller opened chk holding it
            chk = Checkpoint(chk.store, verify_crc=chk.verify_crc)
        plan = plan_offset_rewrite(chk, batches, initial=initial)
        return apply_rewrite(
            chk,
            plan,
            backup_dir=backup_dir,
            storage_options=storage_options,
            extra=extra,
            force=force,
            active_within_s=active_within_s,
        )


# -- restore ---------------------------------------------------------------------------------------


def restore_backup(
    location: str,
    backup_id: str | None = None,
    *,
    execute: bool = False,
    storage_options: StorageOptions | None = None,
    backup_dir: str | None = None,
    force: bool = False,
    active_within_s: float = DEFAULT_ACTIVE_WITHIN_S,
) -> RestoreResult:
    """Put a backup set back byte for byte (the newest if ``backup_id`` is None).

    Verifies the manifest (every path a plain relative path inside the checkpoint, see
    :func:`checked_rel_path`) and every file against its sha256 first; with ``execute`` it takes the
    checkpoint's lock, backs up the current state of the same files, then writes each back
    atomically (side files as in :func:`apply_rewrite`) and removes files the backup records as
    absent. Without ``execute`` it only reports what would change. Raises CheckpointFormatError (bad
    input) when nothing exists at ``location``, the checkpoint or the manifest is malformed, a path
    to write passes through a symlink; StateError when it has no backups; CheckpointInUse when a
    query runs on the checkpoint (its heartbeat, else a batch file younger than ``active_within_s``;
    see :func:`recovery.checkpoint.heartbeat.refuse_if_in_use`) and there is something to write,
    unless ``force``.

    Example: ``restore_backup("/data/chk", execute=True).written``
    """
    store = Store(location, storage_options)
    require_location(store)
    if not execute:
        return _restore(store, backup_id, None, storage_options=storage_options, backup_dir=backup_dir)
    with checkpoint_lock(store, command="restore_backup") as lock:
        return _restore(
            store,
            backup_id,
            lock,
            storage_options=storage_options,
            backup_dir=backup_dir,
            in_use_within_s=None if force else active_within_s,
        )


def _restore(
    store: Store,
    backup_id: str | None,
    lock: Lock | None,
    *,
    storage_options: StorageOptions | None,
    backup_dir: str | None,
    in_use_within_s: float | None = None,
) -> RestoreResult:
    # Never write into a checkpoint Spark could not restart from (bad input, exit 2).
    chk = Checkpoint(store)
    chk.verify()
    backups = list_backups(store.location, storage_options, backup_dir=backup_dir)
    if not backups:
        raise StateError(f"{store.display()}: no backups found")
    if backup_id is None:
        backup = backups[-1]
    else:
        matches = [b for b in backups if b.id == backup_id]
        if not matches:
            raise InvalidInput(
                f"{store.display()}: no backup {backup_id!r} (have: {', '.join(b.id for b in backups)})"
            )
        backup = matches[0]
    root = backup_root(store, backup_dir, storage_options)
    originals = verified_originals(root, backup)
    for rel in (*originals, *backup.absent):
        _refuse_symlinked_components(store, rel, root.display(f"{backup.id}/{MANIFEST}"))
    current = {rel: store.read(rel) for rel in (*originals, *backup.absent)}
    written = tuple(rel for rel, data in originals.items() if current[rel] != data)
    removed = tuple(rel for rel in backup.absent if current[rel] is not None)
    unchanged = tuple(
        rel for rel in (*originals, *backup.absent) if rel not in written and rel not in removed
    )
    recovered = lock.recovered if lock else None
    if lock is None or not (written or removed):
        return RestoreResult(backup, written, removed, unchanged, None, lock is not None, recovered)
    metadata = store.read("metadata")
    query_id = None
    if metadata is not None:
        try:
            query_id = fmt.parse_stream_metadata(metadata, path=store.display("metadata")).query_id
        except CheckpointFormatError:
            query_id = None
    if backup.query_id and query_id and backup.query_id != query_id:
        raise StateError(
            f"{store.display('metadata')}: query id {query_id} differs from the backup's "
            f"{backup.query_id}; "
            "not restoring into another query's checkpoint"
        )
    if in_use_within_s is not None:
        refuse_if_in_use(chk, in_use_within_s)  # a running query would ignore or overwrite them
    safety = execute_change(
        store,
        lock,
        {rel: originals.get(rel) for rel in (*written, *removed)},
        backup_id=new_backup_id(root),
        backup_root=root,
        reason=f"restore-of-{backup.id}",
        query_id=query_id,
        backup_dir=backup_dir,
        storage_options=storage_options,
    )
    log.info(
        "%s: restored backup %s (%d files written, %d removed); the previous files are in backup %s",
        store.display(),
        backup.id,
        len(written),
        len(removed),
        safety.id,
    )
    return RestoreResult(backup, written, removed, unchanged, safety, True, recovered)


def _refuse_symlinked_components(store: Store, rel: str, where: str) -> None:
    """A restore writes only through real directories of the checkpoint (no symlinked component)."""
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        if store.is_symlink("/".join(parts[:i])):
            raise CheckpointFormatError(
                f"{where}: path {rel!r} passes through the symlink {'/'.join(parts[:i])}; not restoring"
            )


def plan_delta_rewrite(
    chk: Checkpoint, batches: Mapping[int, Mapping[int | str, fmt.DeltaSourceOffset]]
) -> RewritePlan:
    """The new bytes of each ``offsets/<N>`` whose Delta source lines change (added for
    recovery.delta). ``batches``: ``{batch_id: {source_id: DeltaSourceOffset}}``; apply with
    :func:`apply_rewrite`, which backs up first and re-checks every file."""
    return RewritePlan(chk.location, tuple(_batch_changes(chk, batches, fmt.with_delta_offset)))


_SourceValue = TypeVar("_SourceValue")  # what one source's line becomes: Kafka changes, a Delta offset


def _batch_changes(
    chk: Checkpoint,
    batches: Mapping[int, Mapping[int | str, _SourceValue]],
    edit: Callable[[fmt.OffsetLogEntry, int | str, _SourceValue], fmt.OffsetLogEntry],
) -> list[FileChange]:
    """``edit`` each source's line of each existing ``offsets/<N>``; the files whose bytes change."""
    changes: list[FileChange] = []
    for batch_id, per_source in sorted(batches.items()):
        rel = str(CheckpointFile.offsets(batch_id))
        if batch_id not in chk.offset_batch_ids:
            raise InvalidInput(
                f"{chk.store.display(rel)}: no such batch file (batch files are never created)"
            )
        entry = chk.offsets(batch_id)
        for source_id, value in per_source.items():
            try:
                entry = edit(entry, source_id, value)
            except ValueError as exc:
                raise InvalidInput(f"{chk.store.display(rel)}: {exc}") from None
        before = chk.read(rel)
        assert before is not None
        after = fmt.serialize_offset_log(entry)
        if after != before:
            changes.append(FileChange(rel, before, after))
    return changes
