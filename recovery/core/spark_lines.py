"""Spark lines, and what each prints when the Kafka source fails on restart.

The planning core names a failure by its Spark 4.x error condition (``KAFKA_DATA_LOSS.*``, apache/spark
#45221): that is the version-neutral name, kept as ``spark_error`` whatever the line. Spark 3.5's Kafka
source has no error conditions. With failOnDataLoss=true it throws ``IllegalStateException`` with a
message of its own and the failOnDataLoss paragraph (branch-3.5, connector/kafka-0-10-sql:
``KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets`` for changed, added and deleted partitions,
``KafkaDataConsumer.reportDataLoss0`` for an offset no longer in Kafka), wrapped in ``[STREAM_FAILED]``.
What fails and what runs is the same on every line the rig verified (docs/spark-versions.md): only the
words differ, so the model is one and :func:`says` words it for the line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from recovery.core.model import (
    ADDED_NOT_FROM_ZERO,
    COULD_NOT_READ,
    OFFSET_CHANGED,
    PARTITIONS_DELETED,
    Finding,
)
from recovery.core.restart import Issue, Level, NextRun, RestartState

# The lines whose restarts the rig compared with the model (make test-matrix); the default is the
# primary line, the one `make test` runs.
LINES = ("3.5", "4.0", "4.1", "4.2")
DEFAULT_LINE = "4.2"

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?(?:[-.+][\w.+-]*)?$")

# Spark 3.5's message start for each condition, as a pattern (what the rig's tests recognise in the
# exception chain) beside the wording :func:`says` prints.
_SPARK_35 = {
    COULD_NOT_READ: re.compile(r"Cannot fetch offset -?\d+ \("),
    OFFSET_CHANGED: re.compile(r"Partition \S+'s offset was changed from -?\d+ to -?\d+"),
    ADDED_NOT_FROM_ZERO: re.compile(r"Added partition \S+ starts from -?\d+ instead of 0"),
    PARTITIONS_DELETED: re.compile(r"Set\(.*\) are gone"),
}


def spark_line(version: str) -> str:
    """``3.5.7``, ``3.5`` or ``4.1.0-preview2`` -> its line (``3.5``); ValueError for text that is not a
    Spark version or a line the model was not verified on."""
    match = _VERSION.match(version.strip())
    if not match:
        raise ValueError(f"{version!r} is not a Spark version (e.g. 3.5 or 4.2.0)")
    line = f"{int(match[1])}.{int(match[2])}"
    if line not in LINES:
        raise ValueError(f"Spark {line} is not a line this tool was verified on ({', '.join(LINES)})")
    return line


def says(f: Finding, line: str = DEFAULT_LINE) -> str | None:
    """The start of what Spark ``line`` prints when restarting fails for ``f`` (None: it runs); from
    4.0 on, the error condition itself."""
    if f.spark_error is None or line != "3.5" or f.spark_error not in _SPARK_35:
        return f.spark_error
    tp = f"{f.tp.topic}-{f.tp.partition}"
    if f.spark_error == COULD_NOT_READ:
        text = f"Cannot fetch offset {f.position} (GroupId: …, TopicPartition: {tp})"
    elif f.spark_error == OFFSET_CHANGED:
        until = f.batch_end if f.batch_end is not None else f.available.end if f.available else None
        text = f"Partition {tp}'s offset was changed from {f.position} to {until}"
    elif f.spark_error == ADDED_NOT_FROM_ZERO:
        start = f.available.start if f.available else None
        text = f"Added partition {tp} starts from {start} instead of 0"
    else:  # PARTITIONS_DELETED: Spark lists every deleted partition of the query in one set
        text = f"Set({tp}) are gone"
    return f"IllegalStateException: {text}"


def condition_of(message: str) -> str | None:
    """The condition whose Spark 3.5 message ``message`` is (None: not one of them)."""
    for condition, pattern in _SPARK_35.items():
        if pattern.search(message):
            return condition
    return None


# Spark 4.2's restart check for an unfinished offline state repartition (SPARK-55111, apache/spark
# #53881; MicroBatchExecution.initializeExecution -> checkUnfinishedRepartitionBatch ->
# OfflineStateRepartitionUtils.isRepartitionBatch, 4.2.0): when the latest batch N is uncommitted
# (and some batch is), it compares spark.sql.shuffle.partitions in the metadata of offsets/N and
# offsets/N-1 with `.get`. Offset log v2 writes no such key in a query's first run
# (OffsetSeqMetadataV2.apply records only the relevant SQL confs; after a restart the v1 metadata,
# which has it, is carried on), so Spark fails with None.get before reading any source. The fix,
# SPARK-59662 (apache/spark #58929), was open when this was written. Async progress tracking
# skips the check (AsyncProgressTrackingMicroBatchExecution overrides it with a no-op).
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
CHECK_REPARTITION = "spark.sql.streaming.checkUnfinishedRepartitionOnRestart"
_CHECKS_REPARTITION = ("4.2",)
# In the issue's message: what the gate looks for (no repair cures it: clamp mode refuses too).
CANNOT_RESTART = "cannot restart this query as it is"


def restart_check_failure(
    line: str,
    state: RestartState,
    conf_of: Mapping[int, Mapping[str, str] | None],
    spark_conf: Mapping[str, str] | None = None,
) -> Issue | None:
    """Spark ``line``'s own failure on restart before it reads Kafka, if any: the issue says why
    and the way out. ``conf_of``: the batch metadata's conf of offsets/N and offsets/N-1 (None:
    no metadata line). ``spark_conf``: the query's session settings, where known (the check can
    be turned off)."""
    n = state.latest_offsets
    if (
        line not in _CHECKS_REPARTITION
        or (spark_conf or {}).get(CHECK_REPARTITION, "true").strip().lower() == "false"
        or state.asynchronous
        or state.next_run is not NextRun.RERUN_BATCH
        or n is None
        or state.latest_commit is None
    ):
        return None
    lacking = [b for b in (n, n - 1) if SHUFFLE_PARTITIONS not in (conf_of.get(b) or {})]
    if not lacking:
        return None
    files = " and ".join(f"offsets/{b}" for b in sorted(lacking))
    # isRepartitionBatch requires each file's metadata line, then reads the key with .get: N first.
    first = lacking[0]
    fails = (
        f"'requirement failed: Batch {first} metadata not found'"
        if conf_of.get(first) is None
        else "None.get"
    )
    return Issue(
        Level.ERROR,
        f"Spark {line} {CANNOT_RESTART}: batch {n} is uncommitted and the batch "
        f"metadata of {files} has no {SHUFFLE_PARTITIONS} (offset log v2 writes none in a query's "
        f"first run), so Spark's check for an unfinished state repartition fails with {fails} "
        f"before it reads Kafka (SPARK-59662; unless the query runs with async progress tracking, "
        f"which skips the check). Restart it with {CHECK_REPARTITION}=false on the session: batch "
        f"{n} re-runs from the same offsets. Batches written after a restart record the setting, "
        f"so from batch {n + 2} on the check passes and the default can return",
    )
