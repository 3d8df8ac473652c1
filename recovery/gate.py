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

Retention runway (``runway_warn_s``, default 6 h): partitions whose unread records retention may
delete sooner (verdict AT_RISK) are only logged as a warning in every mode, never refused: starting
the job is what cures them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from recovery.api import ValidationReport, plan_repair, validate_checkpoint
from recovery.apply import apply
from recovery.checkpoint import checkpoint_lock, open_checkpoint
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.store import Store
from recovery.core.model import GateMode, Isolation, Policy, Strategy
from recovery.core.restart import Level
from recovery.core.spark_lines import CANNOT_RESTART, DEFAULT_LINE
from recovery.core.wording import describe_move, findings_text
from recovery.errors import GateFailed, InvalidInput
from recovery.kafka.config import KafkaConfig
from recovery.topic_ids import record_topic_ids
from recovery.validate import parsed_spark_line

log = logging.getLogger(__name__)

# The gate only warns on a short runway, so a default threshold costs nothing but a log line.
DEFAULT_GATE_RUNWAY_WARN_S = 6 * 3600.0


def prestart_gate(
    checkpoint: str,
    kafka: KafkaConfig,
    *,
    mode: GateMode = GateMode.FAIL,
    policy: Policy | None = None,
    strategy: Strategy | None = None,
    isolation: Isolation = Isolation.READ_UNCOMMITTED,
    storage_options: StorageOptions | None = None,
    sink: str | None = None,
    runway_warn_s: float | None = DEFAULT_GATE_RUNWAY_WARN_S,
    spark_version: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    real_time: bool = False,
) -> ValidationReport | None:
    """Check (and in ``clamp`` mode repair) ``checkpoint`` before the query starts.

    Returns the report the query starts with, or None for a new query (no checkpoint yet).
    ``sink``: the query's Delta sink table; clamp mode then refuses a repair the sink would skip.
    ``runway_warn_s``: warn (never refuse) when retention may delete unread records sooner (None: no
    runway check). ``spark_version``: the job's own (``pyspark.__version__``), whose words the report
    gives and whose own restart checks it predicts (a line not verified is warned about, and judged
    as the default line); ``spark_conf``: the session's settings, where they change those checks;
    ``real_time``: the query is started in Real-Time Mode (:mod:`recovery.core.real_time`).
    A checkpoint that Spark itself cannot restart from is refused in ``clamp`` mode too: no repair
    cures it (the report says what does).
    """
    try:
        parsed_spark_line(spark_version)
    except InvalidInput as exc:  # a job must not be kept from starting by its Spark's name alone
        log.warning("%s; failures are judged and worded as Spark %s does", exc, DEFAULT_LINE)
        spark_version = None
    store = Store(checkpoint, storage_options)
    if not store.exists("metadata"):
        return None  # a new query: Spark starts from startingOffsets, nothing to check
    report = validate_checkpoint(
        checkpoint,
        kafka,
        isolation=isolation,
        storage_options=storage_options,
        sink=sink,
        runway=runway_warn_s is not None,
        runway_warn_s=runway_warn_s,
        spark_version=spark_version,
        spark_conf=spark_conf,
        real_time=real_time,
    )
    _warn_runway(checkpoint, report)
    if not report.needs_repair:
        with checkpoint_lock(checkpoint, storage_options, command="prestart gate"):
            record_topic_ids(open_checkpoint(checkpoint, storage_options), report.topic_ids, "prestart gate")
        return report
    repair = [f for f in report.findings if f.needs_repair]
    # The checkpoint's own errors first (Spark failing before it reads Kafka), then the partitions.
    said = [i.message for i in report.issues if i.level is Level.ERROR]
    said.append(findings_text(repair or report.findings, report.spark_line))
    text = f"{checkpoint}: the query would not restart cleanly:\n" + "\n".join(said)
    if mode is GateMode.WARN:
        log.warning("%s", text)
        return report
    if mode is GateMode.FAIL:
        raise GateFailed(f"{text}\nRun `plan_repair({checkpoint!r}, kafka)` to see the repair plan.")
    if any(i.level is Level.ERROR and CANNOT_RESTART in i.message for i in report.issues):
        raise GateFailed(f"{text}\nNo repair cures this; nothing was written.")
    plan = plan_repair(
        checkpoint, kafka, strategy, policy, isolation=isolation, storage_options=storage_options, sink=sink
    )
    # The job is about to start its query, so file ages say nothing (a restart after a crash finds
    # fresh batch files); a fresh running heartbeat, though, is another instance of this job
    # (submitted twice): active_within_s=0 makes the in-use check the heartbeat's alone.
    applied = apply(
        plan,
        kafka,
        storage_options=storage_options,
        active_within_s=0.0,
        sink=sink,
        recorded_by="prestart gate",
    )
    moves = "\n".join(describe_move(m) for m in applied.plan.moves)
    backup = applied.backup.id if applied.backup else "none"
    log.warning("%s: repaired (backup %s):\n%s", checkpoint, backup, moves)
    return validate_checkpoint(
        checkpoint,
        kafka,
        isolation=isolation,
        storage_options=storage_options,
        sink=sink,
        runway=runway_warn_s is not None,
        runway_warn_s=runway_warn_s,
        spark_version=spark_version,
        spark_conf=spark_conf,
        real_time=real_time,
    )


def _warn_runway(checkpoint: str, report: ValidationReport) -> None:
    """AT_RISK partitions: a warning only; starting the query is what reads those records in time."""
    risky = report.at_risk
    if risky:
        lines = "\n".join(f"{f.tp}: {f.detail}" for f in risky)
        log.warning("%s: retention may delete records the query has not read yet:\n%s", checkpoint, lines)
