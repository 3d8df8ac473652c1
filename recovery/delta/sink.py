"""Whether a query's Delta sink would skip batches once its checkpoint is changed.

DeltaSink writes batch N with ``txnAppId`` = the query id and ``txnVersion`` = N, and writes nothing
for a batch id at or below the version the table already records for the query. Whether that skips
records is decided by :func:`recovery.delta.source.check_sink`, from values; here the checkpoint and
the table are read for it. The Kafka repair (:mod:`recovery.apply`, :mod:`recovery.api`) and the Delta
source repair (:mod:`recovery.delta.api`) ask here before they write and report what it says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from recovery.checkpoint import Checkpoint, NextRun, open_checkpoint
from recovery.checkpoint.options import StorageOptions
from recovery.core.model import CheckpointFile
from recovery.delta.log import app_transaction_version
from recovery.delta.model import SinkWarning
from recovery.delta.source import check_sink
from recovery.errors import SinkWouldSkip, StateError


def sink_warning(
    checkpoint: str | Checkpoint,
    sink: str,
    changed_files: Iterable[CheckpointFile | str] = (),
    storage_options: StorageOptions | None = None,
    *,
    table_options: Mapping[str, str] | None = None,
) -> SinkWarning | None:
    """Whether the Delta sink ``sink`` will skip batches of this checkpoint's query on restart,
    given the checkpoint files a repair changes (``offsets/N`` ...). ``storage_options`` open the
    checkpoint (when given as a location), ``table_options`` the sink's table. Raises StateError
    when Spark cannot restart from the checkpoint at all.

    Example: ``sink_warning("/chk", "/tables/out", ["offsets/7"])``
    """
    chk = checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(checkpoint, storage_options)
    return judge_sink(chk, sink, changed_files, table_options, strict=True)


def judge_sink(
    chk: Checkpoint,
    sink: str,
    changed_files: Iterable[CheckpointFile | str],
    table_options: Mapping[str, str] | None,
    *,
    strict: bool,
) -> SinkWarning | None:
    """:func:`sink_warning` on an open checkpoint. ``strict``: raise StateError when Spark cannot
    restart from the checkpoint at all; otherwise judge the batch its logs say runs next."""
    if strict and (problem := chk.restart_problem()) is not None:
        raise StateError(problem)
    state = chk.restart_state()
    next_batch, rerun = state.batch_id, state.next_run is not NextRun.NEXT_BATCH
    version = app_transaction_version(sink, chk.query_id, table_options)
    changed = rerun and str(CheckpointFile.offsets(next_batch)) in {str(f) for f in changed_files}
    return check_sink(sink, chk.query_id, version, next_batch=next_batch, rerun=rerun, rerun_changed=changed)


def refuse_sink_skip(
    checkpoint: str | Checkpoint,
    sink: str,
    changed_files: Iterable[CheckpointFile | str],
    storage_options: StorageOptions | None = None,
    *,
    table_options: Mapping[str, str] | None = None,
) -> None:
    """Raise SinkWouldSkip when the Delta sink ``sink`` would skip batches of this query once
    ``changed_files`` are rewritten: their records would never reach it."""
    warning = sink_warning(checkpoint, sink, changed_files, storage_options, table_options=table_options)
    if warning is not None:
        raise SinkWouldSkip(
            f"{warning.message}. Nothing was written: start the query on a new checkpoint "
            "(see `starting_offsets`), or pass `accept_sink_skip=True`"
        )
