"""Reading a checkpoint: a :class:`Checkpoint` handle that lists each log once and reads only the files
asked for (a checkpoint with 10,000 retained batches costs two listings, not 10,000 reads).

    chk = open_checkpoint("s3://bucket/chk", {"endpoint_url": ...})
    chk.query_id, chk.offset_batch_ids, chk.latest_offsets(), chk.restart_state()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from recovery.checkpoint import format as fmt
from recovery.checkpoint.crc import checksum_matches, crc_name, parse_checksum_file
from recovery.checkpoint.restart import DEFAULT_MIN_BATCHES_TO_RETAIN, RestartState, plan_restart
from recovery.checkpoint.store import Entry, Store
from recovery.errors import CheckpointFormatError


class CrcStatus(StrEnum):
    OK = "ok"  # the .crc side file matches
    ABSENT = "absent"  # the store keeps side files but this file has none (Spark accepts that)
    NOT_KEPT = "n/a"  # object stores keep no side files
    MISMATCH = "mismatch"  # only reported with verify_crc=False; otherwise an error


@dataclass(frozen=True)
class FileRead:
    """A file the handle read, for reports: its path, size and side-file status."""

    path: str
    size: int
    crc: CrcStatus


class Checkpoint:
    """An open checkpoint. Values it returns are frozen; the handle itself caches what it read."""

    def __init__(self, store: Store, *, verify_crc: bool = True) -> None:
        self.store = store
        self.verify_crc = verify_crc
        self._listings: dict[str, tuple[Entry, ...]] = {}
        self._bytes: dict[str, bytes | None] = {}
        self._reads: dict[str, FileRead] = {}
        root = self._list("")
        if not root:
            if not store.exists():
                what = "does not exist"
            else:
                what = "is empty" if store.is_dir() else "is a file, expected a checkpoint directory"
            raise CheckpointFormatError(f"{store.display()}: {what}; no checkpoint here")
        names = {e.name: e for e in root}
        if "metadata" not in names:
            raise CheckpointFormatError(
                f"{store.display('metadata')}: missing (not a checkpoint directory, or an incomplete one)"
            )
        data = self.read("metadata")
        assert data is not None
        self.metadata = fmt.parse_stream_metadata(data, path=store.display("metadata"))

    @property
    def location(self) -> str:
        return self.store.location

    @property
    def query_id(self) -> str:
        return self.metadata.query_id

    # -- raw access ----------------------------------------------------------------------------

    def _list(self, rel: str) -> tuple[Entry, ...]:
        if rel not in self._listings:
            self._listings[rel] = self.store.list(rel)
        return self._listings[rel]

    def _entry(self, rel: str) -> Entry | None:
        parent, _, name = rel.rpartition("/")
        return next((e for e in self._list(parent) if e.name == name), None)

    def read(self, rel: str) -> bytes | None:
        """The bytes of ``rel`` (``None`` if absent), checked against its ``.crc`` side file."""
        if rel in self._bytes:
            return self._bytes[rel]
        entry = self._entry(rel)
        if entry is not None and entry.is_dir:
            raise CheckpointFormatError(f"{self.store.display(rel)}: is a directory, expected a file")
        data = None if entry is None else self.store.read(rel)
        self._bytes[rel] = data
        if data is not None:
            self._reads[rel] = FileRead(rel, len(data), self._check_crc(rel, data))
        return data

    def _check_crc(self, rel: str, data: bytes) -> CrcStatus:
        parent, _, name = rel.rpartition("/")
        crc_rel = f"{parent}/{crc_name(name)}" if parent else crc_name(name)
        if self._entry(crc_rel) is None:
            return CrcStatus.ABSENT if self.store.keeps_crc else CrcStatus.NOT_KEPT
        crc = self.store.read(crc_rel) or b""
        if parse_checksum_file(crc) is None:
            raise CheckpointFormatError(f"{self.store.display(crc_rel)}: not a Hadoop checksum file")
        if checksum_matches(data, crc):
            return CrcStatus.OK
        if self.verify_crc:
            raise CheckpointFormatError(
                f"{self.store.display(rel)}: does not match its checksum file {crc_name(name)} "
                "(edited without updating it?); Spark reading through a Hadoop FileSystem would fail"
            )
        return CrcStatus.MISMATCH

    def _batch_ids(self, log: str) -> tuple[int, ...]:
        entries = self._list(log)
        return tuple(sorted(int(e.name) for e in entries if fmt.is_batch_file_name(e.name)))

    @property
    def files_read(self) -> tuple[FileRead, ...]:
        return tuple(self._reads[k] for k in sorted(self._reads))

    # -- logs ----------------------------------------------------------------------------------

    @property
    def offset_batch_ids(self) -> tuple[int, ...]:
        return self._batch_ids("offsets")

    @property
    def commit_batch_ids(self) -> tuple[int, ...]:
        return self._batch_ids("commits")

    def offsets(self, batch_id: int) -> fmt.OffsetLogEntry:
        rel = f"offsets/{batch_id}"
        data = self.read(rel)
        if data is None:
            raise CheckpointFormatError(f"{self.store.display(rel)}: no such batch file")
        return fmt.parse_offset_log(data, batch_id=batch_id, path=self.store.display(rel))

    def commit(self, batch_id: int) -> fmt.CommitLogEntry:
        rel = f"commits/{batch_id}"
        data = self.read(rel)
        if data is None:
            raise CheckpointFormatError(f"{self.store.display(rel)}: no such batch file")
        return fmt.parse_commit_log(data, batch_id=batch_id, path=self.store.display(rel))

    def latest_offsets(self) -> fmt.OffsetLogEntry | None:
        ids = self.offset_batch_ids
        return self.offsets(ids[-1]) if ids else None

    def latest_commit(self) -> fmt.CommitLogEntry | None:
        ids = self.commit_batch_ids
        return self.commit(ids[-1]) if ids else None

    def offset_batches(self) -> tuple[fmt.OffsetLogEntry, ...]:
        """Every retained offsets entry (reads them all: use for small checkpoints or tests)."""
        return tuple(self.offsets(i) for i in self.offset_batch_ids)

    def commit_batches(self) -> tuple[fmt.CommitLogEntry, ...]:
        return tuple(self.commit(i) for i in self.commit_batch_ids)

    def initial_offsets(self, source_id: int | str) -> fmt.InitialOffsets | None:
        """The Kafka initial-offset file ``sources/<i>/0``; ``None`` if absent or another source's file."""
        rel = f"sources/{source_id}/0"
        if self._entry(f"sources/{source_id}") is None:
            return None
        data = self.read(rel)
        if data is None or not fmt.is_kafka_initial_offsets(data):
            return None
        return fmt.parse_initial_offsets(data, path=self.store.display(rel))

    def restart_state(self, min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN) -> RestartState:
        return plan_restart(
            self.offset_batch_ids, self.commit_batch_ids, min_batches_to_retain=min_batches_to_retain
        )

    def validate(self) -> None:
        """Parse what a restart reads: the latest offsets and the one before, the latest commit and the
        Kafka initial offsets. Raises CheckpointFormatError on the first bad file."""
        ids = self.offset_batch_ids
        entries = [self.offsets(i) for i in ids[-2:]]
        self.latest_commit()
        for source in entries[-1].kafka_sources if entries else ():
            self.initial_offsets(source.source_id)


def open_checkpoint(
    location: str, storage_options: Mapping[str, Any] | None = None, *, verify_crc: bool = True
) -> Checkpoint:
    """Open the checkpoint at ``location`` (a local path or an fsspec URL) and read its ``metadata``.

    ``storage_options`` go to fsspec (e.g. ``{"endpoint_url": "http://..."}`` for s3fs). Raises
    CheckpointFormatError when there is no checkpoint there or ``metadata`` is bad.

    Example: ``open_checkpoint("/data/chk").restart_state().next_run``
    """
    return Checkpoint(Store(location, storage_options), verify_crc=verify_crc)
