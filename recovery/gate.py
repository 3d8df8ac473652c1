"""The pre-start gate: call it right before ``query.start()``.

    from recovery.gate import GateMode, prestart_gate
    kafka = KafkaConfig("kafka:9092")
    prestart_gate("/chk", kafka, mode=GateMode.CLAMP, policy=Policy(max_loss_records=10_000))
    query = df.writeStream.option("checkpointLocation", "/chk").start(path)

``fail`` (default) raises with a readable report when Spark would fail or silently skip data;
``clamp`` repairs follower-style through the executor (:func:`recovery.apply.apply`: loss budget,
plan re-made on fresh offsets, Delta sink refusal with ``sink``) and lets the job start; ``warn``
logs the report (logger ``recovery.gate``, level WARNING) and lets the job start as it is. A healthy
checkpoint gets its topic ids recorded, so a later run can tell a recreated topic from the old one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from recovery.api import Report, plan_repair, validate_checkpoint
from recovery.apply import apply
from recovery.checkpoint import checkpoint_lock, open_checkpoint
from recovery.checkpoint.store import Store
from recovery.errors import GateFailed
from recovery.kafka.config import KafkaConfig
from recovery.model import GateMode, Isolation, Policy, Strategy
from recovery.report import describe_move, findings_text
from recovery.topic_ids import record_topic_ids

log = logging.getLogger(__name__)


def prestart_gate(
    checkpoint: str,
    kafka: KafkaConfig,
    *,
    mode: GateMode = GateMode.FAIL,
    policy: Policy | None = None,
    strategy: Strategy | None = None,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: Mapping[str, Any] | None = None,
    sink: str | None = None,
) -> Report | None:
    """Check (and in ``clamp`` mode repair) ``checkpoint`` before the query starts.

    Returns the report the query starts with, or None for a new query (no checkpoint yet).
    ``sink``: the query's Delta sink table; clamp mode then refuses a repair the sink would skip.
    """
    store = Store(checkpoint, storage_options)
    if not store.exists("metadata"):
        return None  # a new query: Spark starts from startingOffsets, nothing to check
    report = validate_checkpoint(
        checkpoint, kafka, isolation=isolation, storage_options=storage_options, sink=sink
    )
    if not report.needs_action:
        with checkpoint_lock(checkpoint, storage_options, command="prestart gate"):
            record_topic_ids(open_checkpoint(checkpoint, storage_options), report.topic_ids, "prestart gate")
        return report
    text = f"{checkpoint}: the query would not restart cleanly:\n{findings_text(report.findings)}"
    if mode is GateMode.WARN:
        log.warning("%s", text)
        return report
    if mode is GateMode.FAIL:
        raise GateFailed(f"{text}\nRun `stream-recovery repair {checkpoint}` to see the repair plan.")
    plan = plan_repair(
        checkpoint, kafka, strategy, policy, isolation=isolation, storage_options=storage_options, sink=sink
    )
    # The job is about to start, so the checkpoint is not in use: no in-use check.
    applied = apply(
        plan, kafka, storage_options=storage_options, force=True, sink=sink, recorded_by="prestart gate"
    )
    moves = "\n".join(describe_move(m) for m in applied.plan.moves)
    backup = applied.backup.id if applied.backup else "none"
    log.warning("%s: repaired (backup %s):\n%s", checkpoint, backup, moves)
    return validate_checkpoint(
        checkpoint, kafka, isolation=isolation, storage_options=storage_options, sink=sink
    )
