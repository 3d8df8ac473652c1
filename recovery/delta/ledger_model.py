"""Values for offset ledgers: Kafka positions kept in a Delta table instead of a Spark checkpoint.

A scheduled batch job reads ``spark.read.format("kafka")`` from the ledger's latest offsets and
appends one row per partition per run; a foreachBatch job records each batch's offsets next to its
data. The toolkit's own ledger has these columns (conf can map a user's table onto them)::

    pipeline      string     which job (one table can hold several)
    batch_id      long       the run / batch that read the range; the highest is the latest
    topic         string
    partition     int
    start_offset  long       first offset read
    end_offset    long       next offset to read (exclusive end): where the next run starts
    committed_at  timestamp  UTC
    written_by    string     the job, or "stream-recovery" for a correction
    note          string

Repair never rewrites history: it appends correction rows (``start_offset`` = the old position,
``end_offset`` = the new one) under a new batch id, in one commit whose custom metadata names the
plan. Delta time travel is the audit trail and the rollback (``DeltaTable(t, version=v)``).

Standard library, :mod:`recovery.core.model` and :mod:`recovery.errors` only: no IO.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from recovery.core.model import Isolation, Move, Plan, TopicPartition
from recovery.errors import ExitCode

SOURCE_ID = "ledger"  # the one SourcePosition a ledger is seen as
WRITTEN_BY = "stream-recovery"  # the written_by of correction rows
METADATA_KEY = "stream-recovery.plan"  # the correction commit's custom metadata key


@dataclass(frozen=True)
class LedgerEntry:
    """The latest row of one partition: where the next run starts."""

    tp: TopicPartition
    offset: int  # end_offset: the next offset to read
    batch_id: int
    committed_at: str | None = None
    written_by: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class LedgerState:
    """A ledger as read at Delta ``version``."""

    table: str
    pipeline: str | None
    version: int
    next_batch_id: int
    entries: tuple[LedgerEntry, ...]

    @property
    def positions(self) -> dict[TopicPartition, int]:
        return {e.tp: e.offset for e in self.entries}

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({e.tp.topic for e in self.entries}))


@dataclass(frozen=True)
class LedgerRow:
    """One row to append, in the toolkit's column names."""

    pipeline: str | None
    batch_id: int
    tp: TopicPartition
    start_offset: int | None
    end_offset: int
    committed_at_us: int
    written_by: str
    note: str


@dataclass(frozen=True)
class PendingBatch:
    """A batch the data table holds but the ledger does not: a run of the ledger job died between
    its data append and its ledger append. ``end`` is the range its data commit records (the
    ``userMetadata`` of ``recovery.delta.ledger_batches``): its records are in the data table, not lost."""

    data_table: str
    app_id: str
    batch_id: int
    start: Mapping[TopicPartition, int] = field(default_factory=dict)
    end: Mapping[TopicPartition, int] = field(default_factory=dict)

    def describe(self) -> str:
        return (
            f"batch {self.batch_id} of {self.app_id} is in {self.data_table} but the ledger has no rows "
            "for it (a run died between its data and ledger appends)"
        )


@dataclass(frozen=True)
class LedgerPlan:
    """A ledger judged against Kafka (``ledger validate``), with the correction rows a repair appends."""

    state: LedgerState
    plan: Plan
    rows: tuple[LedgerRow, ...]
    dropped: tuple[Move, ...]  # partitions whose topic or partition is gone: no row can say that
    isolation: Isolation = Isolation.READ_UNCOMMITTED
    # Judged as if its ledger rows were written (``state`` then includes it); a repair writes them first.
    pending: PendingBatch | None = None

    @property
    def needs_action(self) -> bool:
        return any(f.needs_action for f in self.plan.findings)

    @property
    def exit_code(self) -> ExitCode:
        """``ledger validate``: 1 when the next run would not start cleanly, else 0."""
        return ExitCode.ACTION_NEEDED if self.needs_action else ExitCode.OK

    def metadata(self) -> dict[str, str]:
        """The commit's custom metadata: the plan, so the Delta history says why the rows are there."""
        summary = {
            "pipeline": self.state.pipeline,
            "from_version": self.state.version,
            "batch_id": self.state.next_batch_id,
            "strategy": self.plan.strategy,
            "lost": self.plan.lost,
            "skipped": self.plan.skipped,
            "replayed": self.plan.replayed,
            "moves": [
                {
                    "topic": m.tp.topic,
                    "partition": m.tp.partition,
                    "old": m.old,
                    "new": m.new,
                    "verdict": m.verdict,
                }
                for m in self.plan.moves
            ],
        }
        return {METADATA_KEY: json.dumps(summary, separators=(",", ":"))}


@dataclass(frozen=True)
class LedgerRepair:
    """What ``repair_ledger`` planned, and with ``--execute`` appended."""

    ledger: LedgerPlan
    dry_run: bool = True
    version: int | None = None  # the Delta version of the correction commit, once written
    completed: int | None = None  # the ledger version in which the pending batch's rows were written

    @property
    def executed(self) -> bool:
        return self.version is not None or self.completed is not None

    @property
    def needs_action(self) -> bool:
        return self.ledger.needs_action

    @property
    def exit_code(self) -> ExitCode:
        """0 applied or nothing to do; 1 refused, changes pending in a dry run, or partitions gone
        (which no row can express: the job must stop reading them, whatever was appended)."""
        pending = (bool(self.ledger.rows) and not self.executed) or (
            self.ledger.pending is not None and self.completed is None
        )
        if self.ledger.plan.refused or self.ledger.dropped or pending:
            return ExitCode.ACTION_NEEDED
        return ExitCode.OK
