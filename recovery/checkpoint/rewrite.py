"""Rewriting Kafka offsets in place, with a backup first; listing and restoring backups.

    plan = plan_offset_rewrite(chk, {5: {0: {TopicPartition("orders", 1): 300}}})   # pure: bytes only
    backup = apply_rewrite(chk, plan)                                                # backup, then write

Rules (spec §5, §7, §8): only existing batch files are rewritten -- never created, deleted or
renumbered; the version line, the metadata line and every other source's line stay byte-identical;
each file is replaced atomically; the ``.crc`` side file is regenerated (local file system) or a stale
one removed (stores without side files). Before the first write, the original bytes of every file
about to change (side files included) go to a backup set with a sha256 manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from recovery.checkpoint import format as fmt
from recovery.checkpoint.crc import DEFAULT_BYTES_PER_CHECKSUM, checksum_file, crc_name, parse_checksum_file
from recovery.checkpoint.reader import Checkpoint
from recovery.checkpoint.store import Store
from recovery.errors import CheckpointFormatError, InvalidInput, PlanOutdated, StateError, StorageError
from recovery.model import TopicPartition

BACKUPS_DIR = "_recovery/backups"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1

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


@dataclass(frozen=True)
class RestoreResult:
    backup: BackupSet
    written: tuple[str, ...]  # files put back (their bytes differed)
    removed: tuple[str, ...]  # files that did not exist when the backup was taken
    unchanged: tuple[str, ...]
    safety_backup: BackupSet | None  # the state before the restore (None on a dry run)
    executed: bool


def _crc_rel(rel: str) -> str:
    parent, _, name = rel.rpartition("/")
    return f"{parent}/{crc_name(name)}" if parent else crc_name(name)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


# -- backups ---------------------------------------------------------------------------------------


def _backup_root(
    chk_store: Store, backup_dir: str | None, storage_options: Mapping[str, Any] | None
) -> Store:
    if backup_dir is None:
        return chk_store.child(BACKUPS_DIR)
    return Store(backup_dir, storage_options if storage_options is not None else chk_store.storage_options)


def _new_backup_id(root: Store) -> str:
    base = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    taken = {e.name for e in root.list()}
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
    storage_options: Mapping[str, Any] | None = None,
) -> BackupSet:
    """Copy the current bytes of ``paths`` (relative to the checkpoint) into a new backup set;
    the manifest is written last, so a set without one is incomplete and ignored."""
    root = _backup_root(chk_store, backup_dir, storage_options)
    backup_id = _new_backup_id(root)
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


def _parse_manifest(data: bytes, root: Store, backup_id: str) -> BackupSet:
    path = root.display(f"{backup_id}/{MANIFEST}")
    try:
        value = json.loads(data)
        files = tuple(BackupFile(str(f["path"]), str(f["sha256"]), int(f["size"])) for f in value["files"])
        return BackupSet(
            id=str(value["id"]),
            location=root.display(backup_id),
            created=str(value["created"]),
            reason=str(value["reason"]),
            checkpoint=str(value["checkpoint"]),
            query_id=value.get("query_id"),
            files=files,
            absent=tuple(str(p) for p in value.get("absent", ())),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointFormatError(f"{path}: not a backup manifest ({exc})") from None


def list_backups(
    location: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    backup_dir: str | None = None,
) -> tuple[BackupSet, ...]:
    """Complete backup sets of the checkpoint at ``location``, oldest first."""
    root = _backup_root(Store(location, storage_options), backup_dir, storage_options)
    out = []
    for entry in root.list():
        if not entry.is_dir:
            continue
        data = root.read(f"{entry.name}/{MANIFEST}")
        if data is not None:
            out.append(_parse_manifest(data, root, entry.name))
    return tuple(sorted(out, key=lambda b: b.id))


# -- apply -----------------------------------------------------------------------------------------


def _side_file(store: Store, rel: str, data: bytes) -> bytes | None:
    """The new side file for ``rel`` holding ``data``; ``None`` = there must be none."""
    if not store.keeps_crc:
        return None
    old = store.read(_crc_rel(rel))
    parsed = parse_checksum_file(old) if old is not None else None
    return checksum_file(data, parsed.bytes_per_checksum if parsed else DEFAULT_BYTES_PER_CHECKSUM)


def _replace_files(store: Store, files: Mapping[str, bytes | None]) -> None:
    """Write each data file and then its side file, each atomically; ``None`` removes."""
    for rel, data in files.items():
        if data is None:
            store.remove(rel)
        else:
            store.write_atomic(rel, data)


def apply_rewrite(
    chk: Checkpoint,
    plan: RewritePlan,
    *,
    backup_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    extra: Mapping[str, bytes] | None = None,
) -> BackupSet:
    """Back up, then replace each planned file and its side file. Raises PlanOutdated (nothing
    written) if a file changed since the plan was made.

    ``extra`` are further files (relative path -> new bytes; the tool's own bookkeeping under
    ``_recovery/``) written last and kept in the same backup set, so a restore puts them back too.
    If a write fails part-way, every file already replaced is put back from the originals and the
    error names the backup set; the checkpoint is never left half-rewritten.
    """
    store = chk.store
    for change in plan.changes:
        if store.read(change.path) != change.before:
            raise PlanOutdated(
                f"{store.display(change.path)}: changed since the plan was made; nothing was written"
            )
    extra = dict(extra or {})
    paths = tuple(p for c in plan.changes for p in (c.path, _crc_rel(c.path))) + tuple(extra)
    originals = {rel: store.read(rel) for rel in paths}
    backup = write_backup(
        store,
        paths,
        reason="rewrite-offsets",
        query_id=chk.query_id,
        backup_dir=backup_dir,
        storage_options=storage_options,
    )
    try:
        for change in plan.changes:
            crc = _side_file(store, change.path, change.after)
            _replace_files(store, {change.path: change.after, _crc_rel(change.path): crc})
        _replace_files(store, extra)
    except BaseException as exc:  # an interrupt too: never leave the checkpoint half-rewritten
        _roll_back(store, originals, backup, exc)
    return backup


def _roll_back(
    store: Store, originals: Mapping[str, bytes | None], backup: BackupSet, exc: BaseException
) -> NoReturn:
    """Put every file back as it was before a failed rewrite, then raise what happened."""
    restore = (
        f"`stream-recovery checkpoint restore {store.display()} --backup {backup.id} "
        f"--backup-dir {backup.location.rsplit('/', 1)[0]} --execute`"
    )
    try:
        for rel, data in originals.items():
            if store.read(rel) != data:
                _replace_files(store, {rel: data})
    except Exception as again:
        raise StorageError(
            f"{store.display()}: rewriting failed ({exc!r}) and so did putting the originals back ({again}); "
            f"restore them with {restore}"
        ) from exc
    if not isinstance(exc, Exception):
        raise exc  # an interrupt: the files are back; let it end the program as it would have
    raise StorageError(
        f"{store.display()}: rewriting failed ({exc}); the original files were put back "
        f"(they are also in backup {backup.id})"
    ) from exc


def rewrite_offsets(
    chk: Checkpoint,
    batches: Mapping[int, Mapping[int | str, OffsetChanges]] | None = None,
    *,
    initial: Mapping[int | str, OffsetChanges] | None = None,
    backup_dir: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    extra: Mapping[str, bytes] | None = None,
) -> BackupSet:
    """Set Kafka offsets in existing batch files (and ``sources/<i>/0``), in place, after a backup;
    ``extra`` files ride along in the same backup set (see :func:`apply_rewrite`).

    Example: ``rewrite_offsets(chk, {5: {0: {TopicPartition("orders", 1): 300}}})``
    """
    plan = plan_offset_rewrite(chk, batches, initial=initial)
    return apply_rewrite(chk, plan, backup_dir=backup_dir, storage_options=storage_options, extra=extra)


# -- restore ---------------------------------------------------------------------------------------


def restore_backup(
    location: str,
    backup_id: str | None = None,
    *,
    execute: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    backup_dir: str | None = None,
) -> RestoreResult:
    """Put a backup set back byte for byte (the newest if ``backup_id`` is None).

    Verifies every file against the manifest's sha256 first; with ``execute`` it backs up the current
    state of the same files, then writes each back atomically and removes files the backup records
    as absent. Without ``execute`` it only reports what would change.
    """
    store = Store(location, storage_options)
    backups = list_backups(location, storage_options, backup_dir=backup_dir)
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
    root = _backup_root(store, backup_dir, storage_options)
    originals: dict[str, bytes] = {}
    for f in backup.files:
        data = root.read(f"{backup.id}/files/{f.path}")
        if data is None:
            raise CheckpointFormatError(
                f"{root.display(f'{backup.id}/files/{f.path}')}: missing from the backup"
            )
        if _sha256(data) != f.sha256 or len(data) != f.size:
            raise CheckpointFormatError(
                f"{root.display(f'{backup.id}/files/{f.path}')}: sha256 does not match the manifest; "
                "not restoring"
            )
        originals[f.path] = data
    current = {rel: store.read(rel) for rel in (*originals, *backup.absent)}
    written = tuple(rel for rel, data in originals.items() if current[rel] != data)
    removed = tuple(rel for rel in backup.absent if current[rel] is not None)
    unchanged = tuple(
        rel for rel in (*originals, *backup.absent) if rel not in written and rel not in removed
    )
    safety = None
    if execute and (written or removed):
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
        safety = write_backup(
            store,
            (*written, *removed),
            reason=f"restore-of-{backup.id}",
            query_id=query_id,
            backup_dir=backup_dir,
            storage_options=storage_options,
        )
        # Data files before their side files, as Spark's ChecksumFs rename does.
        ordered = sorted((*written, *removed), key=lambda rel: rel.rpartition("/")[2].endswith(".crc"))
        _replace_files(store, {rel: originals.get(rel) for rel in ordered})
    return RestoreResult(backup, written, removed, unchanged, safety, execute)


def plan_delta_rewrite(
    chk: Checkpoint, batches: Mapping[int, Mapping[int | str, fmt.DeltaSourceOffset]]
) -> RewritePlan:
    """The new bytes of each ``offsets/<N>`` whose Delta source lines change (added for
    recovery.delta). ``batches``: ``{batch_id: {source_id: DeltaSourceOffset}}``; apply with
    :func:`apply_rewrite`, which backs up first and re-checks every file."""
    return RewritePlan(chk.location, tuple(_batch_changes(chk, batches, fmt.with_delta_offset)))


def _batch_changes(
    chk: Checkpoint,
    batches: Mapping[int, Mapping[int | str, Any]],
    edit: Callable[[fmt.OffsetLogEntry, int | str, Any], fmt.OffsetLogEntry],
) -> list[FileChange]:
    """``edit`` each source's line of each existing ``offsets/<N>``; the files whose bytes change."""
    changes: list[FileChange] = []
    for batch_id, per_source in sorted(batches.items()):
        rel = f"offsets/{batch_id}"
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
