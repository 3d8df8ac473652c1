"""stream-recovery: recover Spark Structured Streaming jobs from Kafka offset trouble, safely.

    from recovery import KafkaConfig, apply, plan_repair, validate_checkpoint

    kafka = KafkaConfig("kafka:9092")
    report = validate_checkpoint("/chk/orders", kafka)      # what Spark will do on restart
    plan = plan_repair("/chk/orders", kafka)                # follower-style clamp, as data
    apply(plan, kafka)                                      # refusals, backup, atomic rewrite, .crc

Every use case the CLI runs is here: Kafka checkpoints (``validate_checkpoint``, ``repair_checkpoint``,
``starting_offsets``, ``prestart_gate``), checkpoint files (``inspect_checkpoint``, ``restore_backup``),
Kafka (``offset_table``, ``read_to_end``, ``show_group``), Delta sources and offset ledgers
(``repair_delta_source``, ``repair_ledger``, ``ledger_gate``), fleets (``validate_fleet``,
``FleetWatch``, ``hold_fleet``) and retention holds (``hold_retention``, ``release_retention``).

Names are loaded on first use (PEP 562), so ``import recovery`` and the CLI's start stay cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Applied": "recovery.apply",
    "BackupListing": "recovery.checkpoint",
    "CheckpointFile": "recovery.core.model",
    "CheckpointFormatError": "recovery.errors",
    "CheckpointInfo": "recovery.checkpoint",
    "DeltaSourceRepair": "recovery.delta.model",
    "DeltaSourceResult": "recovery.delta.model",
    "DeltaStrategy": "recovery.delta.model",
    "ExitCode": "recovery.errors",
    "ExternalError": "recovery.errors",
    "Finding": "recovery.core.model",
    "FleetConf": "recovery.conf",
    "FleetReport": "recovery.fleet",
    "FleetWatch": "recovery.watch",
    "GateMode": "recovery.core.model",
    "GroupChange": "recovery.kafka.group_values",
    "GroupReport": "recovery.kafka.group_values",
    "HoldPlan": "recovery.core.hold",
    "Interrupted": "recovery.checkpoint",
    "InvalidInput": "recovery.errors",
    "Isolation": "recovery.core.model",
    "KafkaConfig": "recovery.kafka.config",
    "LedgerConf": "recovery.delta.ledger_conf",
    "LedgerPlan": "recovery.delta.ledger_model",
    "LedgerRepair": "recovery.delta.ledger_model",
    "NoMatch": "recovery.core.model",
    "OffsetRange": "recovery.core.model",
    "OffsetTable": "recovery.kafka.values",
    "OnBeyondEnd": "recovery.core.model",
    "PartitionLag": "recovery.core.results",
    "Plan": "recovery.core.model",
    "Policy": "recovery.core.model",
    "ReadSummary": "recovery.kafka.values",
    "ReleasePlan": "recovery.core.hold",
    "RecoverResult": "recovery.checkpoint",
    "RecoveryError": "recovery.errors",
    "RepairResult": "recovery.core.results",
    "Validation": "recovery.validate",
    "ValidationReport": "recovery.core.results",
    "RestoreResult": "recovery.checkpoint",
    "Runway": "recovery.core.model",
    "StartingOffsets": "recovery.core.results",
    "StateError": "recovery.errors",
    "Strategy": "recovery.core.model",
    "StrategyKind": "recovery.core.model",
    "StrategyRequest": "recovery.core.strategy",
    "TopicPartition": "recovery.core.model",
    "TopicSelection": "recovery.core.model",
    "Verdict": "recovery.core.model",
    "apply": "recovery.apply",
    "checkpoint_lag": "recovery.api",
    "checkpoint_lock": "recovery.checkpoint",
    "group_offsets": "recovery.kafka.groups",
    "hold_fleet": "recovery.fleet_hold",
    "hold_retention": "recovery.hold",
    "incomplete_backups": "recovery.checkpoint",
    "inspect_backups": "recovery.checkpoint",
    "inspect_checkpoint": "recovery.checkpoint",
    "ledger_gate": "recovery.delta.ledger",
    "list_backups": "recovery.checkpoint",
    "load_conf": "recovery.conf",
    "offset_ranges": "recovery.kafka.offsets",
    "offset_table": "recovery.kafka.offsets",
    "offsets_for_time": "recovery.kafka.offsets",
    "open_checkpoint": "recovery.checkpoint",
    "plan_delta_source": "recovery.delta.api",
    "plan_ledger": "recovery.delta.ledger",
    "plan_repair": "recovery.api",
    "prepare_run": "recovery.delta.ingest",
    "prestart_gate": "recovery.gate",
    "read_holds": "recovery.hold",
    "read_interrupted": "recovery.checkpoint",
    "read_to_end": "recovery.kafka.read",
    "recover_crashed_batch": "recovery.delta.ingest",
    "recover_interrupted": "recovery.checkpoint",
    "release_fleet": "recovery.fleet_hold",
    "release_retention": "recovery.hold",
    "repair_checkpoint": "recovery.api",
    "repair_delta_source": "recovery.delta.api",
    "repair_ledger": "recovery.delta.ledger",
    "resolve_strategy": "recovery.core.strategy",
    "restore_backup": "recovery.checkpoint",
    "set_group_offsets": "recovery.kafka.groups",
    "show_group": "recovery.kafka.groups",
    "starting_offsets": "recovery.api",
    "validate_checkpoint": "recovery.validate",
    "validate_checkpoints": "recovery.validate",
    "validate_fleet": "recovery.fleet",
}

__all__ = sorted([*_EXPORTS, "__version__"])


# Any: the exports are objects of many types, and a caller's type checker sees each through this
# function (they are not also imported under TYPE_CHECKING: docs/griffe_exports.py reads _EXPORTS).
def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recovery' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
