"""Checkpoint storage through fsspec: listing, reading, atomic replacement. The only IO of the package.

* Local paths and ``file://``: write a hidden temp file in the same directory (``.<name>.<uuid>.tmp``,
  which Spark ignores: it is not a number), fsync, then ``os.replace`` -- what Spark's
  ``RenameBasedFSDataOutputStream`` does.
* ``memory://`` (tests): temp file + ``mv``, which that filesystem implements as a rename.
* Object stores (``s3://``, ``gs://``, ``abfs://``, ...) have no rename: each final object is written
  once with a single PUT. Readers see the old or the new object, never a mix, but two objects
  (a batch file and its side file) do not change together. See docs/checkpoint.md.

Every fsspec/OS error is turned into :class:`~recovery.errors.StorageError` naming the path, except
what is bad input on a local path (exit 2, :class:`~recovery.errors.CheckpointFormatError`): a file
that cannot be read for lack of permission, a special file (FIFO, device, socket: never opened, so
nothing blocks), a symlink loop, and a symlink that leads out of the checkpoint directory; and a
path that does not exist when writing, local or remote (a directory that cannot be made, a bucket
that does not exist: :class:`~recovery.errors.InvalidInput`, exit 2).

Fault injection (tests only): when ``STREAM_RECOVERY_FAULT_AT=<n>`` is set, the process kills itself
with SIGKILL just before its n-th file operation (1-based; each write, replace or removal counts);
``STREAM_RECOVERY_FAULT_LOG=<file>`` appends one line per operation. Both are inert unless set.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import inspect
import os
import re
import signal
import stat
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from recovery.checkpoint.options import StorageOptions, redact, secret_values, typed_storage_options
from recovery.errors import CheckpointFormatError, ConfigError, InvalidInput, RecoveryError, StorageError

RENAME_PROTOCOLS = frozenset({"file", "local", "memory"})
# Only Hadoop's ChecksumFs/ChecksumFileSystem (the local file system) keeps .crc side files.
CRC_PROTOCOLS = frozenset({"file", "local"})


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int | None
    etag: str | None = None  # object stores: the listing's ETag, quotes stripped (see content_matches)

    def content_matches(self, data: bytes) -> bool | None:
        """Whether ``data`` is this object's content, told from the listing alone: True/False when
        the ETag is an MD5 of the content (a single PUT without SSE-KMS), None when it cannot say."""
        if self.etag is None or not _MD5.fullmatch(self.etag):
            return None
        return hashlib.md5(data, usedforsecurity=False).hexdigest() == self.etag.lower()


_MD5 = re.compile(r"[0-9a-fA-F]{32}")


FAULT_AT_ENV = "STREAM_RECOVERY_FAULT_AT"
FAULT_LOG_ENV = "STREAM_RECOVERY_FAULT_LOG"
_operations = 0


def fault_point(operation: str) -> None:
    """Count one file operation; the test hook kills the process here when asked to (see above)."""
    global _operations
    at, log_file = os.environ.get(FAULT_AT_ENV), os.environ.get(FAULT_LOG_ENV)
    if at is None and log_file is None:
        return
    _operations += 1
    if log_file:
        with open(log_file, "a", encoding="utf-8") as out:
            out.write(f"{_operations} {operation}\n")
    if at is not None and at.isdigit() and int(at) == _operations:
        os.kill(os.getpid(), signal.SIGKILL)


# What the local reads of this thread saw, while record_local_reads() is on (see there).
_seen = threading.local()
Signature = tuple[int, int, int, int, int] | None  # mode, inode, size, mtime and ctime (ns); None: absent


def local_signature(path: str) -> Signature:
    """What a local file or directory looks like now: a write, a rename over it, or (for a
    directory) an entry added, removed or renamed changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@contextmanager
def record_local_reads() -> Iterator[dict[str, Signature]]:
    """Every local path this thread stats, lists or reads meanwhile, with its
    :func:`local_signature` then: while each still has it, a reader of the same paths would read
    the same (``fleet serve`` does not read again a checkpoint that did not change)."""
    seen: dict[str, Signature] = {}
    before = getattr(_seen, "paths", None)
    _seen.paths = seen
    try:
        yield seen
    finally:
        _seen.paths = before


# errno values that mean "this input/path cannot be used", not "the store is unreachable".
_BAD_INPUT_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.ENOSPC,
        errno.EROFS,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EDQUOT,
        errno.EEXIST,
        errno.ENOENT,
    }
)


@contextmanager
def _storage_errors(
    what: str, *, local: bool = False, secrets: tuple[str, ...] = (), writing: bool = False
) -> Iterator[None]:
    """OS and SDK errors -> one-line RecoveryErrors; secrets (storage-option values, credentials in
    URLs) are masked in every message. A FileNotFoundError passes through when reading (the caller
    reads it as "absent"); when ``writing``, it is an error (see below)."""
    try:
        yield
    except RecoveryError:
        raise
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not writing:
            raise
        text = redact(f"{what}: {exc.strerror or exc}", secrets)
        # One rule, local or remote: a path that does not exist when writing (a local directory on
        # the way that cannot be made, a bucket that does not exist) is bad input, exit 2: the
        # location as given is unusable and retrying does not help. So are the local errno values
        # of _BAD_INPUT_ERRNOS. Any other OS or SDK failure is the store's (StorageError, exit 3).
        if (writing and isinstance(exc, FileNotFoundError)) or (local and exc.errno in _BAD_INPUT_ERRNOS):
            raise InvalidInput(text) from exc
        raise StorageError(text) from exc
    except (TypeError, ValueError) as exc:
        # A storage option of the wrong shape that got past typed_storage_options: bad input.
        raise InvalidInput(redact(f"{what}: {type(exc).__name__}: {exc}", secrets).split("\n")[0]) from exc
    except Exception as exc:
        # fsspec backends raise their SDK's own errors too (botocore's NoCredentialsError,
        # EndpointConnectionError, ...): every one of them means the store could not be used.
        text = " ".join(redact(f"{what}: {type(exc).__name__}: {exc}", secrets).split("\n"))
        if type(exc).__name__ == "ParamValidationError":
            # botocore refused the request before sending it (a bucket name S3 cannot have, as in
            # s3://user:pass@bucket/chk): the input is bad, the store was never asked.
            raise InvalidInput(text) from exc
        raise StorageError(text) from exc


def protocol_of(location: str) -> str:
    """The file system ``location`` names, as ``fsspec.core.split_protocol`` reads it (``file``
    for a plain path), without importing fsspec."""
    head, sep, _ = location.partition("://")
    if sep and len(head) > 1:
        return head
    return "data" if location.startswith("data:") else "file"


def _plain_local_root(location: str) -> str | None:
    """The absolute path fsspec's local file system would make of ``location`` when it is a plain
    POSIX path (no protocol, no chain), else None. Local commands then never import fsspec (a
    tenth of a second, most of ``validate``'s start); the equality is tested."""
    if (
        os.sep != "/"
        or "://" in location
        or "::" in location
        or location.startswith(("file:", "local:", "data:"))
    ):
        return None
    path = location
    if path.startswith("~"):
        path = os.path.expanduser(path)
    elif not path.startswith("/"):
        path = path[2:] if path.startswith("./") else "" if path == "." else path
        path = f"{os.getcwd()}/{path}"
    return path.rstrip("/") or "/"


def _typed_options(location: str, options: StorageOptions) -> StorageOptions:
    """The storage options typed and checked for the file system ``location`` names (no IO)."""
    if "::" in location:  # chained URLs: the options belong to several file systems
        return dict(options)
    import fsspec  # type: ignore[import-untyped,unused-ignore]

    protocol = protocol_of(location)
    try:
        fs_class = fsspec.get_filesystem_class(protocol)
    except (ValueError, ImportError) as exc:
        raise ConfigError(
            f"{redact(location)}: unknown or unavailable storage protocol {protocol!r} ({exc})"
        ) from None
    return typed_storage_options(fs_class, options)


class Store:
    """A directory on some filesystem, addressed by relative paths (``offsets/17``)."""

    def __init__(self, location: str, storage_options: StorageOptions | None = None) -> None:
        self.location = location.rstrip("/") or location
        self.secrets = secret_values(storage_options or {})
        local_root = None if storage_options else _plain_local_root(self.location)
        if local_root is not None:  # the file system object is made when first asked for (fs)
            self.storage_options: StorageOptions = {}
            self.root: str = local_root
            self.protocol, self.is_local, self.has_rename, self.keeps_crc = "file", True, True, True
            return
        import fsspec  # type: ignore[import-untyped,unused-ignore]

        self.storage_options = _typed_options(self.location, storage_options or {})
        with _storage_errors(redact(self.location, self.secrets), secrets=self.secrets):
            self.__dict__["fs"], root = fsspec.core.url_to_fs(self.location, **self.storage_options)
        self.root = str(root).rstrip("/") or str(root)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.protocol = protocols[0]
        self.is_local = bool(set(protocols) & {"file", "local"})
        self.has_rename = bool(set(protocols) & RENAME_PROTOCOLS)
        self.keeps_crc = bool(set(protocols) & CRC_PROTOCOLS)

    @functools.cached_property
    def fs(self) -> Any:  # fsspec is untyped (ignore_missing_imports): its file systems are Any
        """The fsspec file system (made here only for plain local paths, which seldom need it)."""
        import fsspec  # type: ignore[import-untyped,unused-ignore]

        return fsspec.filesystem("file")

    def modified_ms(self, rel: str) -> int | None:
        """When ``rel`` was last written (ms since the epoch), None when the store cannot say."""
        try:
            if self.is_local:  # follows a symlink, as fsspec's modified() does
                return int(os.stat(self.full(rel)).st_mtime * 1000)
            return int(self.fs.modified(self.full(rel)).timestamp() * 1000)
        except (NotImplementedError, OSError, KeyError, AttributeError):
            return None

    def display(self, rel: str = "") -> str:
        """The path as the user spelled the location, for messages: ``s3://b/chk/offsets/17``
        (credentials inside the URL masked)."""
        where = f"{self.location}/{rel}" if rel else self.location
        return redact(where, self.secrets) if "@" in where or self.secrets else where

    def full(self, rel: str = "") -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def other(self, location: str, storage_options: StorageOptions | None = None) -> Store:
        """A store at ``location`` (e.g. a backup directory) with ``storage_options`` (default: this
        store's) when it is on the same kind of file system, else none (S3 options mean nothing to
        a local backup directory)."""
        same = protocol_of(location) == protocol_of(self.location)
        options = storage_options if storage_options is not None else self.storage_options
        return Store(location, options if same else {})

    def child(self, rel: str) -> Store:
        return Store(f"{self.location}/{rel}", self.storage_options)

    def _errors(self, rel: str, *, writing: bool = False) -> AbstractContextManager[None]:
        return _storage_errors(self.display(rel), local=self.is_local, secrets=self.secrets, writing=writing)

    # -- local confinement -----------------------------------------------------------------------

    def _real_dir(self, rel: str, *, fresh: bool = False) -> str:
        """The real path of directory ``rel``. For reads it is resolved once per store (while it
        exists): a validation reads a dozen files in three directories, and resolving each file's
        whole path (a system call per component) took a third of reading a checkpoint (``fleet
        serve`` reads a thousand a minute). ``fresh``: resolved now (before any write)."""
        path = self.full(rel) if rel else self.root
        if fresh:
            return os.path.realpath(path, strict=False)
        known: dict[str, str] = self.__dict__.setdefault("_real_dirs", {})
        real = known.get(rel)
        if real is None:
            real = os.path.realpath(path, strict=False)
            if os.path.isdir(real):  # one made later is resolved again then
                known[rel] = real
        return real

    def _confined(self, rel: str, *, fresh: bool = False) -> str:
        """The local path of ``rel``; a symlink loop or a symlink leading out of the checkpoint
        directory is bad input (Spark would follow it; a repair must not write through it).
        ``fresh``: every directory resolved now, none as read before (writes)."""
        path = self.full(rel)
        if not rel:
            return path
        parent, _, name = rel.rpartition("/")
        try:
            if fresh or name in (".", "..") or stat.S_ISLNK(os.lstat(path).st_mode):
                real = os.path.realpath(path, strict=False)
            else:  # a file that is not a symlink is where its directory really is
                real = os.path.join(self._real_dir(parent), name)
        except FileNotFoundError:  # resolved as far as it exists (realpath(strict=False) would too)
            real = os.path.join(self._real_dir(parent, fresh=fresh), name)
        except OSError:  # a loop, a file as a directory, ...: resolved the long way, then judged below
            try:
                real = os.path.realpath(path, strict=False)
            except OSError as exc:  # pragma: no cover - realpath(strict=False) raises only on loops in 3.13+
                raise CheckpointFormatError(f"{self.display(rel)}: {exc.strerror or exc}") from None
        root = self._real_dir("", fresh=fresh)
        if real != root and not real.startswith(root.rstrip("/") + "/"):
            raise CheckpointFormatError(
                f"{self.display(rel)}: is a symlink (or under one) leading out of the checkpoint, to {real}"
            )
        return path

    def _local_stat(self, rel: str) -> os.stat_result | None:
        path = self._confined(rel)
        seen: dict[str, Signature] | None = getattr(_seen, "paths", None)
        try:
            st = os.stat(path)
            if seen is not None:
                seen.setdefault(path, (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
            return st
        except FileNotFoundError:
            if seen is not None:
                seen.setdefault(path, None)
            if os.path.islink(path):
                raise CheckpointFormatError(f"{self.display(rel)}: is a dangling symlink") from None
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CheckpointFormatError(f"{self.display(rel)}: symlink loop") from None
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise CheckpointFormatError(f"{self.display(rel)}: cannot be read ({exc.strerror})") from None
            if exc.errno == errno.ENOTDIR:
                if seen is not None:
                    seen.setdefault(path, None)
                return None
            raise StorageError(f"{self.display(rel)}: {exc.strerror or exc}") from exc

    def _kind_error(self, rel: str, st: os.stat_result, expected: str) -> CheckpointFormatError:
        mode = st.st_mode
        what = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        return CheckpointFormatError(f"{self.display(rel)}: is {what}, expected {expected}")

    # -- reading -------------------------------------------------------------------------------

    def exists(self, rel: str = "") -> bool:
        if self.is_local:
            return self._local_stat(rel) is not None
        with self._errors(rel):
            return bool(self.fs.exists(self.full(rel)))

    def is_dir(self, rel: str = "") -> bool:
        if self.is_local:
            st = self._local_stat(rel)
            return st is not None and stat.S_ISDIR(st.st_mode)
        with self._errors(rel):
            return bool(self.fs.isdir(self.full(rel)))

    def is_symlink(self, rel: str = "") -> bool:
        """Whether ``rel`` itself is a symlink (local paths; object stores have none)."""
        return self.is_local and os.path.islink(self.full(rel))

    def list(self, rel: str = "") -> tuple[Entry, ...]:
        """One listing call; a missing directory lists as empty."""
        if self.is_local:
            return self._list_local(rel)
        path = self.full(rel)
        try:
            with self._errors(rel):
                self.fs.invalidate_cache(path)
                infos = self._ls(path)
        except FileNotFoundError:
            return ()
        entries = []
        for info in infos:
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            if str(info["name"]).rstrip("/") == path.rstrip("/"):
                continue  # some filesystems list a file (not a directory) as itself
            etag = info.get("ETag") or info.get("etag")
            etag = str(etag).strip('"') if etag else None
            entries.append(Entry(name, info.get("type") == "directory", info.get("size"), etag))
        return tuple(sorted(entries, key=lambda e: e.name))

    def _ls(self, path: str) -> Any:  # fsspec is untyped: its detailed listing, a list of info dicts
        """``fs.ls(path, detail=True)`` in one request where the backend allows: s3fs's ``ls`` lists
        the parent directory too when ``path`` is empty or missing (to tell a file from a directory),
        a second LIST this class never needs (it lists directories only); its ``_lsdir`` does not."""
        lsdir = getattr(self.fs, "_lsdir", None)
        if self.protocol in ("s3", "s3a") and lsdir is not None and getattr(self.fs, "async_impl", False):
            from fsspec.asyn import sync  # type: ignore[import-untyped,unused-ignore]

            return sync(self.fs.loop, lsdir, path, refresh=True)
        return self.fs.ls(path, detail=True)

    def _list_local(self, rel: str) -> tuple[Entry, ...]:
        st = self._local_stat(rel)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return ()
        entries = []
        try:
            with os.scandir(self.full(rel)) as it:
                for item in it:
                    try:
                        is_dir = item.is_dir()  # follows symlinks; a loop or dangling link is no dir
                        size = item.stat().st_size if item.is_file() else None
                    except OSError:
                        is_dir, size = False, None
                    entries.append(Entry(item.name, is_dir, size))
        except PermissionError as exc:
            raise CheckpointFormatError(f"{self.display(rel)}: cannot be listed ({exc.strerror})") from None
        except OSError as exc:
            raise StorageError(f"{self.display(rel)}: {exc.strerror or exc}") from exc
        return tuple(sorted(entries, key=lambda e: e.name))

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, ``None`` if it does not exist; anything but a regular file is a format error."""
        if self.is_local:
            return self._read_local(rel)
        path = self.full(rel)
        try:
            with self._errors(rel):
                return bytes(self.fs.cat_file(path, **self._one_get))
        except FileNotFoundError:
            return None
        except StorageError:
            if self.is_dir(rel):
                raise CheckpointFormatError(f"{self.display(rel)}: is a directory, expected a file") from None
            raise

    @property
    def _one_get(self) -> dict[str, int]:
        """cat_file arguments for a single GET: s3fs otherwise first asks the object's size (a HEAD,
        plus a LIST when the object is missing) to decide on ranged concurrent reads; checkpoint
        files are small."""
        return {"max_concurrency": 1} if "max_concurrency" in _cat_parameters(type(self.fs)) else {}

    def cached(self) -> CachedStore:
        """A view of this store for one command (see :class:`CachedStore`)."""
        return CachedStore(self)

    def _read_local(self, rel: str) -> bytes | None:
        st = self._local_stat(rel)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise self._kind_error(rel, st, "a file")
        try:
            # O_NONBLOCK: if a FIFO replaced the file since the stat, opening it does not block.
            fd = os.open(self.full(rel), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except PermissionError as exc:
            raise CheckpointFormatError(f"{self.display(rel)}: cannot be read ({exc.strerror})") from None
        except OSError as exc:
            raise StorageError(f"{self.display(rel)}: {exc.strerror or exc}") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise self._kind_error(rel, st, "a file")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise StorageError(f"{self.display(rel)}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)

    # -- writing -------------------------------------------------------------------------------

    def _local_parent(self, rel: str) -> str:
        """Create the parent directory of ``rel`` (confined) and return the file's local path.

        A directory that cannot be made (``--backup-dir /proc/nope``: ENOENT; no permission; a file
        in the way) is bad input (exit 2), not an unreachable store (3): the path as given is
        unusable, retrying does not help, and nothing was written yet. The message names the
        directory that could not be made and why."""
        path = self._confined(rel, fresh=True)
        parent = path.rpartition("/")[0]
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            made = exc.filename if isinstance(exc.filename, str) else parent
            text = f"{made}: cannot create the directory ({exc.strerror or exc}) to write {self.display(rel)}"
            error = InvalidInput if exc.errno in _BAD_INPUT_ERRNOS else StorageError
            raise error(redact(text, self.secrets)) from exc
        self._confined(rel, fresh=True)  # the directories just made may not lead out either
        return path

    def write_atomic(self, rel: str, data: bytes) -> None:
        """Replace (or create) ``rel`` so readers see the old or the new bytes, never a mix."""
        fault_point(f"write {self.display(rel)}")
        path = self._local_parent(rel) if self.is_local else self.full(rel)
        parent, _, name = path.rpartition("/")
        with self._errors(rel, writing=True):
            if self.is_local:
                st = self._local_stat(rel)
                if st is not None and not stat.S_ISREG(st.st_mode):
                    raise self._kind_error(rel, st, "a file")
                tmp = f"{parent}/.{name}.{uuid.uuid4()}.tmp"
                try:
                    with open(tmp, "wb") as out:
                        out.write(data)
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, path)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
                _fsync_dir(parent)
                return
            if self.has_rename:
                tmp = f"{parent}/.{name}.{uuid.uuid4()}.tmp"
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            else:
                self.fs.pipe_file(path, data)  # one PUT: the object appears whole or not at all
            self.fs.invalidate_cache(parent)

    def write(self, rel: str, data: bytes) -> None:
        """Write a new file (backups): no rename needed, nobody reads it until the manifest exists."""
        fault_point(f"write {self.display(rel)}")
        if self.is_local:
            path = self._local_parent(rel)
            with self._errors(rel, writing=True), open(path, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            return
        path = self.full(rel)
        with self._errors(rel, writing=True):
            self.fs.pipe_file(path, data)
            self.fs.invalidate_cache(path.rpartition("/")[0])

    def create(self, rel: str, data: bytes) -> bool | None:
        """Write ``rel`` only if nothing has that name, in one request: S3's conditional PUT
        (``If-None-Match: *``). True when written, False when it exists; None (nothing written)
        where there is no such request here: another store, or an S3 server that answers
        NotImplemented. A server that ignores the condition writes as a plain PUT would."""
        if self.protocol not in ("s3", "s3a"):
            return None
        fault_point(f"write {self.display(rel)}")
        path = self.full(rel)
        with self._errors(rel, writing=True):
            try:
                self.fs.pipe_file(path, data, mode="create")
            except OSError as exc:
                cause = getattr(getattr(exc, "__cause__", None), "response", None) or {}
                code = cause.get("Error", {}).get("Code")
                if isinstance(exc, FileExistsError) or code == "PreconditionFailed":
                    return False
                if code == "NotImplemented":
                    return None
                raise
            self.fs.invalidate_cache(path.rpartition("/")[0])
            return True

    def remove(self, rel: str) -> None:
        fault_point(f"remove {self.display(rel)}")
        path = self._confined(rel, fresh=True) if self.is_local else self.full(rel)
        with self._errors(rel):
            if self.is_local:
                with suppress(FileNotFoundError):
                    os.unlink(path)
                _fsync_dir(path.rpartition("/")[0])
                return
            with suppress(FileNotFoundError):
                self.fs.rm_file(path)
            self.fs.invalidate_cache(path.rpartition("/")[0])

    def remove_empty_dirs(self, rel: str) -> None:
        """Remove ``rel`` and the directories under it if they hold no files (local; elsewhere
        directories do not exist apart from their objects)."""
        if not self.is_local:
            return
        top = self._confined(rel, fresh=True)
        for parent, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            with suppress(OSError):
                os.rmdir(parent)

    def remove_temp_files(self, rel: str) -> None:
        """Remove the temp files a killed :meth:`write_atomic` of ``rel`` may have left (local)."""
        if not self.is_local:
            return
        parent, _, name = rel.rpartition("/")
        for entry in self.list(parent):
            if entry.name.startswith(f".{name}.") and entry.name.endswith(".tmp") and not entry.is_dir:
                self.remove(f"{parent}/{entry.name}" if parent else entry.name)


# Directories whose files one command reads several of (the intent record, topic ids, heartbeat,
# last write): on object stores one LIST says which exist, instead of a GET (404) for each.
LIST_BEFORE_READ = frozenset({"_recovery"})


class CachedStore(Store):
    """A store read once per command: on object stores each listing is made and each object read at
    most once (every request is a round trip, and a command asks for some files several times:
    the latest batch, the toolkit's records under ``_recovery/``), and a file missing from a
    listing already made is not asked for. A write through the store makes it forget what it read
    (see :meth:`_remember`). Local paths pass through (reading them again costs nothing, and a
    local reader must see what another process wrote meanwhile).

    ``Checkpoint(store)`` takes a fresh view each time, so re-reading a checkpoint under the write
    lock (a new Checkpoint) reads the store again."""

    def __init__(self, base: Store) -> None:  # shares the base's file system: no new connection
        self.__dict__.update(base.__dict__)
        self.base: Store = base.base if isinstance(base, CachedStore) else base
        self._reads: dict[str, bytes | None] = {}
        self._lists: dict[str, tuple[Entry, ...]] = {}

    def cached(self) -> CachedStore:
        return CachedStore(self.base)

    def list(self, rel: str = "") -> tuple[Entry, ...]:
        if self.is_local:
            return super().list(rel)
        if rel not in self._lists:
            self._lists[rel] = super().list(rel)
        return self._lists[rel]

    def _listed(self, rel: str) -> Entry | bool | None:
        """``rel``'s entry (None: absent) when its directory's listing is known, else False."""
        parent, _, name = rel.rpartition("/")
        if parent in LIST_BEFORE_READ:
            self.list(parent)
        if parent not in self._lists:
            return False
        return next((e for e in self._lists[parent] if e.name == name), None)

    def exists(self, rel: str = "") -> bool:
        if self.is_local:
            return super().exists(rel)
        if rel in self._reads:
            return self._reads[rel] is not None
        listed = self._listed(rel)
        return super().exists(rel) if listed is False else listed is not None

    def read(self, rel: str) -> bytes | None:
        if self.is_local:
            return super().read(rel)
        if rel not in self._reads:
            listed = self._listed(rel)
            self._reads[rel] = None if listed is None else super().read(rel)
        return self._reads[rel]

    def write_atomic(self, rel: str, data: bytes) -> None:
        super().write_atomic(rel, data)
        self._remember(rel, data)

    def write(self, rel: str, data: bytes) -> None:
        super().write(rel, data)
        self._remember(rel, data)

    def create(self, rel: str, data: bytes) -> bool | None:
        made = super().create(rel, data)
        if made:
            self._remember(rel, data)
        return made

    def remove(self, rel: str) -> None:
        super().remove(rel)
        self._remember(rel, None)

    def listing(self, rel: str) -> tuple[Entry, ...] | None:
        """The listing of ``rel`` this view made, if it made one (no IO)."""
        return None if self.is_local else self._lists.get(rel)

    def adopt(self, rel: str, fresh: tuple[Entry, ...]) -> None:
        """Take ``fresh`` (a listing of ``rel`` made just now) as this view's: a file read before is
        kept only when the listing proves it unchanged (:meth:`Entry.content_matches`, or absent in
        both), others are read again when asked."""
        listed = {e.name: e for e in fresh}
        for path in [p for p in self._reads if p.rpartition("/")[0] == rel]:
            data, entry = self._reads[path], listed.get(path.rpartition("/")[2])
            if not (entry is None if data is None else entry is not None and entry.content_matches(data)):
                del self._reads[path]
        self._lists[rel] = fresh

    def _remember(self, rel: str, data: bytes | None) -> None:
        """After a write only the file written is remembered: a write starts a new phase (taking the
        checkpoint's lock is one: its intent record is written through this store), and what was
        read before it is read again, so checks made under the lock see the store as it is."""
        if not self.is_local:
            self._reads = {rel: data}
            self._lists = {}


_CAT_PARAMETERS: dict[type, frozenset[str]] = {}


def _cat_parameters(fs_class: type) -> frozenset[str]:
    """The keyword arguments ``fs_class.cat_file`` takes (its async ``_cat_file`` too), read once."""
    if fs_class not in _CAT_PARAMETERS:
        names: set[str] = set()
        for method in ("cat_file", "_cat_file"):
            func = getattr(fs_class, method, None)
            if func is not None:
                with suppress(TypeError, ValueError):  # a signature Python cannot read
                    names |= set(inspect.signature(func).parameters)
        _CAT_PARAMETERS[fs_class] = frozenset(names)
    return _CAT_PARAMETERS[fs_class]


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
