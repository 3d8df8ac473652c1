"""Real-Time Mode (Spark 4.1+, ``trigger(realTime=...)``): what its restart does differently.

Nothing in a checkpoint says a query ran in Real-Time Mode, so the caller declares it
(``real_time=True``). Its Kafka source starts from the checkpoint's offsets without comparing them
with the log (``KafkaMicroBatchStream.planInputPartitions(start)``: "We are skipping partition
range check"), and each task's consumer (``auto.offset.reset=none``) is left to fail: an offset no
longer in Kafka raises the Kafka client's ``OffsetOutOfRangeException`` whatever failOnDataLoss
says (``KafkaDataConsumer.getIterator`` rethrows it unless the start is offset 0, which it asks again
and again as "not populated yet"). The same in 4.1.3 and 4.2.0 (connector/kafka-0-10-sql).

The model keeps to what the rig ran (tests/integration/test_spark_real_time.py): a position below
the log start fails with that exception, with failOnDataLoss true or false, and after a clamp
repair the query reads on from the log start. Every other partition that needs action is
:data:`NOT_PREDICTED`: its verdict (what Kafka holds) stands, its note says what Spark's source
suggests. And on restart Spark deletes an uncommitted ``offsets/N`` instead of re-running batch N
(``MicroBatchExecution``: "Deleting extra entries in offset log"): batch N runs anew from
``offsets/N-1``, as :func:`real_time_view` makes the checkpoint read. (Spark 4.2's check of an
unfinished state repartition runs before that purge, so its ``None.get`` stands in this mode too:
:mod:`recovery.core.spark_lines`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from recovery.core.model import CheckpointView, Finding, Verdict, copied_with

# The Spark lines that have Real-Time Mode for a Kafka source (apache/spark #52729, 4.1).
REAL_TIME_LINES = ("4.1", "4.2")
# What Spark fails with (the Kafka client's exception, in the task failure's cause chain).
OUT_OF_RANGE = "OffsetOutOfRangeException"
# ``spark_error`` of a partition whose outcome the rig has not verified in Real-Time Mode: it needs
# action (as its verdict says), but what Spark then does is not predicted.
NOT_PREDICTED = "REAL_TIME_MODE.NOT_PREDICTED"

_FROM_SOURCE = {
    Verdict.BEYOND_LOG_END: "its consumer asks for an offset past the log end: "
    f"{OUT_OF_RANGE} whatever failOnDataLoss says",
    Verdict.TOPIC_RECREATED: "no offset check: it reads on from the position in the new topic, "
    "skipping the records below it, whatever failOnDataLoss says (past the log end: "
    f"{OUT_OF_RANGE})",
    Verdict.NEW_PARTITION: "a new partition is read from its log start; one that does not start at 0 "
    "fails as in micro-batch mode (failOnDataLoss=false: a warning)",
    Verdict.PARTITION_GONE: "a deleted partition fails as in micro-batch mode (failOnDataLoss=false: "
    "a warning)",
    Verdict.TOPIC_GONE: "a deleted topic's partitions fail as in micro-batch mode (failOnDataLoss=false: "
    "a warning)",
    Verdict.OPEN_TRANSACTION: "a read_committed consumer waits at the position until the transaction ends",
    Verdict.BELOW_LOG_START: "offset 0 is asked again and again as a partition not populated yet: the "
    "query runs and never reads this partition",
}


def real_time_refusal(line: str) -> str | None:
    """Why Spark ``line`` has no Real-Time Mode to predict (None: it has)."""
    if line in REAL_TIME_LINES:
        return None
    return f"Real-Time Mode needs Spark {' or '.join(REAL_TIME_LINES)}, not {line}"


def real_time_view(view: CheckpointView) -> CheckpointView:
    """``view`` as a Real-Time Mode restart reads it: an uncommitted batch is not re-run over its
    stored range (Spark deletes its ``offsets/N``); batch N runs anew from the same start."""
    if not view.rerun:
        return view
    sources = tuple(replace(s, end=None, end_file=None, end_read_by_ms=None) for s in view.sources)
    return replace(view, rerun=False, sources=sources)


def real_time_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """``findings`` (judged as a micro-batch restart) as a Real-Time Mode restart turns out."""
    return tuple(_real_time(f) for f in findings)


def _real_time(f: Finding) -> Finding:
    if not f.needs_repair or f.verdict is Verdict.TRANSIENT:
        return f  # runs (OK, AT_RISK: the rig's first runs), or nothing known to judge with
    if f.verdict is Verdict.BELOW_LOG_START and f.position:
        return copied_with(
            f,
            spark_error=OUT_OF_RANGE,
            silently_skipped=0,
            notes=(
                *f.notes,
                "Real-Time Mode: the task's consumer fails on the deleted offset, with "
                "failOnDataLoss=false too",
            ),
        )
    source = _FROM_SOURCE.get(f.verdict)  # every verdict that needs a repair has its words
    says = f"; its source says: {source}" if source else ""
    return copied_with(
        f,
        spark_error=NOT_PREDICTED,
        silently_skipped=0,
        notes=(*f.notes, f"Real-Time Mode: what Spark does here is not predicted (not run on the rig){says}"),
    )
