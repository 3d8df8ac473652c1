"""The pure core: values in, values out. No files, network, processes, threads, clock or randomness;
everything it needs is an argument (tests/test_structure.py checks it).

* :mod:`~recovery.core.model`     the domain values: partitions, ranges, findings, plans (frozen)
* :mod:`~recovery.core.specs`     offset and time specs as Kafka's tools spell them, parsed
* :mod:`~recovery.core.restart`   what Spark does with a checkpoint's last batches on restart
* :mod:`~recovery.core.plan`      findings and repair plans from a checkpoint and a cluster, as values
* :mod:`~recovery.core.strategy`  the repair strategies (clamp, earliest, latest, to-datetime, ...)
* :mod:`~recovery.core.runway`    how long until retention deletes what a query has not read
* :mod:`~recovery.core.results`   what the use cases return
* :mod:`~recovery.core.wording`   the words shared by the library's messages and the report layer
* :mod:`~recovery.core.advice`    the library's advice (Python in backquotes) in a command line's words

The edges (:mod:`recovery.checkpoint`, :mod:`recovery.kafka`, :mod:`recovery.delta`) read the
world into these values; the use cases (:mod:`recovery.api` and its siblings) call the core.
"""
