"""Checkpoint storage through fsspec: listing, reading, atomic replacement. The only IO of the package.

* Local paths and ``file://``: write a hidden temp file in the same directory (``.<name>.<uuid>.tmp``,
  which Spark ignores: it is not a number), fsync, then ``os.replace`` -- what Spark's
  ``RenameBasedFSDataOutputStream`` does.
* ``memory://`` (tests): temp file + ``mv``, which that filesystem implements as a rename.
* Object stores (``s3://``, ``gs://``, ``abfs://``, ...) have no rename: each final object is written
  once with a single PUT. Readers see the old or the new object, never a mix, but two objects
  (a batch file and its side file) do not change together. See docs/checkpoint.md.

Every fsspec/OS error is turned into :class:`~recovery.errors.StorageError` naming the path.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import fsspec

from recovery.errors import CheckpointFormatError, RecoveryError, StorageError

RENAME_PROTOCOLS = frozenset({"file", "local", "memory"})
# Only Hadoop's ChecksumFs/ChecksumFileSystem (the local file system) keeps .crc side files.
CRC_PROTOCOLS = frozenset({"file", "local"})


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int | None


@contextmanager
def _storage_errors(what: str) -> Iterator[None]:
    try:
        yield
    except (RecoveryError, FileNotFoundError):
        raise
    except OSError as exc:
        raise StorageError(f"{what}: {exc.strerror or exc}") from exc
    except Exception as exc:
        # fsspec backends raise their SDK's own errors too (botocore's NoCredentialsError,
        # EndpointConnectionError, ...): every one of them means the store could not be used.
        raise StorageError(f"{what}: {type(exc).__name__}: {exc}") from exc


class Store:
    """A directory on some filesystem, addressed by relative paths (``offsets/17``)."""

    def __init__(self, location: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.location = location.rstrip("/") or location
        self.storage_options = dict(storage_options or {})
        with _storage_errors(self.location):
            self.fs, root = fsspec.core.url_to_fs(self.location, **self.storage_options)
        self.root = root.rstrip("/") or root
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.protocol = protocols[0]
        self.is_local = bool(set(protocols) & {"file", "local"})
        self.has_rename = bool(set(protocols) & RENAME_PROTOCOLS)
        self.keeps_crc = bool(set(protocols) & CRC_PROTOCOLS)

    def display(self, rel: str = "") -> str:
        """The path as the user spelled the location, for messages: ``s3://b/chk/offsets/17``."""
        return f"{self.location}/{rel}" if rel else self.location

    def full(self, rel: str = "") -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def child(self, rel: str) -> Store:
        return Store(self.display(rel), self.storage_options)

    # -- reading -------------------------------------------------------------------------------

    def exists(self, rel: str = "") -> bool:
        with _storage_errors(self.display(rel)):
            return bool(self.fs.exists(self.full(rel)))

    def is_dir(self, rel: str = "") -> bool:
        with _storage_errors(self.display(rel)):
            return bool(self.fs.isdir(self.full(rel)))

    def list(self, rel: str = "") -> tuple[Entry, ...]:
        """One listing call; a missing directory lists as empty."""
        path = self.full(rel)
        try:
            with _storage_errors(self.display(rel)):
                self.fs.invalidate_cache(path)
                infos = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return ()
        entries = []
        for info in infos:
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            if str(info["name"]).rstrip("/") == path.rstrip("/"):
                continue  # some filesystems list a file (not a directory) as itself
            entries.append(Entry(name, info.get("type") == "directory", info.get("size")))
        return tuple(sorted(entries, key=lambda e: e.name))

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, ``None`` if it does not exist; a directory is a format error."""
        path = self.full(rel)
        try:
            with _storage_errors(self.display(rel)):
                return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            return None
        except StorageError:
            if self.is_dir(rel):
                raise CheckpointFormatError(f"{self.display(rel)}: is a directory, expected a file") from None
            raise

    # -- writing -------------------------------------------------------------------------------

    def write_atomic(self, rel: str, data: bytes) -> None:
        """Replace (or create) ``rel`` so readers see the old or the new bytes, never a mix."""
        path = self.full(rel)
        parent, _, name = path.rpartition("/")
        with _storage_errors(self.display(rel)):
            if self.is_local:
                os.makedirs(parent, exist_ok=True)
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
            elif self.has_rename:
                tmp = f"{parent}/.{name}.{uuid.uuid4()}.tmp"
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            else:
                self.fs.pipe_file(path, data)  # one PUT: the object appears whole or not at all
            self.fs.invalidate_cache(parent)

    def write(self, rel: str, data: bytes) -> None:
        """Write a new file (backups): no rename needed, nobody reads it until the manifest exists."""
        path = self.full(rel)
        with _storage_errors(self.display(rel)):
            if self.is_local:
                os.makedirs(path.rpartition("/")[0], exist_ok=True)
            self.fs.pipe_file(path, data)
            self.fs.invalidate_cache(path.rpartition("/")[0])

    def remove(self, rel: str) -> None:
        path = self.full(rel)
        with _storage_errors(self.display(rel)):
            with suppress(FileNotFoundError):
                self.fs.rm_file(path)
            self.fs.invalidate_cache(path.rpartition("/")[0])


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
