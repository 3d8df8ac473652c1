"""Use cases for offset ledgers (Kafka positions kept in a Delta table): read -> plan -> apply.

    conf = make_conf({"table": "/lake/ops/kafka_ledger", "pipeline": "orders-hourly"})
    plan_ledger(conf, kafka).plan.findings          # ledger validate
    repair_ledger(conf, kafka, execute=True)        # ledger repair --execute: correction rows
    ledger_gate(conf, kafka, mode=GateMode.CLAMP, policy=Policy(max_loss_records=10_000))

The cluster is read through :mod:`recovery.kafka.cluster`, as for checkpoints; the decisions are
:mod:`recovery.delta.ledger_plan`'s; the table is read and appended by
:mod:`recovery.delta.ledger_table`. Nothing here prints: the gate logs what it did.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from recovery.core.model import ClusterView, GateMode, Isolation, NoMatch, Policy, Strategy, TopicPartition
from recovery.core.strategy import StrategyRequest, resolve_strategy
from recovery.core.wording import describe_move
from recovery.delta.ledger_batches import complete_batch, pending_batch
from recovery.delta.ledger_conf import LedgerConf
from recovery.delta.ledger_model import LedgerPlan, LedgerRepair, LedgerState, PendingBatch
from recovery.delta.ledger_plan import plan_ledger_repair, with_pending
from recovery.delta.ledger_table import append_rows, read_ledger
from recovery.errors import LedgerGateFailed, LossBudgetExceeded
from recovery.kafka.cluster import cluster_view, time_targets
from recovery.kafka.config import KafkaConfig
from recovery.kafka.groups import load_offsets_file

log = logging.getLogger(__name__)


def _now_us() -> int:
    return int(time.time() * 1_000_000)


def _cluster(kafka: KafkaConfig, state: LedgerState, isolation: Isolation) -> ClusterView:
    return cluster_view(kafka, state.topics, isolation)


def plan_ledger(
    conf: LedgerConf,
    kafka: KafkaConfig,
    strategy: Strategy | None = None,
    policy: Policy | None = None,
    *,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    now_us: int | None = None,
) -> LedgerPlan:
    """Read the ledger's latest offsets, judge them against Kafka and plan correction rows
    (``ledger validate``; never writes).

    Example: ``plan_ledger(make_conf({"table": "/t/ledger", "pipeline": "orders"}), kafka).plan.findings``
    """
    state = read_ledger(conf)
    pending = find_pending(conf, state)
    cluster = _cluster(kafka, with_pending(state, pending), isolation)
    now = _now_us() if now_us is None else now_us
    return plan_ledger_repair(
        state, cluster, strategy, policy, now_us=now, isolation=isolation, pending=pending
    )


def find_pending(conf: LedgerConf, state: LedgerState) -> PendingBatch | None:
    """The batch ``conf.data_table`` holds that the ledger does not (the job's own crash evidence:
    the data table's app transaction for the pipeline ahead of the ledger's). Nothing to find
    without a data table."""
    if conf.data_table is None:
        return None
    return pending_batch(conf, conf.data_table, state)


def repair_ledger(
    conf: LedgerConf,
    kafka: KafkaConfig,
    strategy: StrategyRequest | Strategy | None = None,
    policy: Policy | None = None,
    *,
    execute: bool = False,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    now_ms: int | None = None,
) -> LedgerRepair:
    """Plan, and with ``execute`` append the correction rows in one commit named after the plan.

    ``strategy`` is a resolved :class:`~recovery.core.model.Strategy`, or the options as given
    (:class:`~recovery.core.strategy.StrategyRequest`): time strategies are resolved against the ledger's
    topics at ``now_ms`` (default: now), ``--from-file`` read here. Raises LossBudgetExceeded (nothing
    written) when the policy refuses the plan, PlanOutdated when the ledger changed since it was
    read. When ``conf.data_table`` holds a batch the ledger does not (a run died between its
    appends), the plan is made as if that batch's ledger rows were written, and ``execute`` writes
    them first (from the range its data commit records, as the job's next run would), then the
    corrections under the next batch id: ledger and data agree.

    Example: ``repair_ledger(conf, kafka, StrategyRequest(by_duration="PT1H"), execute=True)``
    """
    state = read_ledger(conf)
    pending = find_pending(conf, state)
    cluster: list[ClusterView] = []  # read once, when first needed (after the options are checked)

    def view() -> ClusterView:
        if not cluster:
            cluster.append(_cluster(kafka, with_pending(state, pending), isolation))
        return cluster[0]

    def targets_at(timestamp_ms: int, no_match: NoMatch) -> Mapping[TopicPartition, int]:
        return time_targets(kafka, view().partitions, timestamp_ms, no_match, isolation)

    if isinstance(strategy, StrategyRequest):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        strategy = resolve_strategy(
            strategy, now_ms=now, time_targets=targets_at, file_targets=load_offsets_file
        )
    ledger = plan_ledger_repair(
        state, view(), strategy, policy, now_us=_now_us(), isolation=isolation, pending=pending
    )
    if not execute or not (ledger.rows or pending):
        return LedgerRepair(ledger, dry_run=not execute)
    if ledger.plan.refused:
        raise LossBudgetExceeded(f"{conf.table}: repair refused: {ledger.plan.refused}. Nothing was written.")
    read_at, completed = state.version, None
    if pending is not None:
        read_at = completed = complete_batch(conf, pending, read_at=state.version)
    version = None
    if ledger.rows:
        version = append_rows(conf, ledger.rows, expected_version=read_at, metadata=ledger.metadata())
    return LedgerRepair(ledger, dry_run=False, version=version, completed=completed)


def ledger_gate(
    conf: LedgerConf,
    kafka: KafkaConfig,
    *,
    mode: GateMode = GateMode.FAIL,
    policy: Policy | None = None,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
) -> LedgerPlan:
    """The pre-start gate for a ledger job, as :func:`recovery.gate.prestart_gate` is for a
    checkpoint: ``fail`` raises LedgerGateFailed with the findings, ``clamp`` appends correction rows
    within ``policy`` (LossBudgetExceeded beyond it), ``warn`` logs them and goes on. Returns the
    plan the run starts from (re-read after a clamp)."""
    ledger = plan_ledger(conf, kafka, None, policy, isolation=isolation)
    bad = [f for f in ledger.plan.findings if f.needs_action]
    if not bad:
        return ledger
    text = "\n".join(f"  {f.tp}: {f.verdict.value}: {f.detail}" for f in bad)
    if mode is GateMode.WARN:
        log.warning("stream-recovery gate: %s: the next run would not start cleanly:\n%s", conf.table, text)
        return ledger
    if mode is GateMode.FAIL:
        pipeline = f" (pipeline {conf.pipeline})" if conf.pipeline else ""
        raise LedgerGateFailed(
            f"{conf.table}: the next run would not start cleanly:\n{text}\n"
            f"Run `repair_ledger(conf, kafka)` on {conf.table}{pipeline} to see the repair plan."
        )
    if ledger.dropped:
        gone = ", ".join(str(m.tp) for m in ledger.dropped)
        raise LedgerGateFailed(
            f"{conf.table}: {gone} no longer exist in Kafka, which no ledger row can express: stop the job "
            "reading them. Nothing was written."
        )
    repaired = repair_ledger(conf, kafka, None, policy, execute=True, isolation=isolation)
    moves = ", ".join(describe_move(m) for m in repaired.ledger.plan.moves)
    log.warning("stream-recovery gate: %s: repaired in version %s: %s", conf.table, repaired.version, moves)
    return plan_ledger(conf, kafka, None, policy, isolation=isolation)
