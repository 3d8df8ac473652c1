"""Every runbook page, executed: its failure made for real on the rig, then each of its console
blocks run as an operator would (exit codes and promised lines checked) and its hidden steps
performed (Spark failing as the page says, the query restarted), in page order. The incident then
checks what the restarted query wrote: exactly the records the page's repair promised."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from incidents import INCIDENTS
from pyspark.sql import SparkSession
from transcript import RUNBOOKS, run_page


@pytest.mark.parametrize("page", sorted(INCIDENTS))
def test_runbook_page_runs_on_a_real_failure(
    page: str, spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    topic = f"orders-{Path(page).stem}-{uuid.uuid4().hex[:8]}"
    incidents = INCIDENTS[page](spark, bootstrap, tmp_path, topic)
    incident = next(incidents)
    ran = run_page(RUNBOOKS / page, incident.session())
    assert ran, f"{page} has no console block"
    with pytest.raises(StopIteration):
        next(incidents)  # the incident's own checks on what the restarted query wrote
