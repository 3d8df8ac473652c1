"""tests/safety: shares the checkpoint builder of tests/checkpoint (Spark 4.2 bytes, Kafka query)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
