"""The one writer of a checkpoint's files: every change the toolkit makes to them (a repair's
rewrite of offsets, a Delta source's, a restore) is carried out here, under the checkpoint's lock.

    backup = execute_change(store, lock, {"offsets/5": new_bytes, "offsets/.5.crc": new_crc}, ...)

In order: the intent record names the backup set (phase ``backup``), the set is written (manifest
last), the record moves to phase ``write``, the files are replaced (:func:`replace_files`: Spark can
read each file at every step), and a failure puts every file back before it is raised. A kill at any
point leaves the record, and the next writing command rolls back from the set
(:func:`recovery.checkpoint.intent.roll_back_intent`, the one other caller of replace_files).

The callers decide what to change and whether they may (a plan still current, the query stopped,
the sink safe); this module only makes the change safely. What else writes into a checkpoint is the
toolkit's own bookkeeping under ``_recovery/`` (the lock's record, the topic ids, the heartbeat,
backup sets), each written atomically by its module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

from recovery.checkpoint.backup import BackupSet, write_backup
from recovery.checkpoint.intent import Lock, Phase
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.replacement import replace_files
from recovery.checkpoint.store import Store
from recovery.errors import InvalidInput, StorageError


def execute_change(
    store: Store,
    lock: Lock,
    new: Mapping[str, bytes | None],
    *,
    backup_id: str,
    backup_root: Store,
    reason: str,
    query_id: str | None,
    backup_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    backed_up: tuple[str, ...] | None = None,
    announced: bool = False,
) -> BackupSet:
    """Put ``new`` (path in the checkpoint ``store`` -> bytes; None removes the file) in place after
    backing up ``backed_up`` (default: the paths of ``new``) as set ``backup_id`` in ``backup_root``,
    holding ``lock`` (the checkpoint's).

    ``announced``: the lock's intent record names this set already (written when the lock was
    taken), so the phase ``backup`` record is not written again. On any failure, an interrupt
    too, every file is put back as it was and the error names the set (:func:`roll_back`)."""
    paths = tuple(new) if backed_up is None else backed_up
    originals = {rel: store.read(rel) for rel in paths}
    if not announced:
        lock.record(Phase.BACKUP, backup_id=backup_id, backup_root=backup_root.location, files=paths)
    backup = write_backup(
        store,
        paths,
        reason=reason,
        query_id=query_id,
        backup_dir=backup_dir,
        storage_options=storage_options,
        backup_id=backup_id,
    )
    lock.record(Phase.WRITE, backup_id=backup_id, backup_root=backup_root.location, files=paths)
    try:
        replace_files(store, new)
    except BaseException as exc:  # an interrupt too: never leave the checkpoint half-written
        roll_back(store, originals, backup, exc, lock)
    return backup


def roll_back(
    store: Store,
    originals: Mapping[str, bytes | None],
    backup: BackupSet,
    exc: BaseException,
    lock: Lock,
) -> NoReturn:
    """Put every file back as it was before a failed change, then raise what happened."""
    restore = (
        f"`restore_backup({store.display()!r}, backup_id={backup.id!r}, "
        f"backup_dir={backup.location.rsplit('/', 1)[0]!r}, execute=True)`"
    )
    try:
        replace_files(store, {rel: data for rel, data in originals.items() if store.read(rel) != data})
        for rel in originals:
            store.remove_temp_files(rel)
        lock.done()
    except Exception as again:
        raise StorageError(
            f"{store.display()}: rewriting failed ({exc!r}) and so did putting the originals back ({again}); "
            f"the next writing command rolls back from backup {backup.id}, or restore with {restore}"
        ) from exc
    if not isinstance(exc, Exception):
        raise exc  # an interrupt: the files are back; let it end the program as it would have
    if isinstance(exc, InvalidInput):  # disk full, permission, read-only: bad input (exit 2)
        raise InvalidInput(
            f"rewriting failed ({exc}); the original files were put back "
            f"(they are also in backup {backup.id})"
        ) from exc
    raise StorageError(
        f"{store.display()}: rewriting failed ({exc}); the original files were put back "
        f"(they are also in backup {backup.id})"
    ) from exc
