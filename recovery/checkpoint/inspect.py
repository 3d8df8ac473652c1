"""Looking at a checkpoint without changing it: what ``checkpoint show`` and ``checkpoint backups`` report.

    info = inspect_checkpoint("/data/chk")          # query id, logs, one batch's sources, next run
    info.restart.next_run, info.sources[0].offsets, info.files   # .crc status of each file read
    inspect_backups("/data/chk").backups            # the backup sets taken before rewrites, oldest first

Each result carries its exit code: a checkpoint Spark would refuse to restart from is action needed (1).
"""

from __future__ import annotations

from dataclasses import dataclass

from recovery.checkpoint import format as fmt
from recovery.checkpoint.backup import BackupSet, incomplete_backups, list_backups, require_location
from recovery.checkpoint.format import KafkaOffsets, OffsetSeqMetadata, SourceKind
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.reader import Checkpoint, FileRead, open_checkpoint
from recovery.checkpoint.store import Store
from recovery.core.model import TopicPartition
from recovery.core.restart import RestartState
from recovery.errors import CheckpointFormatError, ExitCode

Offsets = tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True)
class SourceInfo:
    """One source of the batch shown: Kafka offsets per partition (in the file's order) and its
    initial offsets ``sources/<i>/0``, or the exact offset text of any other source."""

    source_id: str
    kind: SourceKind | None  # None: no offset for this source in the batch (``-``)
    offsets: Offsets | None  # Kafka sources only
    text: str | None  # other sources: the offset as written; None for ``-`` and for Kafka
    initial_offsets: Offsets | None  # Kafka sources with a readable sources/<i>/0


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint holds and what the next run of its query will do."""

    checkpoint: str
    query_id: str
    offset_batch_ids: tuple[int, ...]
    commit_batch_ids: tuple[int, ...]
    batch: int | None  # the batch whose sources are shown (None: no offsets/ yet)
    metadata: OffsetSeqMetadata | None  # that batch's line 2 (timestamp, watermark, conf)
    sources: tuple[SourceInfo, ...]
    restart: RestartState
    files: tuple[FileRead, ...]  # every file read, with its size and .crc status

    @property
    def can_restart(self) -> bool:
        return self.restart.can_restart

    @property
    def exit_code(self) -> ExitCode:
        """0, or 1 (action needed) when Spark would refuse to restart from the checkpoint."""
        return ExitCode.OK if self.can_restart else ExitCode.ACTION_NEEDED


@dataclass(frozen=True)
class BackupListing:
    """The complete backup sets of a checkpoint, oldest first (possibly none)."""

    checkpoint: str
    backups: tuple[BackupSet, ...]
    incomplete: tuple[str, ...] = ()  # set directories without a manifest: reported, never used

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK


def _by_partition(item: tuple[TopicPartition, int]) -> tuple[str, int]:
    return item[0].topic, item[0].partition


def _kafka(offsets: KafkaOffsets) -> Offsets:
    return tuple(sorted(offsets.partitions, key=_by_partition))


def inspect_checkpoint(
    location: str, *, batch: int | None = None, storage_options: StorageOptions | None = None
) -> CheckpointInfo:
    """Read a checkpoint's ``metadata``, list its logs, and parse batch ``batch`` (default: the latest
    offsets), the latest commit and the Kafka initial offsets, checking each ``.crc`` side file.

    Raises CheckpointFormatError (bad input) on a missing checkpoint, a missing batch or a malformed
    file Spark reads on restart (an initial offsets file it does not read is shown without its
    offsets, and logged), StorageError when the store cannot be read.

    Example: ``inspect_checkpoint("/data/chk").restart.next_run``
    """
    chk = open_checkpoint(location, storage_options)
    offset_ids, commit_ids = chk.offset_batch_ids, chk.commit_batch_ids
    if batch is None and offset_ids:
        batch = offset_ids[-1]
    entry = chk.offsets(batch) if batch is not None else None
    # Parsed (and crc-checked) so a bad commit file is reported, as a restart would read it.
    if batch is not None and batch in commit_ids:
        chk.commit(batch)
    if commit_ids and commit_ids[-1] != batch:
        chk.latest_commit()
    sources = []
    for source in entry.sources if entry else ():
        initial = _readable_initial(chk, source.source_id) if source.kafka is not None else None
        sources.append(
            SourceInfo(
                source_id=source.source_id,
                kind=source.kind,
                offsets=_kafka(source.kafka) if source.kafka is not None else None,
                text=None if source.kafka is not None else source.text,
                initial_offsets=_kafka(initial.kafka) if initial is not None else None,
            )
        )
    return CheckpointInfo(
        checkpoint=chk.location,
        query_id=chk.query_id,
        offset_batch_ids=offset_ids,
        commit_batch_ids=commit_ids,
        batch=batch,
        metadata=entry.metadata if entry else None,
        sources=tuple(sources),
        restart=chk.restart_state(),
        files=chk.files_read,
    )


def inspect_backups(
    location: str, *, backup_dir: str | None = None, storage_options: StorageOptions | None = None
) -> BackupListing:
    """The backup sets of the checkpoint at ``location`` (in ``backup_dir`` if given), oldest first.

    Raises CheckpointFormatError (bad input) when nothing exists at ``location``.

    Example: ``[b.id for b in inspect_backups("/data/chk").backups]``
    """
    store = Store(location, storage_options)
    require_location(store)
    return BackupListing(
        store.location,
        list_backups(location, storage_options, backup_dir=backup_dir),
        incomplete_backups(location, storage_options, backup_dir=backup_dir),
    )


def _readable_initial(chk: Checkpoint, source_id: str) -> fmt.InitialOffsets | None:
    """The source's initial offsets, or None when its file is unreadable: a file Spark reads on this
    restart was checked when the checkpoint was opened, and one it does not read was said then."""
    try:
        return chk.initial_offsets(source_id)
    except CheckpointFormatError:
        return None
