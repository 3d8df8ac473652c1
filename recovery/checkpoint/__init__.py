"""Spark Structured Streaming checkpoints: read every format, rewrite Kafka offsets safely, restore.

* :mod:`~recovery.checkpoint.format`  bytes <-> frozen values (pure)
* :mod:`~recovery.checkpoint.crc`     Hadoop ``.crc`` side files (pure)
* :mod:`~recovery.checkpoint.restart` what Spark does on restart (pure)
* :mod:`~recovery.checkpoint.store`   fsspec IO: listing, reading, atomic replacement
* :mod:`~recovery.checkpoint.reader`  :func:`open_checkpoint` -> :class:`Checkpoint`
* :mod:`~recovery.checkpoint.rewrite` plan/apply offset rewrites with backups; list/restore backups
"""

from recovery.checkpoint.format import (
    CommitLogEntry,
    DeltaSourceOffset,
    InitialOffsets,
    KafkaOffsets,
    OffsetLogEntry,
    OffsetSeqMetadata,
    SourceKind,
    SourceOffset,
    StreamMetadata,
)
from recovery.checkpoint.reader import Checkpoint, CrcStatus, FileRead, open_checkpoint
from recovery.checkpoint.restart import Issue, Level, NextRun, RestartState, plan_restart
from recovery.checkpoint.rewrite import (
    BackupFile,
    BackupSet,
    FileChange,
    RestoreResult,
    RewritePlan,
    apply_rewrite,
    list_backups,
    plan_offset_rewrite,
    restore_backup,
    rewrite_offsets,
)

__all__ = [
    "BackupFile",
    "BackupSet",
    "Checkpoint",
    "CommitLogEntry",
    "CrcStatus",
    "DeltaSourceOffset",
    "FileChange",
    "FileRead",
    "InitialOffsets",
    "Issue",
    "KafkaOffsets",
    "Level",
    "NextRun",
    "OffsetLogEntry",
    "OffsetSeqMetadata",
    "RestartState",
    "RestoreResult",
    "RewritePlan",
    "SourceKind",
    "SourceOffset",
    "StreamMetadata",
    "apply_rewrite",
    "list_backups",
    "open_checkpoint",
    "plan_offset_rewrite",
    "plan_restart",
    "restore_backup",
    "rewrite_offsets",
]
