"""Delta-tracked positions: Delta streaming-source offsets, Delta sink idempotency, offset ledgers.

* :mod:`~recovery.delta.model`   values (pure)
* :mod:`~recovery.delta.source`  validation and repair planning for Delta source offsets (pure)
* :mod:`~recovery.delta.log`     the deltalake edge: table id, log contents, app transactions
* :mod:`~recovery.delta.api`     use cases: plan_delta_source, repair_delta_source, sink_warning
* :mod:`~recovery.delta.ledger`  offset ledger tables: schema, column mapping, read, repair

Nothing here imports deltalake or pyarrow at import time.
"""
