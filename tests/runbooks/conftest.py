"""The runbook tests reuse the end-to-end tests' streaming job (tests/integration/streaming_job.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
