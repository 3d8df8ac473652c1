"""The results of the use cases, as values that carry their own exit code (pure: no IO).

The CLI renders them (:mod:`recovery.cli.report`) and exits with ``result.exit_code``; Python callers
read the same fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from recovery.core.model import Finding, Isolation, Plan, Runway, StartingOffset, TopicPartition, Verdict
from recovery.core.restart import Issue, Level
from recovery.core.spark_lines import DEFAULT_LINE
from recovery.errors import ExitCode


@dataclass(frozen=True)
class ValidationReport:
    """What ``validate`` found: per-partition findings plus checkpoint-level issues."""

    checkpoint: str
    query_id: str
    batch_id: int
    rerun: bool
    isolation: Isolation
    findings: tuple[Finding, ...]
    issues: tuple[Issue, ...] = ()
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # as the cluster reported them now
    sink_warning: str | None = None  # a Delta sink (``sink=``) that would skip batches of this query
    runway_at_ms: int | None = None  # when the findings' runways were judged (None: not looked up)
    runway_warn_s: float | None = None  # the AT_RISK threshold they were judged with (None: none)
    # Delta sources whose table's cleanup may soon remove what they need (their warnings' text)
    delta_at_risk: tuple[str, ...] = ()
    spark_line: str = DEFAULT_LINE  # the Spark the query runs, whose words say each failure
    real_time: bool = False  # judged as a Real-Time Mode restart (recovery.core.real_time)

    @property
    def needs_action(self) -> bool:
        """Something to do before (or by) restarting: a repair, or starting the query soon (AT_RISK)."""
        return (
            any(f.needs_action for f in self.findings)
            or any(i.level is Level.ERROR for i in self.issues)
            or self.sink_warning is not None
            or bool(self.delta_at_risk)
        )

    @property
    def needs_repair(self) -> bool:
        """Needs action that starting the query does not cure (everything but AT_RISK)."""
        return (
            any(f.needs_repair for f in self.findings)
            or any(i.level is Level.ERROR for i in self.issues)
            or self.sink_warning is not None
        )

    @property
    def at_risk(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.verdict is Verdict.AT_RISK)

    @property
    def exit_code(self) -> ExitCode:
        if self.needs_action:
            return ExitCode.ACTION_NEEDED
        if any(f.verdict is Verdict.TRANSIENT for f in self.findings):
            return ExitCode.UNREACHABLE
        return ExitCode.OK


@dataclass(frozen=True)
class RepairResult:
    """A repair plan, and whether it was applied (then ``plan`` is the one re-made just before writing)."""

    plan: Plan
    executed: bool
    backup_id: str | None = None  # the backup set of the originals, when something was written
    sink_warning: str | None = None

    @property
    def exit_code(self) -> ExitCode:
        """0 applied or nothing to change; 1 refused by the policy, or a dry run with changes pending."""
        if self.plan.refused or (not self.executed and self.plan.changes):
            return ExitCode.ACTION_NEEDED
        return ExitCode.OK


STARTING_OFFSETS_CAVEATS = (
    "startingOffsets is read only when the checkpoint location has no offsets yet: start the query "
    "with a NEW checkpoint location.",
    "A Delta sink skips batch ids it already committed for the same query id (txn appId = query id): "
    "do not copy the old checkpoint's metadata file into the new one.",
    "A file sink keeps its own batch log in <output>/_spark_metadata and skips batch ids it has seen: "
    "a new checkpoint restarts at batch 0, so write to a new output path.",
)


@dataclass(frozen=True)
class StartingOffsets:
    """A complete ``startingOffsets`` for a fresh checkpoint, with where each value came from."""

    rows: tuple[StartingOffset, ...]
    caveats: tuple[str, ...] = STARTING_OFFSETS_CAVEATS
    warnings: tuple[str, ...] = ()
    exit_code: ExitCode = ExitCode.OK

    def to_json(self) -> str:
        """Spark's ``startingOffsets`` JSON, compact as Spark writes it: ``{"t":{"0":5,"1":7}}``."""
        by_topic: dict[str, dict[str, int]] = {}
        for row in sorted(self.rows, key=lambda r: r.tp):
            by_topic.setdefault(row.tp.topic, {})[str(row.tp.partition)] = row.offset
        return json.dumps(by_topic, separators=(",", ":"))


@dataclass(frozen=True)
class PartitionLag:
    """How far a checkpoint is behind: ``lag`` = log end - position, from the position as it is (not
    clamped to the log start: a job 20 behind whose first 10 were deleted is 20 behind, with
    ``records_lost`` 10 beside it); None when it cannot be said."""

    source_id: str
    tp: TopicPartition
    position: int | None
    log_start: int | None
    log_end: int | None
    verdict: Verdict
    records_lost: int = 0
    upper_bound: bool = False  # read_committed: the loss is counted in offsets
    runway: Runway | None = None  # retention runway of the unread records (None: not looked up)
    at_ms: int | None = None  # when the runway was judged

    @property
    def runway_s(self) -> float | None:
        """Seconds (at ``at_ms``) until retention may delete unread records; negative: it may now;
        None: no time limit (compacted, infinite retention, nothing unread) or not known."""
        left = self.runway.left_ms(self.at_ms) if self.runway and self.at_ms is not None else None
        return None if left is None else left / 1000

    @property
    def lag(self) -> int | None:
        if self.position is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.position)
