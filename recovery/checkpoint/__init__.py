"""Spark Structured Streaming checkpoints: read every format, rewrite Kafka offsets safely, restore.

* :mod:`~recovery.checkpoint.format`  bytes <-> frozen values (pure)
* :mod:`~recovery.checkpoint.crc`     Hadoop ``.crc`` side files (pure)
* :mod:`~recovery.core.restart` what Spark does on restart (pure)
* :mod:`~recovery.checkpoint.store`   fsspec IO: listing, reading, atomic replacement
* :mod:`~recovery.checkpoint.reader`  :func:`open_checkpoint` -> :class:`Checkpoint`
* :mod:`~recovery.checkpoint.recovery_dir` the names of the toolkit's own files under ``_recovery/``
* :mod:`~recovery.checkpoint.backup`  backup sets: write, list, read and verify one
* :mod:`~recovery.checkpoint.replacement` replacing files with their ``.crc`` side files, readable
  at every step
* :mod:`~recovery.checkpoint.executor` the one writer of a checkpoint's files: backup, intent record,
  replacement, rollback on failure
* :mod:`~recovery.checkpoint.rewrite` plan/apply offset rewrites with backups; restore backups
* :mod:`~recovery.checkpoint.inspect` :func:`inspect_checkpoint`, :func:`inspect_backups` (read only)
* :mod:`~recovery.checkpoint.intent`  :func:`checkpoint_lock` (one writer; intent record; rollback of an
  interrupted command), :func:`recover_interrupted`
* :mod:`~recovery.checkpoint.options` storage options typed and checked; secrets redacted

Names are loaded on first use (PEP 562), as in :mod:`recovery`: importing a pure module such as
``recovery.checkpoint.format`` runs this file, and must not pull in fsspec.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the real names, for type checkers and editors
    from recovery.checkpoint.backup import (
        BackupFile,
        BackupSet,
        incomplete_backups,
        list_backups,
    )
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
    from recovery.checkpoint.inspect import (
        BackupListing,
        CheckpointInfo,
        SourceInfo,
        inspect_backups,
        inspect_checkpoint,
    )
    from recovery.checkpoint.intent import (
        Interrupted,
        Lock,
        RecoverResult,
        checkpoint_lock,
        read_interrupted,
        recover_interrupted,
    )
    from recovery.checkpoint.reader import (
        Checkpoint,
        CrcStatus,
        FileRead,
        open_checkpoint,
    )
    from recovery.checkpoint.rewrite import (
        FileChange,
        RestoreResult,
        RewritePlan,
        apply_rewrite,
        plan_offset_rewrite,
        restore_backup,
        rewrite_offsets,
    )
    from recovery.core.restart import (
        Issue,
        Level,
        NextRun,
        RestartState,
        plan_restart,
    )

_EXPORTS = {
    "BackupFile": "recovery.checkpoint.backup",
    "BackupListing": "recovery.checkpoint.inspect",
    "BackupSet": "recovery.checkpoint.backup",
    "Checkpoint": "recovery.checkpoint.reader",
    "CheckpointInfo": "recovery.checkpoint.inspect",
    "CommitLogEntry": "recovery.checkpoint.format",
    "CrcStatus": "recovery.checkpoint.reader",
    "DeltaSourceOffset": "recovery.checkpoint.format",
    "FileChange": "recovery.checkpoint.rewrite",
    "FileRead": "recovery.checkpoint.reader",
    "InitialOffsets": "recovery.checkpoint.format",
    "Interrupted": "recovery.checkpoint.intent",
    "Issue": "recovery.core.restart",
    "KafkaOffsets": "recovery.checkpoint.format",
    "Level": "recovery.core.restart",
    "Lock": "recovery.checkpoint.intent",
    "NextRun": "recovery.core.restart",
    "OffsetLogEntry": "recovery.checkpoint.format",
    "OffsetSeqMetadata": "recovery.checkpoint.format",
    "RecoverResult": "recovery.checkpoint.intent",
    "RestartState": "recovery.core.restart",
    "RestoreResult": "recovery.checkpoint.rewrite",
    "RewritePlan": "recovery.checkpoint.rewrite",
    "SourceInfo": "recovery.checkpoint.inspect",
    "SourceKind": "recovery.checkpoint.format",
    "SourceOffset": "recovery.checkpoint.format",
    "StreamMetadata": "recovery.checkpoint.format",
    "apply_rewrite": "recovery.checkpoint.rewrite",
    "checkpoint_lock": "recovery.checkpoint.intent",
    "incomplete_backups": "recovery.checkpoint.backup",
    "inspect_backups": "recovery.checkpoint.inspect",
    "inspect_checkpoint": "recovery.checkpoint.inspect",
    "list_backups": "recovery.checkpoint.backup",
    "open_checkpoint": "recovery.checkpoint.reader",
    "plan_offset_rewrite": "recovery.checkpoint.rewrite",
    "plan_restart": "recovery.core.restart",
    "read_interrupted": "recovery.checkpoint.intent",
    "recover_interrupted": "recovery.checkpoint.intent",
    "restore_backup": "recovery.checkpoint.rewrite",
    "rewrite_offsets": "recovery.checkpoint.rewrite",
}

__all__ = [
    "BackupFile",
    "BackupListing",
    "BackupSet",
    "Checkpoint",
    "CheckpointInfo",
    "CommitLogEntry",
    "CrcStatus",
    "DeltaSourceOffset",
    "FileChange",
    "FileRead",
    "InitialOffsets",
    "Interrupted",
    "Issue",
    "KafkaOffsets",
    "Level",
    "Lock",
    "NextRun",
    "OffsetLogEntry",
    "OffsetSeqMetadata",
    "RecoverResult",
    "RestartState",
    "RestoreResult",
    "RewritePlan",
    "SourceInfo",
    "SourceKind",
    "SourceOffset",
    "StreamMetadata",
    "apply_rewrite",
    "checkpoint_lock",
    "incomplete_backups",
    "inspect_backups",
    "inspect_checkpoint",
    "list_backups",
    "open_checkpoint",
    "plan_offset_rewrite",
    "plan_restart",
    "read_interrupted",
    "recover_interrupted",
    "restore_backup",
    "rewrite_offsets",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recovery.checkpoint' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
