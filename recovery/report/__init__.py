"""Values -> rows and text, for every command (pure: no IO).

Each module turns the library's result values into the rows the CLI prints (dicts whose keys are
the documented JSON keys; the table picks columns from them) and the ``%`` message lines:

* :mod:`~recovery.report.findings`    validate, repair, starting-offsets, the gate, lag
* :mod:`~recovery.report.offsets`     offsets, read-to-end, group show/set
* :mod:`~recovery.report.checkpoint`  checkpoint show/backups/restore
* :mod:`~recovery.report.delta`       delta-source validate/repair, ledger show/validate/repair
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recovery.report.findings import describe_finding, describe_move, findings_text, spark_outcome

__all__ = ["describe_finding", "describe_move", "findings_text", "spark_outcome"]


def __getattr__(name: str) -> Any:
    # Lazy: ``offsets`` and ``read-to-end`` import recovery.report.offsets, which must not pull in
    # the findings report (recovery.results, recovery.checkpoint: ~60 ms of their start-up).
    if name in __all__:
        from recovery.report import findings

        return getattr(findings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
