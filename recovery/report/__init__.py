"""Values -> rows and text, for every command (pure: no IO).

Each module turns the library's result values into the rows the CLI prints (dicts whose keys are
the documented JSON keys; the table picks columns from them) and the ``%`` message lines:

* :mod:`~recovery.report.findings`    validate, repair, starting-offsets, the gate, lag
* :mod:`~recovery.report.offsets`     offsets, read-to-end, group show/set
* :mod:`~recovery.report.checkpoint`  checkpoint show/backups/restore
* :mod:`~recovery.report.delta`       delta-source validate/repair, ledger show/validate/repair
* :mod:`~recovery.report.fleet`       conf check, fleet validate
"""

from __future__ import annotations

from recovery.report.findings import describe_finding, describe_move, findings_text, spark_outcome

__all__ = ["describe_finding", "describe_move", "findings_text", "spark_outcome"]
