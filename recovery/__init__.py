"""stream-recovery: recover Spark Structured Streaming jobs from Kafka offset trouble, safely.

    from recovery import KafkaConfig, apply, plan_repair, validate_checkpoint

    kafka = KafkaConfig("kafka:9092")
    report = validate_checkpoint("/chk/orders", kafka)      # what Spark will do on restart
    plan = plan_repair("/chk/orders", kafka)                # follower-style clamp, as data
    apply(plan, kafka)                                      # backup, atomic rewrite, .crc

Names are loaded on first use (PEP 562), so ``import recovery`` and the CLI's start stay cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Applied": "recovery.api",
    "CheckpointFormatError": "recovery.errors",
    "ExitCode": "recovery.errors",
    "ExternalError": "recovery.errors",
    "Finding": "recovery.model",
    "GateMode": "recovery.model",
    "InvalidInput": "recovery.errors",
    "Isolation": "recovery.model",
    "KafkaConfig": "recovery.kafka.config",
    "OffsetRange": "recovery.model",
    "Plan": "recovery.model",
    "Policy": "recovery.model",
    "RecoveryError": "recovery.errors",
    "Report": "recovery.api",
    "StateError": "recovery.errors",
    "Strategy": "recovery.model",
    "StrategyKind": "recovery.model",
    "TopicPartition": "recovery.model",
    "Verdict": "recovery.model",
    "apply": "recovery.api",
    "checkpoint_lag": "recovery.api",
    "list_backups": "recovery.checkpoint",
    "open_checkpoint": "recovery.checkpoint",
    "plan_repair": "recovery.api",
    "prestart_gate": "recovery.gate",
    "restore_backup": "recovery.checkpoint",
    "starting_offsets": "recovery.api",
    "validate_checkpoint": "recovery.api",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recovery' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
