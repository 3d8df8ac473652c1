"""Backup sets: the original bytes of the checkpoint files a command is about to change.

A set is a directory named by its id (the time, to the microsecond) under the backup directory
(``--backup-dir``, else the checkpoint's ``_recovery/backups``), holding ``files/<path>`` for each
file and ``manifest.json``: each file's path, sha256 and size, and the paths that did not exist.
The manifest is written last, so a set without one is incomplete: reported, never used. Every path
a manifest names is checked to be a plain relative path inside the checkpoint that is not one of
the toolkit's own files (:func:`checked_rel_path`), and every file against its sha256 before it is
put back (:func:`verified_originals`).

Written by :mod:`recovery.checkpoint.rewrite` before it changes a file, read back by a restore
there and by the rollback of an interrupted command (:mod:`recovery.checkpoint.intent`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.recovery_dir import BACKUPS_DIR, RECOVERY_DIR, TOOLKIT_PATHS
from recovery.checkpoint.store import Entry, Store
from recovery.errors import CheckpointFormatError, InvalidInput

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class BackupFile:
    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class BackupSet:
    """A backup: the original bytes of some checkpoint files, and which of them did not exist."""

    id: str
    location: str
    created: str
    reason: str
    checkpoint: str
    query_id: str | None
    files: tuple[BackupFile, ...]
    absent: tuple[str, ...]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def backup_root(chk_store: Store, backup_dir: str | None, storage_options: StorageOptions | None) -> Store:
    """Where the checkpoint's backup sets go: ``backup_dir``, else its ``_recovery/backups``."""
    if backup_dir is None:
        return chk_store.child(BACKUPS_DIR)
    return chk_store.other(backup_dir, storage_options)


def new_backup_id(root: Store, *, known_empty: bool = False) -> str:
    """A backup set id (the time, to the microsecond) no set in ``root`` has; ``known_empty``: the
    caller knows ``root`` holds no set (no LIST needed)."""
    base = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    taken = set() if known_empty else {e.name for e in root.list()}
    candidate, n = base, 1
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def write_backup(
    chk_store: Store,
    paths: tuple[str, ...],
    *,
    reason: str,
    query_id: str | None,
    backup_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    backup_id: str | None = None,
) -> BackupSet:
    """Copy the current bytes of ``paths`` (relative to the checkpoint) into a new backup set;
    the manifest is written last, so a set without one is incomplete: reported, never used."""
    root = backup_root(chk_store, backup_dir, storage_options)
    backup_id = backup_id or new_backup_id(root)
    files: list[BackupFile] = []
    absent: list[str] = []
    for rel in dict.fromkeys(paths):
        data = chk_store.read(rel)
        if data is None:
            absent.append(rel)
            continue
        root.write(f"{backup_id}/files/{rel}", data)
        files.append(BackupFile(rel, _sha256(data), len(data)))
    backup = BackupSet(
        id=backup_id,
        location=root.display(backup_id),
        created=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        reason=reason,
        checkpoint=chk_store.location,
        query_id=query_id,
        files=tuple(files),
        absent=tuple(absent),
    )
    root.write(f"{backup_id}/{MANIFEST}", _manifest_json(backup).encode("utf-8"))
    return backup


def _manifest_json(backup: BackupSet) -> str:
    return json.dumps(
        {
            "format": MANIFEST_FORMAT,
            "id": backup.id,
            "created": backup.created,
            "reason": backup.reason,
            "checkpoint": backup.checkpoint,
            "query_id": backup.query_id,
            "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in backup.files],
            "absent": list(backup.absent),
        },
        indent=2,
    )


def checked_rel_path(rel: object, where: str) -> str:
    """``rel`` if it is a plain relative path inside the checkpoint: a string of ``/``-separated
    names, none empty, ``.`` or ``..``, no backslash or NUL, not the toolkit's own lock, intent
    record or backups. Anything else is bad input naming ``where``."""
    if not isinstance(rel, str) or not rel:
        raise CheckpointFormatError(f"{where}: path {rel!r} is not a relative file path")
    parts = rel.split("/")
    if (
        rel.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or "\\" in rel
        or "\x00" in rel
        or ":" in parts[0]
    ):
        raise CheckpointFormatError(
            f"{where}: path {rel!r} is not a plain relative path inside the checkpoint"
        )
    if any(rel == p or rel.startswith(p + "/") for p in TOOLKIT_PATHS):
        raise CheckpointFormatError(f"{where}: path {rel!r} names the toolkit's own files")
    return rel


def parse_manifest(data: bytes, root: Store, backup_id: str) -> BackupSet:
    """The set ``backup_id`` in ``root`` as its manifest (``data``) describes it; CheckpointFormatError
    naming the manifest when it is malformed."""
    path = root.display(f"{backup_id}/{MANIFEST}")
    try:
        value = json.loads(data)
        files = tuple(
            BackupFile(checked_rel_path(f["path"], path), str(f["sha256"]), int(f["size"]))
            for f in value["files"]
        )
        absent = tuple(checked_rel_path(p, path) for p in value.get("absent", ()))
        if str(value["id"]) != backup_id:
            raise ValueError(f"id {value['id']!r} is not the directory's name {backup_id!r}")
        if len({f.path for f in files} | set(absent)) != len(files) + len(absent):
            raise ValueError("a path is listed twice")
        if any(len(f.sha256) != 64 or f.size < 0 for f in files):
            raise ValueError("bad sha256 or size")
        return BackupSet(
            id=backup_id,
            location=root.display(backup_id),
            created=str(value["created"]),
            reason=str(value["reason"]),
            checkpoint=str(value["checkpoint"]),
            query_id=None if value.get("query_id") is None else str(value["query_id"]),
            files=files,
            absent=absent,
        )
    except CheckpointFormatError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointFormatError(f"{path}: not a backup manifest ({exc})") from None


def verified_originals(root: Store, backup: BackupSet) -> dict[str, bytes]:
    """The bytes of every file in ``backup`` (relative path -> bytes), each checked against the
    manifest's sha256 and size; CheckpointFormatError naming the first that is missing or differs."""
    originals: dict[str, bytes] = {}
    for f in backup.files:
        where = root.display(f"{backup.id}/files/{f.path}")
        data = root.read(f"{backup.id}/files/{f.path}")
        if data is None:
            raise CheckpointFormatError(f"{where}: missing from the backup")
        if _sha256(data) != f.sha256 or len(data) != f.size:
            raise CheckpointFormatError(f"{where}: sha256 does not match the manifest; not restoring")
        originals[f.path] = data
    return originals


def require_location(store: Store) -> None:
    """Raise CheckpointFormatError (bad input) when nothing exists at the checkpoint's location:
    there is no checkpoint to list backups of or restore into (a mistyped path, say)."""
    if not store.exists():
        raise CheckpointFormatError(f"{store.display()}: does not exist; no checkpoint here")


def list_backups(
    location: str,
    storage_options: StorageOptions | None = None,
    *,
    backup_dir: str | None = None,
) -> tuple[BackupSet, ...]:
    """Complete backup sets of the checkpoint at ``location``, oldest first."""
    root = backup_root(Store(location, storage_options), backup_dir, storage_options)
    if backup_dir is None:
        refuse_symlinked_backups(Store(location, storage_options))
    out = []
    for entry in root.list():
        if not entry.is_dir:
            continue
        data = root.read(f"{entry.name}/{MANIFEST}")
        if data is not None:
            out.append(parse_manifest(data, root, entry.name))
    return tuple(sorted(out, key=lambda b: b.id))


def incomplete_backups(
    location: str,
    storage_options: StorageOptions | None = None,
    *,
    backup_dir: str | None = None,
) -> tuple[str, ...]:
    """Backup set directories without a manifest (a command was killed while writing them): they
    are reported, never used for a restore."""
    root = backup_root(Store(location, storage_options), backup_dir, storage_options)
    return tuple(e.name for e in root.list() if e.is_dir and root.read(f"{e.name}/{MANIFEST}") is None)


def refuse_symlinked_backups(chk_store: Store) -> None:
    """The default backup directory must be real directories inside the checkpoint: a ``_recovery``
    or ``_recovery/backups`` symlink is refused (name an explicit ``backup_dir`` instead)."""
    for rel in (RECOVERY_DIR, BACKUPS_DIR):
        if chk_store.is_symlink(rel):
            raise InvalidInput(
                f"{chk_store.display(rel)}: is a symlink; refusing to use it for backups "
                "(name the backup directory explicitly with `backup_dir`)"
            )


def lists_backups(recovery: Iterable[Entry]) -> bool:
    """Whether a listing of ``_recovery/`` shows the checkpoint's own backup directory."""
    name = BACKUPS_DIR.rpartition("/")[2]
    return any(e.name == name for e in recovery)
