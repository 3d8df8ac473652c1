"""Values -> rows and text, for every command (pure: no IO). The CLI's own words: they may name
its flags and commands (``add --execute to apply``), which the library never does.

Each module turns the library's result values into the rows the CLI prints (dicts whose keys are
the documented JSON keys; the table picks columns from them) and the ``%`` message lines:

* :mod:`~recovery.cli.report.findings`    validate, repair, starting-offsets, the gate, lag
* :mod:`~recovery.cli.report.offsets`     offsets, read-to-end, group show/set
* :mod:`~recovery.cli.report.checkpoint`  checkpoint show/backups/restore
* :mod:`~recovery.cli.report.delta`       delta-source validate/repair, ledger show/validate/repair
* :mod:`~recovery.cli.report.fleet`       conf check, fleet validate
"""
