"""The intent record and lock of a checkpoint: ``_recovery/intent.json`` and a ``flock``.

Every command that writes into a checkpoint (repair, Delta source repair, restore) holds
:func:`checkpoint_lock` while it re-reads, plans and writes:

* **One writer at a time.** On a local file system the lock is an exclusive ``flock`` on the
  checkpoint directory (released by the kernel when the process dies). A second writer gets
  :class:`~recovery.errors.StateError` (exit 1) naming the holder: command, host, pid, start time.
  Object stores have no locks: there the intent record is the lock. On S3 it is created with a
  conditional PUT (``If-None-Match: *``), so of two writers one gets it; elsewhere, and on an
  S3-compatible server that ignores the condition, it is best effort (two writers starting within
  a few tens of milliseconds can both pass).
* **An intent record before the first change.** ``_recovery/intent.json`` says which command, which
  process, which backup set holds the originals, and whether writing has begun (``phase``). It is
  removed when the command finished or rolled itself back. If it is still there, the command was
  killed: every reader reports it (:func:`read_interrupted`), with the backup set to use.
* **Dead holders.** The next writing command (any of them) that finds the record of a process that
  is gone -- same host, and its pid no longer runs (or runs a different process) -- rolls the
  interrupted command back from its backup set, logs a warning saying so, and then goes on: the
  checkpoint is byte for byte what it was before the interrupted command began (``.crc`` included),
  and the command then does its own work. A holder on another host cannot be checked from here: the
  command refuses, naming it; once the operator has made sure it is gone,
  :func:`recover_interrupted` with ``take_over=True`` (``stream-recovery checkpoint recover PATH
  --take-over --execute``) rolls it back.

Nested use in one process is free: the innermost ``checkpoint_lock`` on the same checkpoint reuses
the one held by the caller.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial

from recovery.checkpoint.backup import MANIFEST, checked_rel_path, parse_manifest, verified_originals
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.recovery_dir import INTENT_FILE, LAST_WRITE_FILE, RECOVERY_DIR
from recovery.checkpoint.replacement import replace_files
from recovery.checkpoint.store import Entry, Store
from recovery.errors import CheckpointFormatError, ExitCode, InvalidInput, StateError

log = logging.getLogger(__name__)

INTENT_FORMAT = 1


class Phase(StrEnum):
    BACKUP = "backup"  # the backup set is being written; the checkpoint is untouched
    WRITE = "write"  # the backup set is complete; checkpoint files are being replaced


class HolderState(StrEnum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"  # another host: cannot be checked from here


@dataclass(frozen=True)
class Holder:
    """The process that holds (or held) a checkpoint's lock."""

    command: str  # what it runs: the library's function (restore_backup), or "prestart gate"
    host: str
    pid: int
    started: str  # ISO 8601 UTC
    proc_start: str | None = None  # /proc/<pid>/stat start time: tells a reused pid apart

    def describe(self) -> str:
        return f"`{self.command}` (host {self.host}, pid {self.pid}, started {self.started})"


@dataclass(frozen=True)
class Intent:
    """What a writing command is doing to a checkpoint (``_recovery/intent.json``)."""

    token: str
    holder: Holder
    phase: Phase
    backup_id: str | None = None
    backup_root: str | None = None  # the backup directory (URL) holding ``backup_id``
    files: tuple[str, ...] = ()  # checkpoint files the command changes


@dataclass(frozen=True)
class Interrupted:
    """An intent record left behind: a writing command is running now, or was killed."""

    intent: Intent
    state: HolderState

    @property
    def message(self) -> str:
        i = self.intent
        backup = (
            f"; the original files are in backup set {i.backup_id} ({i.backup_root})"
            if i.backup_id and i.phase is Phase.WRITE
            else "; it had not changed any checkpoint file yet"
        )
        if self.state is HolderState.ALIVE:
            return f"{i.holder.describe()} is writing this checkpoint now{backup}"
        how = (
            "running any writing command again (repair, restore) first rolls it back"
            if self.state is HolderState.DEAD
            else "if that process is gone, `recover_interrupted(..., take_over=True, execute=True)` rolls "
            "it back"
        )
        return f"{i.holder.describe()} was interrupted while writing this checkpoint{backup}; {how}"


@dataclass
class Lock:
    """A held checkpoint lock: record progress with :meth:`record`; ``recovered`` is the interrupted
    command this one rolled back when it took the lock (None if there was none)."""

    store: Store
    holder: Holder
    token: str
    recovered: Interrupted | None = None
    intent: Intent | None = None
    depth: int = 1
    _fd: int | None = field(default=None, repr=False)
    # Object stores: the listing of ``_recovery/`` made once the lock was held (it showed our own
    # record), for callers that check what they read earlier against it (recovery.apply).
    recovery_listing: tuple[Entry, ...] | None = None
    _written: bytes = field(default=b"", repr=False)

    @property
    def written(self) -> bytes:
        """The bytes of the intent record this lock wrote last (empty before the first)."""
        return self._written

    def record(
        self,
        phase: Phase,
        *,
        backup_id: str | None = None,
        backup_root: str | None = None,
        files: tuple[str, ...] = (),
        exclusive: bool = False,
    ) -> bool | None:
        """Write the intent record (atomically) before the step it announces. ``exclusive``: only
        if there is none, in one request (:meth:`~recovery.checkpoint.store.Store.create`): False
        when there is one, None when the store has no such request (nothing written either way)."""
        intent = Intent(self.token, self.holder, phase, backup_id, backup_root, files)
        written = _intent_json(intent).encode("utf-8")
        if exclusive:
            made = self.store.create(INTENT_FILE, written)
            if not made:
                return made
        else:
            self.store.write_atomic(INTENT_FILE, written)
        self.intent, self._written = intent, written
        return True

    def announces(self, backup_id: str | None, backup_root: str | None, files: tuple[str, ...]) -> bool:
        """Whether the record already says phase ``backup`` with this backup set and these files
        (then writing it again would change nothing)."""
        i = self.intent
        return (
            i is not None
            and i.phase is Phase.BACKUP
            and i.backup_id is not None
            and (i.backup_id, i.backup_root, set(i.files)) == (backup_id, backup_root, set(files))
        )

    def done(self) -> None:
        """The command finished or rolled itself back: no record is left (nor an empty
        ``_recovery/`` made only for it); if it changed files, :data:`LAST_WRITE_FILE` says which."""
        if self.intent is not None:
            if self.intent.phase is Phase.WRITE:
                record_last_write(self.store, self.holder.command, self.intent.files)
            self.store.remove(INTENT_FILE)
            self.intent = None
            if self.store.is_local:
                with suppress(OSError):
                    os.rmdir(self.store.full(RECOVERY_DIR))  # only succeeds when empty


_held: dict[str, Lock] = {}
_held_guard = threading.Lock()


def _key(store: Store) -> str:
    return os.path.realpath(store.root) if store.is_local else store.display()


def _proc_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def current_holder(command: str) -> Holder:
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Holder(command, socket.gethostname(), os.getpid(), now, _proc_start(os.getpid()))


def holder_state(holder: Holder) -> HolderState:
    """ALIVE/DEAD for a process on this host; UNKNOWN for another host."""
    if holder.host != socket.gethostname():
        return HolderState.UNKNOWN
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return HolderState.DEAD
    except PermissionError:
        pass  # exists, owned by someone else
    if holder.proc_start is not None and _proc_start(holder.pid) not in (None, holder.proc_start):
        return HolderState.DEAD  # the pid was reused by another process
    return HolderState.ALIVE


def _intent_json(intent: Intent) -> str:
    h = intent.holder
    return json.dumps(
        {
            "format": INTENT_FORMAT,
            "token": intent.token,
            "command": h.command,
            "host": h.host,
            "pid": h.pid,
            "started": h.started,
            "proc_start": h.proc_start,
            "phase": str(intent.phase),
            "backup_id": intent.backup_id,
            "backup_root": intent.backup_root,
            "files": list(intent.files),
        },
        indent=2,
    )


def _parse_intent(data: bytes, where: str) -> Intent:
    try:
        v = json.loads(data)
        holder = Holder(
            str(v["command"]),
            str(v["host"]),
            int(v["pid"]),
            str(v["started"]),
            None if v.get("proc_start") is None else str(v["proc_start"]),
        )
        return Intent(
            token=str(v["token"]),
            holder=holder,
            phase=Phase(v["phase"]),
            backup_id=None if v.get("backup_id") is None else str(v["backup_id"]),
            backup_root=None if v.get("backup_root") is None else str(v["backup_root"]),
            files=tuple(str(p) for p in v.get("files", ())),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointFormatError(f"{where}: not an intent record ({exc})") from None


def read_intent(store: Store) -> Intent | None:
    data = store.read(INTENT_FILE)
    return None if data is None else _parse_intent(data, store.display(INTENT_FILE))


@dataclass(frozen=True)
class LastWrite:
    """The files the toolkit's last writing command changed, and when it finished (epoch ms)."""

    command: str
    finished_ms: int
    files: frozenset[str]


def record_last_write(store: Store, command: str, files: tuple[str, ...]) -> None:
    """Write :data:`LAST_WRITE_FILE`: ``command`` has just changed ``files``.

    Advisory, so it never fails the command: it is written after the change is complete and
    before the intent record goes, and a failure there must not leave an intent record that makes
    the next command roll back a finished write. Without it the in-use check is only more cautious.
    """
    record = {"command": command, "finished_ms": int(time.time() * 1000), "files": list(files)}
    try:
        store.write_atomic(LAST_WRITE_FILE, json.dumps(record, indent=2).encode("utf-8"))
    except Exception as exc:
        log.warning("%s: not written (%s); the write itself is complete", store.display(LAST_WRITE_FILE), exc)


def read_last_write(store: Store) -> LastWrite | None:
    """The :data:`LAST_WRITE_FILE` record; None when there is none or it is malformed (logged)."""
    try:
        data = store.read(LAST_WRITE_FILE)
        if data is None:
            return None
        v = json.loads(data)
        finished = v["finished_ms"]
        if isinstance(finished, bool) or not isinstance(finished, int):
            raise ValueError("finished_ms is not an integer")
        return LastWrite(str(v["command"]), finished, frozenset(str(f) for f in v["files"]))
    except (CheckpointFormatError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: ignoring it (%s)", store.display(LAST_WRITE_FILE), exc)
        return None


def read_interrupted(store: Store) -> Interrupted | None:
    """The intent record left in the checkpoint, with whether its process still runs."""
    intent = read_intent(store)
    if intent is None:
        return None
    mine = _held.get(_key(store))
    if mine is not None and mine.token == intent.token:
        return None  # our own record, read while we hold the lock
    return Interrupted(intent, holder_state(intent.holder))


def _refuse_symlinked_recovery_dir(store: Store) -> None:
    if store.is_symlink(RECOVERY_DIR):
        raise InvalidInput(
            f"{store.display(RECOVERY_DIR)}: is a symlink; the toolkit keeps its lock and intent record "
            "there and refuses to write through a symlink (remove it; put backups elsewhere with "
            "`backup_dir`)"
        )


def _flock(store: Store) -> int | None:
    """An exclusive, non-blocking flock on the checkpoint directory itself (local file systems; no
    file is created for it); None where there is none, -1 when another process holds it."""
    if not store.is_local:
        return None
    import fcntl

    try:
        fd = os.open(store.full(), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInput(f"{store.display()}: cannot be opened ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return -1
        raise InvalidInput(f"{store.display()}: cannot be locked ({exc.strerror})") from None
    return fd


def _release(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        os.close(fd)  # closing the last descriptor releases the flock


def _busy(store: Store, intent: Intent | None) -> StateError:
    who = intent.holder.describe() if intent else "another process (its record is not written yet)"
    return StateError(
        f"{store.display()}: {who} is writing this checkpoint; nothing was written. "
        "Wait for it to finish, then run the command again"
    )


@contextmanager
def checkpoint_lock(
    checkpoint: str | Store,
    storage_options: StorageOptions | None = None,
    *,
    command: str,
    take_over: bool = False,
    backup_id: str | None = None,
    backup_root: str | None = None,
    files: tuple[str, ...] = (),
    none_listed: bool = False,
) -> Iterator[Lock]:
    """Hold the checkpoint's write lock; first roll back a command that was interrupted (its process
    is gone). Raises StateError (exit 1) when another live command holds it, or when the holder runs
    on another host (unless ``take_over``).

    On object stores the lock is the intent record itself, written in phase ``backup``; a caller that
    knows its backup set already passes ``backup_id``, ``backup_root`` and ``files`` so that this
    first record is the one :func:`~recovery.checkpoint.rewrite.apply_rewrite` would write next (one
    PUT fewer). They are ignored when the lock is already held or is a ``flock``.

    ``none_listed``: the caller listed ``_recovery/`` of this object store moments ago and saw no
    intent record. The record is then created only if there is still none (S3's conditional PUT)
    instead of being read first (one GET fewer); when one has appeared, or the store has no
    conditional PUT, it is read and handled as always. On an S3-compatible server that ignores the
    condition, a record written since that listing (a writer that started meanwhile) is overwritten;
    the check that follows the write still refuses when that writer's record replaced ours.

    Example::

        with checkpoint_lock("/data/chk", command="repair_checkpoint") as lock:
            chk = open_checkpoint("/data/chk")      # re-read under the lock
            ...                                     # plan, then rewrite_offsets(chk, ...)
    """
    store = checkpoint if isinstance(checkpoint, Store) else Store(checkpoint, storage_options)
    key = _key(store)
    with _held_guard:
        held = _held.get(key)
        if held is not None:
            held.depth += 1
    if held is not None:
        try:
            yield held
        finally:
            held.depth -= 1
        return
    _refuse_symlinked_recovery_dir(store)
    fd = _flock(store)
    if fd == -1:
        raise _busy(store, _safe_read_intent(store))
    holder = current_holder(command)
    lock = Lock(store, holder, uuid.uuid4().hex, _fd=fd)
    try:
        if fd is not None:
            store.remove_temp_files(INTENT_FILE)  # left by a process killed while writing its record
        conditional = fd is None

        def create() -> bool:
            """Our record, on an object store (there it is the lock): created only if there is none
            where the store can make sure (S3's conditional PUT), else written."""
            nonlocal conditional
            announce = partial(
                lock.record, Phase.BACKUP, backup_id=backup_id, backup_root=backup_root, files=files
            )
            if conditional:
                made = announce(exclusive=True)
                if made is not None:
                    return made
                conditional = False  # no conditional PUT here: a plain write, as before
            announce()
            return True

        created = fd is None and none_listed and create()
        if not created:
            lock.recovered = _take_over_leftover(store, take_over=take_over, flocked=fd is not None)
        with _held_guard:
            _held[key] = lock
        try:
            if fd is None:  # object store: announce ourselves and check nobody else did meanwhile
                if not created and not create():
                    # There was no record when we read it; a writer that started since wrote one.
                    raise _busy(store, _safe_read_intent(store))
                time.sleep(0.05)
                _check_record_is_ours(store, lock)
            try:
                yield lock
            except BaseException:
                if lock.intent is not None and lock.intent.phase is Phase.BACKUP:
                    lock.done()  # no checkpoint file had changed yet
                raise
            lock.done()
        finally:
            with _held_guard:
                _held.pop(key, None)
    finally:
        _release(fd)


def _check_record_is_ours(store: Store, lock: Lock) -> None:
    """Raise busy unless the intent record now in the store is the one ``lock`` just wrote. One LIST
    of ``_recovery/`` answers when the record's ETag is the MD5 of our bytes (they hold our random
    token, so no other writer's record has it); the listing is kept for the caller's own checks.
    Otherwise (an ETag that is no MD5, a listing that lags) the record is read back, as it always was;
    on stores whose listings carry no ETag (all but S3) it is read back without listing first."""
    if store.protocol not in ("s3", "s3a"):
        listing: tuple[Entry, ...] = ()
    else:
        listing = store.list(RECOVERY_DIR)
    listed = next((e for e in listing if f"{RECOVERY_DIR}/{e.name}" == INTENT_FILE), None)
    if listed is not None and listed.content_matches(lock.written):
        lock.recovery_listing = listing
        return
    current = read_intent(store)
    if current is None or current.token != lock.token:
        raise _busy(store, current)


def _safe_read_intent(store: Store) -> Intent | None:
    try:
        return read_intent(store)
    except CheckpointFormatError:
        return None


def _take_over_leftover(store: Store, *, take_over: bool, flocked: bool) -> Interrupted | None:
    intent = read_intent(store)
    if intent is None:
        return None
    state = holder_state(intent.holder)
    if state is HolderState.ALIVE and not flocked:
        raise _busy(store, intent)
    if state is HolderState.UNKNOWN and not take_over:
        raise StateError(
            f"{store.display()}: {intent.holder.describe()} holds this checkpoint and runs on another "
            "host; nothing was written. If that process is gone, roll back what it did with "
            f"`recover_interrupted({store.display()!r}, take_over=True, execute=True)`"
        )
    # Dead (or alive but without the flock we now hold: it no longer writes), or taken over.
    interrupted = Interrupted(intent, HolderState.DEAD if state is HolderState.ALIVE else state)
    roll_back_intent(store, intent)
    if intent.phase is Phase.WRITE:  # the rolled-back files are fresh, but no query wrote them
        record_last_write(store, f"rollback of {intent.holder.command}", intent.files)
    store.remove(INTENT_FILE)
    log.warning(
        "%s: %s was interrupted; rolled back what it had changed%s. Taking over.",
        store.display(),
        intent.holder.describe(),
        f" from backup set {intent.backup_id}" if intent.phase is Phase.WRITE else " (nothing yet)",
    )
    return replace(interrupted)


def roll_back_intent(store: Store, intent: Intent) -> None:
    """Undo what an interrupted command did, from the backup set its intent record names: every
    file in the set gets its backed-up bytes, every file recorded absent is removed, temp files
    left by a killed atomic write are removed. Nothing had changed before phase ``write``."""
    store.remove_temp_files(INTENT_FILE)
    for rel in intent.files:
        store.remove_temp_files(checked_rel_path(rel, store.display(INTENT_FILE)))
    if intent.phase is not Phase.WRITE or intent.backup_id is None or intent.backup_root is None:
        return
    if "/" in intent.backup_id or "\\" in intent.backup_id or intent.backup_id in ("", ".", ".."):
        raise CheckpointFormatError(
            f"{store.display(INTENT_FILE)}: backup_id {intent.backup_id!r} is not a backup set name"
        )
    root = store.other(intent.backup_root)
    data = root.read(f"{intent.backup_id}/{MANIFEST}")
    if data is None:
        raise StateError(
            f"{store.display()}: {intent.holder.describe()} was interrupted and its backup set "
            f"{root.display(intent.backup_id)} has no manifest; nothing was rolled back. Check the "
            f"files it names ({', '.join(intent.files)}) with `inspect_checkpoint`, restore them from "
            f"another backup set if needed, then delete {store.display(INTENT_FILE)}"
        )
    backup = parse_manifest(data, root, intent.backup_id)
    originals = verified_originals(root, backup)
    current = {rel: store.read(rel) for rel in (*originals, *backup.absent)}
    files: dict[str, bytes | None] = {rel: d for rel, d in originals.items() if current[rel] != d}
    files.update({rel: None for rel in backup.absent if current[rel] is not None})
    replace_files(store, files)
    # The set now equals the checkpoint: drop it, so that "the newest backup" (restore's default)
    # is not the state of a command that never happened. Manifest first: a kill here leaves an
    # incomplete set (reported, never used).
    root.remove(f"{backup.id}/{MANIFEST}")
    for f in backup.files:
        root.remove(f"{backup.id}/files/{f.path}")
    root.remove_empty_dirs(backup.id)


@dataclass(frozen=True)
class RecoverResult:
    """What ``checkpoint recover`` found (and, executed, rolled back)."""

    checkpoint: str
    interrupted: Interrupted | None
    executed: bool

    @property
    def exit_code(self) -> ExitCode:
        """0 nothing interrupted or rolled back; 1 a dry run with a rollback pending."""
        return ExitCode.ACTION_NEEDED if self.interrupted and not self.executed else ExitCode.OK


def recover_interrupted(
    location: str,
    storage_options: StorageOptions | None = None,
    *,
    take_over: bool = False,
    execute: bool = False,
) -> RecoverResult:
    """Roll back a writing command that was interrupted (its intent record is left in
    ``_recovery/``), from the backup set it names. Without ``execute`` only says what it found.
    ``take_over``: the holder runs on another host and the operator has made sure it is gone.
    Raises StateError when the holder is alive (or, without ``take_over``, on another host).

    Example: ``recover_interrupted("/data/chk", execute=True).interrupted``
    """
    store = Store(location, storage_options)
    if not store.exists("metadata") and not store.exists(INTENT_FILE):
        raise CheckpointFormatError(f"{store.display()}: no checkpoint here")
    if not execute:
        return RecoverResult(store.location, read_interrupted(store), False)
    with checkpoint_lock(store, command="recover_interrupted", take_over=take_over) as lock:
        return RecoverResult(store.location, lock.recovered, True)
