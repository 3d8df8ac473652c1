"""Delta-tracked positions: Delta streaming-source offsets, Delta sink idempotency, offset ledgers.

Delta streaming sources and sinks:

* :mod:`~recovery.delta.model`   values (pure)
* :mod:`~recovery.delta.source`  validation and repair planning for Delta source offsets (pure)
* :mod:`~recovery.delta.log`     the deltalake edge: table id, log contents, app transactions;
                                  the one import of deltalake and pyarrow
* :mod:`~recovery.delta.sink`    a Delta sink's txn against a plan: sink_warning, refuse_sink_skip
* :mod:`~recovery.delta.api`     use cases: plan_delta_source, repair_delta_source

Offset ledgers (Kafka offsets kept in a Delta table):

* :mod:`~recovery.delta.ledger_conf`   the ``[ledger]`` conf: table, pipeline, column mapping (pydantic)
* :mod:`~recovery.delta.ledger_model`  values: entries, state, rows, plans, results (pure)
* :mod:`~recovery.delta.ledger_plan`   the ledger as the planning core sees it; correction rows (pure)
* :mod:`~recovery.delta.ledger_table`  the table edge: read the latest offsets, create, append rows
* :mod:`~recovery.delta.ledger`        use cases: plan_ledger, repair_ledger, ledger_gate
* :mod:`~recovery.delta.ledger_batches` how a batch is recorded in the data table and the ledger;
                                         a crashed run's pending batch
* :mod:`~recovery.delta.ingest`        the ledger job's protocol: crash recovery, batch ranges, appends

Nothing here imports deltalake or pyarrow at import time: :mod:`~recovery.delta.log` is the one
place that does, on first use, and without the ``delta`` extra raises
:class:`~recovery.errors.DeltaNotInstalled` (exit 2, with the ``pip install`` to run).
"""
