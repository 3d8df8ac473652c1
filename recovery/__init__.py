"""stream-recovery: recover Spark Structured Streaming jobs from Kafka offset trouble, safely."""

from recovery.errors import (
    ExitCode,
    ExternalError,
    InvalidInput,
    RecoveryError,
    StateError,
)

__version__ = "0.1.0"

__all__ = [
    "ExitCode",
    "ExternalError",
    "InvalidInput",
    "RecoveryError",
    "StateError",
    "__version__",
]
