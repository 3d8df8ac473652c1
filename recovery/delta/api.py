"""Use cases for Delta-tracked positions in a Spark checkpoint: read -> plan -> apply -> report.

    result = plan_delta_source("/chk", {"0": "/tables/orders"}, sink="/tables/out")
    result.plan.findings      # per Delta source: verdict, Spark's predicted error, versions lost
    result.sink_warning       # the Delta sink would skip batches of this query (None: it won't)
    repair_delta_source("/chk", "/tables/orders", execute=True)   # backup, then rewrite offsets/

``sink_warning`` is also what ``validate``, ``repair`` and ``starting-offsets`` call for Kafka
checkpoints whose sink is a Delta table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recovery.checkpoint import Checkpoint, open_checkpoint
from recovery.checkpoint.format import DeltaSourceOffset, SourceKind
from recovery.checkpoint.restart import NextRun
from recovery.checkpoint.rewrite import BackupSet, apply_rewrite, plan_delta_rewrite
from recovery.delta.ledger import (
    LedgerConf,
    LedgerPlan,
    append_rows,
    cluster_view,
    correction_rows,
    ledger_view,
    read_ledger,
)
from recovery.delta.log import app_transaction_version, read_table_log
from recovery.delta.model import DeltaPlan, DeltaPosition, DeltaSourceRead, DeltaStrategy, SinkWarning
from recovery.delta.source import check_sink, plan_source_repair
from recovery.errors import InvalidInput, LedgerBehindData, LedgerGateFailed, LossBudgetExceeded, StateError
from recovery.model import ClusterView, Policy, Strategy, TopicPartition
from recovery.plan import plan_repair

if TYPE_CHECKING:
    from recovery.kafka.admin import Isolation, NoMatch
    from recovery.kafka.config import KafkaConfig


@dataclass(frozen=True)
class DeltaSourceResult:
    plan: DeltaPlan
    sink_warning: SinkWarning | None = None
    backup: BackupSet | None = None  # set once the plan was applied
    restart_problem: str | None = None  # Spark cannot restart from the checkpoint whatever the offsets

    @property
    def executed(self) -> bool:
        return self.backup is not None

    @property
    def needs_action(self) -> bool:
        return (
            any(f.needs_action for f in self.plan.findings)
            or self.sink_warning is not None
            or self.restart_problem is not None
        )


def _restart_problem(chk: Checkpoint) -> str | None:
    """Why Spark cannot restart from the checkpoint at all (None: it can)."""
    state = chk.restart_state()
    if state.can_restart:
        return None
    problems = "; ".join(i.message for i in state.issues if i.level.value == "error")
    return f"{chk.location}: Spark cannot restart from this checkpoint: {problems}"


def _restart(chk: Checkpoint, *, strict: bool = True) -> tuple[int, bool, int | None]:
    """(batch Spark runs next, whether it re-runs a stored batch, the latest offsets batch).
    ``strict``: raise StateError when Spark cannot restart from the checkpoint at all."""
    if strict and (problem := _restart_problem(chk)) is not None:
        raise StateError(problem)
    state = chk.restart_state()
    return state.batch_id, state.next_run is not NextRun.NEXT_BATCH, state.latest_offsets


def delta_source_reads(chk: Checkpoint, tables: Mapping[str, str] | str) -> tuple[DeltaSourceRead, ...]:
    """The Delta source lines Spark reads on restart, with the table each source reads.

    ``tables`` maps source ids to table paths; a plain path names the table of the only Delta source
    (a checkpoint does not record a Delta source's path, only its table id).
    """
    _, rerun, latest = _restart(chk, strict=False)
    if latest is None:
        return ()
    end_entry = chk.offsets(latest)
    start_entry = chk.offsets(latest - 1) if latest > 0 and latest - 1 in chk.offset_batch_ids else None
    delta = [s for s in end_entry.sources if s.kind is SourceKind.DELTA and s.delta is not None]
    if isinstance(tables, str):
        if len(delta) != 1:
            raise InvalidInput(
                f"{chk.store.display(f'offsets/{latest}')}: {len(delta)} Delta sources; name each table "
                "as SOURCE_ID=PATH"
            )
        tables = {delta[0].source_id: tables}
    unknown = sorted(set(tables) - {s.source_id for s in delta})
    if unknown:
        raise InvalidInput(
            f"{chk.store.display(f'offsets/{latest}')}: no Delta source {', '.join(unknown)} (Delta sources: "
            f"{', '.join(s.source_id for s in delta) or 'none'})"
        )
    reads = []
    for source in delta:
        if source.source_id not in tables:
            continue
        assert source.delta is not None
        start = None
        if start_entry is not None:
            before = next((s for s in start_entry.sources if s.source_id == source.source_id), None)
            if before is not None and before.delta is not None:
                start = DeltaPosition(f"offsets/{latest - 1}", before.delta)
        end = DeltaPosition(f"offsets/{latest}", source.delta)
        reads.append(DeltaSourceRead(source.source_id, tables[source.source_id], start, end, rerun))
    return tuple(reads)


def sink_warning(
    checkpoint: str | Checkpoint,
    sink: str,
    *,
    changed_files: Iterable[str] = (),
    storage_options: Mapping[str, str] | None = None,
    table_options: Mapping[str, str] | None = None,
) -> SinkWarning | None:
    """Whether the Delta sink ``sink`` will skip batches of this checkpoint's query on restart,
    given the checkpoint files a repair changes (``offsets/N`` ...)."""
    chk = checkpoint if isinstance(checkpoint, Checkpoint) else open_checkpoint(checkpoint, storage_options)
    return _sink_warning(chk, sink, changed_files, table_options, strict=True)


def _sink_warning(
    chk: Checkpoint,
    sink: str,
    changed_files: Iterable[str],
    table_options: Mapping[str, str] | None,
    *,
    strict: bool,
) -> SinkWarning | None:
    next_batch, rerun, _ = _restart(chk, strict=strict)
    version = app_transaction_version(sink, chk.query_id, table_options)
    changed = rerun and f"offsets/{next_batch}" in set(changed_files)
    return check_sink(sink, chk.query_id, version, next_batch=next_batch, rerun=rerun, rerun_changed=changed)


def plan_delta_source(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    sink: str | None = None,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
    storage_options: Mapping[str, str] | None = None,
    table_options: Mapping[str, str] | None = None,
) -> DeltaSourceResult:
    """Validate a checkpoint's Delta sources against their tables and plan a repair (no writes)."""
    chk = open_checkpoint(checkpoint, storage_options)
    return _plan(chk, tables, strategy, sink, max_versions, adopt_new_table, table_options)


def _plan(
    chk: Checkpoint,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy,
    sink: str | None,
    max_versions: int | None,
    adopt_new_table: bool,
    table_options: Mapping[str, str] | None,
) -> DeltaSourceResult:
    # A checkpoint Spark cannot restart from is still judged (what its offsets need), and the reason
    # reported with the findings; repair_delta_source refuses to write to it.
    problem = _restart_problem(chk)
    next_batch, _, _ = _restart(chk, strict=False)
    reads = delta_source_reads(chk, tables)
    logs = {
        r.source_id: read_table_log(
            r.table, table_options, files_from=min(p.offset.reservoir_version for p in r.positions)
        )
        for r in reads
    }
    plan = plan_source_repair(
        reads,
        logs,
        strategy,
        checkpoint=chk.location,
        query_id=chk.query_id,
        batch_id=next_batch,
        max_versions=max_versions,
        adopt_new_table=adopt_new_table,
    )
    warning = None
    if sink is not None:
        warning = _sink_warning(chk, sink, plan.files, table_options, strict=False)
    return DeltaSourceResult(plan, warning, restart_problem=problem)


def repair_delta_source(
    checkpoint: str,
    tables: Mapping[str, str] | str,
    strategy: DeltaStrategy = DeltaStrategy.CLAMP,
    *,
    execute: bool = False,
    sink: str | None = None,
    max_versions: int | None = None,
    adopt_new_table: bool = False,
    storage_options: Mapping[str, str] | None = None,
    table_options: Mapping[str, str] | None = None,
    backup_dir: str | None = None,
    force: bool = False,
    active_within_s: float = 300.0,
) -> DeltaSourceResult:
    """Plan, and with ``execute`` apply: back up, then rewrite the Delta source lines in place.

    Raises LossBudgetExceeded (nothing written) when the plan is refused, CheckpointInUse when the
    newest batch file is younger than ``active_within_s`` (unless ``force``).
    """
    chk = open_checkpoint(checkpoint, storage_options)
    result = _plan(chk, tables, strategy, sink, max_versions, adopt_new_table, table_options)
    plan = result.plan
    if not execute or not plan.moves:
        return result
    if plan.refused:
        raise LossBudgetExceeded(f"{chk.location}: repair refused: {plan.refused}. Nothing was written.")
    if result.restart_problem is not None:
        raise StateError(f"{result.restart_problem}. Fix that first; nothing was written.")
    if not force:
        from recovery.api import refuse_if_in_use

        refuse_if_in_use(chk, active_within_s)
    batches: dict[int, dict[int | str, DeltaSourceOffset]] = {}
    for move in plan.moves:
        batches.setdefault(int(move.file.rpartition("/")[2]), {})[move.source_id] = move.new
    rewrite = plan_delta_rewrite(chk, batches)
    backup = apply_rewrite(chk, rewrite, backup_dir=backup_dir, storage_options=storage_options)
    return DeltaSourceResult(plan, result.sink_warning, backup, result.restart_problem)


# -- offset ledgers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerResult:
    ledger: LedgerPlan
    version: int | None = None  # the Delta version of the correction commit, once written

    @property
    def executed(self) -> bool:
        return self.version is not None

    @property
    def needs_action(self) -> bool:
        return any(f.needs_action for f in self.ledger.plan.findings)


def kafka_view(
    topics: Iterable[str],
    positions: Iterable[TopicPartition],
    kafka: KafkaConfig,
    isolation: Isolation | None = None,
) -> ClusterView:
    """What Kafka holds for ``topics``: every partition's log start and end (high watermark, or the
    last stable offset under read_committed)."""
    from recovery.kafka.admin import Isolation, PartitionOffsets, describe_topics, offset_ranges

    infos = describe_topics(kafka, topics)
    wanted = set(positions) | {
        TopicPartition(name, p) for name, info in infos.items() if info for p in range(info.partitions)
    }
    answers = offset_ranges(kafka, sorted(wanted), isolation or Isolation.READ_UNCOMMITTED)
    ranges = {tp: (a.range if isinstance(a, PartitionOffsets) else None) for tp, a in answers.items()}
    return cluster_view(ranges, {name: (info.partitions if info else None) for name, info in infos.items()})


def plan_ledger(
    conf: LedgerConf,
    kafka: KafkaConfig,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    isolation: Isolation | None = None,
    now_us: int | None = None,
) -> LedgerPlan:
    """Read the ledger's latest offsets, judge them against Kafka and plan correction rows.

    Example: ``plan_ledger(make_conf({"table": "/t/ledger", "pipeline": "orders"}), kafka).plan.findings``
    """
    state = read_ledger(conf)
    cluster = kafka_view(state.topics, state.positions, kafka, isolation)
    plan = plan_repair(ledger_view(state), cluster, strategy, policy)
    now = now_us if now_us is not None else int(time.time() * 1_000_000)
    rows, dropped = correction_rows(state, plan, now_us=now)
    return LedgerPlan(state, plan, rows, dropped)


def ledger_time_targets(
    conf: LedgerConf,
    kafka: KafkaConfig,
    timestamp_ms: int,
    no_match: NoMatch,
    *,
    isolation: Isolation | None = None,
) -> dict[TopicPartition, int]:
    """For ``--to-datetime``/``--by-duration``: the first offset at or after ``timestamp_ms`` in every
    partition of the ledger's topics."""
    from recovery.kafka.admin import Isolation, MissingPartition, offsets_for_time

    state = read_ledger(conf)
    level = isolation or Isolation.READ_UNCOMMITTED
    partitions = sorted(kafka_view(state.topics, state.positions, kafka, level).partitions)
    found = offsets_for_time(kafka, partitions, timestamp_ms, no_match=no_match, isolation=level)
    return {tp: row.offset for tp, row in found.items() if not isinstance(row, MissingPartition)}


def repair_ledger(
    conf: LedgerConf,
    kafka: KafkaConfig,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    execute: bool = False,
    isolation: Isolation | None = None,
) -> LedgerResult:
    """Plan, and with ``execute`` append the correction rows in one commit named after the plan.

    Raises LossBudgetExceeded (nothing written) when the policy refuses the plan, PlanOutdated when
    the ledger changed since it was read, LedgerBehindData when ``conf.data_table`` records a batch
    the ledger does not.
    """
    refuse_if_behind_data(conf)
    ledger = plan_ledger(conf, kafka, strategy, policy, isolation=isolation)
    if not execute or not ledger.rows:
        return LedgerResult(ledger)
    if ledger.plan.refused:
        raise LossBudgetExceeded(f"{conf.table}: repair refused: {ledger.plan.refused}. Nothing was written.")
    version = append_rows(
        conf, ledger.rows, expected_version=ledger.state.version, metadata=ledger.metadata()
    )
    return LedgerResult(ledger, version)


def refuse_if_behind_data(conf: LedgerConf) -> None:
    """Raise LedgerBehindData if ``conf.data_table``'s app transaction for the pipeline (the job's
    ``txnAppId``) is at or above the ledger's next batch id. Nothing to check without a data table."""
    from recovery.errors import DeltaTableNotFound

    if conf.data_table is None:
        return
    app_id = conf.pipeline or conf.table
    try:
        data_batch = app_transaction_version(conf.data_table, app_id, conf.storage_options)
    except DeltaTableNotFound:
        return  # the job never wrote: nothing can be ahead
    state = read_ledger(conf)
    if data_batch is not None and data_batch >= state.next_batch_id:
        raise LedgerBehindData(
            f"{conf.data_table} holds batch {data_batch} of {app_id}, but {conf.table} records batches only "
            f"up to {state.next_batch_id - 1}: a run died between its data and ledger appends. Run the job "
            "once (it writes that batch's ledger rows first), then repair. Nothing was written."
        )


def ledger_gate(
    conf: LedgerConf,
    kafka: KafkaConfig,
    *,
    mode: str = "fail",
    policy: Policy | None = None,
    isolation: Isolation | None = None,
) -> LedgerPlan:
    """The pre-start gate for a ledger job: ``fail`` raises with the findings, ``clamp`` appends
    correction rows within ``policy`` (LossBudgetExceeded beyond it), ``warn`` prints and goes on.
    Returns the plan the run starts from (re-read after a clamp)."""
    ledger = plan_ledger(conf, kafka, None, policy, isolation=isolation)
    bad = [f for f in ledger.plan.findings if f.needs_action]
    if not bad:
        return ledger
    text = "\n".join(f"  {f.tp}: {f.verdict.value}: {f.detail}" for f in bad)
    if mode == "warn":
        print(
            f"stream-recovery gate: {conf.table}: the next run would not start cleanly:\n{text}",
            file=sys.stderr,
        )
        return ledger
    if mode == "fail":
        raise LedgerGateFailed(
            f"{conf.table}: the next run would not start cleanly:\n{text}\n"
            f"Run `stream-recovery ledger repair {conf.table}"
            f"{f' --pipeline {conf.pipeline}' if conf.pipeline else ''}` to see the repair plan."
        )
    if ledger.dropped:
        gone = ", ".join(str(m.tp) for m in ledger.dropped)
        raise LedgerGateFailed(
            f"{conf.table}: {gone} no longer exist in Kafka, which no ledger row can express: stop the job "
            "reading them. Nothing was written."
        )
    result = repair_ledger(conf, kafka, None, policy, execute=True, isolation=isolation)
    moves = ", ".join(f"{m.tp} {m.old} -> {m.new} (lost {m.lost})" for m in result.ledger.plan.moves)
    print(
        f"stream-recovery gate: {conf.table}: repaired in version {result.version}: {moves}", file=sys.stderr
    )
    return plan_ledger(conf, kafka, None, policy, isolation=isolation)
