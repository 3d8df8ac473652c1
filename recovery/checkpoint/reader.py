"""Reading a checkpoint: a :class:`Checkpoint` handle that lists each log once and reads only the files
asked for (a checkpoint with 10,000 retained batches costs two listings, not 10,000 reads).

    chk = open_checkpoint("s3://bucket/chk", {"endpoint_url": ...})
    chk.query_id, chk.offset_batch_ids, chk.latest_offsets(), chk.restart_state()
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from recovery.checkpoint import format as fmt
from recovery.checkpoint.crc import checksum_matches, crc_name, parse_checksum_file
from recovery.checkpoint.format import SourceKind
from recovery.checkpoint.intent import HolderState, Interrupted, read_interrupted
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.recovery_dir import INTENT_FILE, RECOVERY_DIR
from recovery.checkpoint.store import Entry, Store
from recovery.core.model import SOURCE_NAME, CheckpointFile
from recovery.core.restart import (
    DEFAULT_MIN_BATCHES_TO_RETAIN,
    Issue,
    Level,
    NextRun,
    RestartState,
    plan_restart,
)
from recovery.errors import CheckpointFormatError

log = logging.getLogger(__name__)

# The directories every command lists anyway; on object stores others are read without a listing.
_LISTED = frozenset({"offsets", "commits"})


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
        self.store = store.cached()  # a fresh view: a new Checkpoint reads the store again
        self.verify_crc = verify_crc
        self._listings: dict[str, tuple[Entry, ...]] = {}
        self._names: dict[str, dict[str, Entry]] = {}
        # rel -> its parsed value: each file is parsed once
        self._offset_entries: dict[str, fmt.OffsetLogEntry] = {}
        self._commit_entries: dict[str, fmt.CommitLogEntry] = {}
        self._initial_entries: dict[str, fmt.InitialOffsets] = {}
        self._partitions: fmt.Partitions = {}  # one TopicPartition per partition for all files
        self._bytes: dict[str, bytes | None] = {}
        self._reads: dict[str, FileRead] = {}
        # Object stores: the metadata GET itself says whether there is a checkpoint; no root LIST.
        data = None if store.is_local else self.read("metadata")
        if data is None:
            data = self._metadata_or_fail()
        self.metadata = fmt.parse_stream_metadata(data, path=store.display("metadata"))

    def _metadata_or_fail(self) -> bytes:
        store = self.store
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
        if data is None:  # listed a moment ago, gone now
            raise CheckpointFormatError(f"{store.display('metadata')}: missing")
        return data

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

    def _known(self, rel: str) -> bool:
        """Whether reading ``rel`` may look at its directory's listing first: always on local paths;
        on object stores only when the listing is made anyway (``offsets/``, ``commits/``), elsewhere
        (``metadata``, ``sources/<i>/0``) one GET answers, a 404 meaning absent."""
        parent = rel.rpartition("/")[0]
        return self.store.is_local or parent in self._listings or parent.split("/")[0] in _LISTED

    def _entry(self, rel: str) -> Entry | None:
        parent, _, name = rel.rpartition("/")
        if parent not in self._names:
            self._names[parent] = {e.name: e for e in self._list(parent)}
        return self._names[parent].get(name)

    def read(self, rel: str) -> bytes | None:
        """The bytes of ``rel`` (``None`` if absent), checked against its ``.crc`` side file."""
        if rel in self._bytes:
            return self._bytes[rel]
        if self._known(rel):
            entry = self._entry(rel)
            if entry is not None and entry.is_dir:
                raise CheckpointFormatError(f"{self.store.display(rel)}: is a directory, expected a file")
            data = None if entry is None else self.store.read(rel)
        else:
            data = self.store.read(rel)
        self._bytes[rel] = data
        if data is not None:
            self._reads[rel] = FileRead(rel, len(data), self._check_crc(rel, data))
        return data

    def _check_crc(self, rel: str, data: bytes) -> CrcStatus:
        parent, _, name = rel.rpartition("/")
        crc_rel = f"{parent}/{crc_name(name)}" if parent else crc_name(name)
        if not self._known(crc_rel) or self._entry(crc_rel) is None:
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
        rel = str(CheckpointFile.offsets(batch_id))
        if rel not in self._offset_entries:
            data = self.read(rel)
            if data is None:
                raise CheckpointFormatError(f"{self.store.display(rel)}: no such batch file")
            self._offset_entries[rel] = fmt.parse_offset_log(
                data, batch_id=batch_id, path=self.store.display(rel), known=self._partitions
            )
        return self._offset_entries[rel]

    def commit(self, batch_id: int) -> fmt.CommitLogEntry:
        rel = f"commits/{batch_id}"
        if rel not in self._commit_entries:
            data = self.read(rel)
            if data is None:
                raise CheckpointFormatError(f"{self.store.display(rel)}: no such batch file")
            self._commit_entries[rel] = fmt.parse_commit_log(
                data, batch_id=batch_id, path=self.store.display(rel)
            )
        return self._commit_entries[rel]

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
        if not self._source_dir(source_id):
            return None
        data = self.read(rel)
        if data is None or not fmt.is_kafka_initial_offsets(data):
            return None
        return self._initial(rel, data)

    def _initial(self, rel: str, data: bytes) -> fmt.InitialOffsets:
        if rel not in self._initial_entries:
            self._initial_entries[rel] = fmt.parse_initial_offsets(
                data, path=self.store.display(rel), known=self._partitions
            )
        return self._initial_entries[rel]

    def _log_state(self, min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN) -> RestartState:
        return plan_restart(
            self.offset_batch_ids, self.commit_batch_ids, min_batches_to_retain=min_batches_to_retain
        )

    def restart_state(self, min_batches_to_retain: int = DEFAULT_MIN_BATCHES_TO_RETAIN) -> RestartState:
        """What the next run does (from the logs), plus an issue when a writing command of this
        toolkit is running now (warning) or was interrupted (error: roll it back first)."""
        state = self._log_state(min_batches_to_retain)
        interrupted = self.interrupted()
        if interrupted is None:
            return state
        level = Level.WARNING if interrupted.state is HolderState.ALIVE else Level.ERROR
        return replace(state, issues=(*state.issues, Issue(level, interrupted.message)))

    def restart_problem(self) -> str | None:
        """Why Spark cannot restart from this checkpoint at all, naming it (None: it can)."""
        state = self.restart_state()
        if state.can_restart:
            return None
        problems = "; ".join(i.message for i in state.issues if i.level is Level.ERROR)
        return f"{self.location}: Spark cannot restart from this checkpoint: {problems}"

    def interrupted(self) -> Interrupted | None:
        """The toolkit's intent record, if one is left in ``_recovery/`` (see recovery.checkpoint.intent)."""
        if not hasattr(self, "_interrupted"):
            self._interrupted = read_interrupted(self.store)
        return self._interrupted

    def still_current(self, recovery: tuple[Entry, ...], *, volatile: Iterable[str] = ()) -> bool:
        """Object stores: whether the store still holds what this handle read, told without reading
        a file again. True when one fresh LIST of ``offsets/`` and one of ``commits/`` show the batch
        files listed before, with the same ETags, each file read from them having the ETag of the
        bytes read (an MD5: :meth:`Entry.content_matches`), and ``recovery`` (a listing of
        ``_recovery/`` made just now) shows the toolkit's records as listed before, the ``volatile``
        names aside (the query's heartbeat, the caller's own intent record). The handle then takes
        the fresh listings (their mtimes feed the in-use check) and forgets the ``_recovery/`` reads
        they do not prove. False (local paths, a record of another command seen, anything different
        or not provable): open the checkpoint again.

        Not listed, so not compared: ``metadata`` (Spark writes it once, when the query is created)
        and ``sources/<i>/0`` (written once, before ``offsets/0``; the toolkit rewrites it only under
        the lock and then leaves ``_recovery/last-write.json``, which is compared)."""
        store = self.store
        before = store.listing(RECOVERY_DIR)
        if store.is_local or before is None or getattr(self, "_interrupted", None) is not None:
            return False
        if any(f"{RECOVERY_DIR}/{e.name}" == INTENT_FILE for e in before):
            return False  # another command's record was there when this handle read the store

        def seen(entries: tuple[Entry, ...], skip: Iterable[str] = ()) -> set[tuple[str, bool, str | None]]:
            return {(e.name, e.is_dir, e.etag) for e in entries if e.name not in set(skip)}

        if seen(before, volatile) != seen(recovery, volatile):
            return False
        fresh: dict[str, tuple[Entry, ...]] = {}
        for log in sorted(_LISTED):
            listed = self._listings.get(log)
            if listed is None:
                return False
            fresh[log] = store.base.list(log)
            if seen(fresh[log]) != seen(listed):
                return False
            by_name = {e.name: e for e in fresh[log]}
            for rel, data in self._bytes.items():
                parent, _, name = rel.rpartition("/")
                if parent == log and data is not None and by_name[name].content_matches(data) is not True:
                    return False
        for log, entries in fresh.items():
            self._listings[log] = entries
            self._names.pop(log, None)
            store.adopt(log, entries)
        store.adopt(RECOVERY_DIR, recovery)
        return True

    def validate(self) -> None:
        """Kept for callers of the first API: the same as :meth:`verify`."""
        self.verify()

    def verify(self) -> None:
        """Read and check everything Spark reads when the query restarts; raise CheckpointFormatError
        (one line: file, line/field, what is wrong) on the first thing Spark would not accept.

        What Spark reads (MicroBatchExecution.populateStartOffsets, StreamExecution):

        * ``metadata`` (StreamMetadata.read + ``UUID.fromString``): checked on open.
        * ``offsets/N`` and the batch before it (``offsetLog.getLatest()``, ``offsetLog.get(N - 1)``,
          or under async progress tracking the previous batch on disk; HDFSMetadataLog.getLatest
          reads the newest batch file and fails on a malformed one).
        * the latest ``commits/C`` (``commitLog.getLatest()``; CommitLog.deserialize: empty file =
          "Incomplete log file", version validated, a missing JSON line reads as ``{}``).
        * ``sources/<i>/0`` of each Kafka source (KafkaSourceInitialOffsetWriter.deserialize, read
          by ``initialOffset()`` whenever a start offset is missing; a malformed one Spark does not
          read on this restart is logged as a warning, not refused: Spark 4.2 restarts from it).
        * the ``.crc`` side file of each of these (Hadoop ChecksumFileSystem: a missing one is
          accepted, a wrong one is a ChecksumException).

        Besides: a file read that is a directory, special file or symlink out of the checkpoint, a
        restart Spark refuses (no batch before N, commits ahead of offsets), sources whose offsets
        disagree between the two batches, and a ``sources/<i>`` directory for a source the offsets
        do not have.
        """
        for log_dir in ("offsets", "commits", "sources") if self.store.is_local else ():
            # (object stores have no directories apart from the objects under them)
            if self._entry(log_dir) is not None and not self.store.is_dir(log_dir):
                raise CheckpointFormatError(f"{self.store.display(log_dir)}: is not a directory")
        state = self._log_state()
        for issue in state.issues:
            if issue.level is Level.ERROR:
                raise CheckpointFormatError(
                    f"{self.store.display(issue.message)}; Spark cannot restart from it"
                )
        # offsets/N and the batch before it as Spark reads it (N-1, or the previous one on disk
        # under async progress tracking)
        read = (state.previous, state.latest_offsets)
        entries = [self.offsets(i) for i in read if i is not None]
        self.latest_commit()
        kafka_ids = self._initial_kafka_ids(entries)
        for entry in reversed(entries):  # the latest first: a message names the file Spark reads first
            self._check_sources(entry, kafka_ids, entries[-1])
        line_sources = {s.source_id for e in entries for s in e.kafka_sources}
        # Spark reads a source's sources/<id>/0 only when the batch it runs has no start offset for
        # it (initialOffset(), MicroBatchExecution.constructNextBatch / runBatch): the others are
        # never read, so an unreadable one is said, not refused.
        start = {
            NextRun.NEXT_BATCH: state.latest_offsets,
            NextRun.RERUN_BATCH: state.previous,
            NextRun.FIRST_BATCH: None,
        }[state.next_run]
        started = set()
        if start is not None:
            started = {s.source_id for s in self.offsets(start).sources if s.text is not None}
        for source_id in sorted(kafka_ids | line_sources):
            if source_id not in started:
                self._strict_initial_offsets(source_id)
                continue
            try:
                self._strict_initial_offsets(source_id)
            except CheckpointFormatError as exc:
                log.warning("%s; Spark does not read it on this restart (the source has offsets)", exc)

    def _source_dir(self, source_id: int | str) -> bool:
        """Whether ``sources/<id>`` may hold files: listed locally; on object stores its ``0`` is
        read directly (one GET, a 404 meaning absent) rather than listing ``sources/`` first."""
        return not self.store.is_local or self._entry(f"sources/{source_id}") is not None

    def _source_ids(self, entries: list[fmt.OffsetLogEntry]) -> list[str]:
        """The sources to look at: every numeric ``sources/<i>`` directory and each named one the
        offset lines name (Spark 4.2's ``DataStreamReader.name``) on local paths, or, on object
        stores, the sources of the offset lines read (no LIST of ``sources/``)."""
        named = {s.source_id for e in entries for s in e.sources}
        if self.store.is_local:
            listed = self._list("sources")
            ours = (e for e in listed if fmt.is_batch_file_name(e.name) or SOURCE_NAME.fullmatch(e.name))
            return [e.name for e in ours if e.is_dir]
        return sorted(i for i in named if fmt.is_batch_file_name(i) or SOURCE_NAME.fullmatch(i))

    def _initial_kafka_ids(self, entries: list[fmt.OffsetLogEntry]) -> set[str]:
        """The sources whose ``sources/<i>/0`` is a Kafka initial-offset file (NUL + ``v1``, or the
        2.1.0 form); only numeric directory names are source indexes (MicroBatchExecution)."""
        out = set()
        for source_id in self._source_ids(entries):
            data = self.read(f"sources/{source_id}/0")
            if data and data[0] == 0:
                out.add(source_id)
        return out

    def _strict_initial_offsets(self, source_id: str) -> None:
        rel = f"sources/{source_id}/0"
        if not self._source_dir(source_id):
            return
        data = self.read(rel)
        if data is not None:
            self._initial(rel, data)

    def _check_sources(
        self, entry: fmt.OffsetLogEntry, kafka_ids: set[str], latest: fmt.OffsetLogEntry
    ) -> None:
        path = self.store.display(str(CheckpointFile.offsets(entry.batch_id)))
        latest_path = self.store.display(str(CheckpointFile.offsets(latest.batch_id)))
        if len(entry.sources) != len(latest.sources):
            raise CheckpointFormatError(
                f"{latest_path}: has {len(latest.sources)} source lines, offsets/{entry.batch_id} has "
                f"{len(entry.sources)} (Spark: the number of sources must not change; truncated?)"
            )
        for number, source in enumerate(entry.sources, start=3):
            if source.text is None:
                continue
            if source.source_id in kafka_ids and source.kind is not SourceKind.KAFKA:
                fmt.parse_kafka_offsets(
                    source.text, path=path, where=f"line {number} (Kafka source {source.source_id})"
                )
            other = next((s for s in latest.sources if s.source_id == source.source_id), None)
            if other is None:
                raise CheckpointFormatError(
                    f"{path}: line {number}: source {source.source_id} is not in offsets/{latest.batch_id}"
                )
            if other.kind is not None and other.kind is not source.kind:
                raise CheckpointFormatError(
                    f"{path}: line {number}: source {source.source_id} is {source.kind} here but "
                    f"{other.kind} in offsets/{latest.batch_id}"
                )
        count = len(latest.sources)
        # Local paths only: on object stores this would cost a LIST of sources/ for a check of torn
        # writes, which a single-PUT object store does not have.
        for d in self._list("sources") if self.store.is_local else ():
            if d.is_dir and fmt.is_batch_file_name(d.name) and int(d.name) >= count and latest.version == 1:
                raise CheckpointFormatError(
                    f"{latest_path}: has {count} source lines but sources/{d.name} exists "
                    "(a source line is missing: truncated?)"
                )


def open_checkpoint(
    location: str,
    storage_options: StorageOptions | None = None,
    *,
    verify_crc: bool = True,
    strict: bool = True,
) -> Checkpoint:
    """Open the checkpoint at ``location`` (a local path or an fsspec URL) and check everything Spark
    reads when the query restarts (:meth:`Checkpoint.verify`).

    ``storage_options`` go to fsspec (e.g. ``{"endpoint_url": "http://..."}`` for s3fs). Raises
    CheckpointFormatError (bad input, exit 2) when there is no checkpoint there or Spark could not
    restart from it; ``strict=False`` reads only ``metadata`` (to look at a damaged checkpoint).

    Example: ``open_checkpoint("/data/chk").restart_state().next_run``
    """
    chk = Checkpoint(Store(location, storage_options), verify_crc=verify_crc)
    if strict:
        chk.verify()
    return chk
