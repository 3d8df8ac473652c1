"""A local SparkSession with the real Kafka connector and Delta on ``spark.jars``.

PySpark starts its JVM with every builder setting as ``--conf``, so the jars must be set before the
first session in the process. ``spark.jars`` (not ``extraClassPath``) keeps Spark's own classes first:
jars that pyspark already ships (Hadoop, Jackson, Scala, logging) are left out of the list anyway, so
exactly one copy of each class is on the path. No Ivy: the jars come from ``make jars`` (Maven).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from recovery.core.spark_lines import condition_of
from recovery.local.jars import jars, spark_set, split_jar_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Path | None = None


def spark_jars() -> list[Path]:
    """The connector and Delta closure minus the artifacts pyspark already bundles."""
    import pyspark

    bundled = {split_jar_name(p)[0] for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [p for p in jars(spark_set()) if split_jar_name(p)[0] not in bundled]


def local_spark(app_name: str = "stream-recovery-rig", conf: Mapping[str, str] | None = None) -> SparkSession:
    """Build (or return the running) local SparkSession for the rig.

    The first call in a process starts Spark's JVM with its stdout and stderr (the JDK's own warnings
    and log4j's console output, WARN and above) going to a file, :func:`spark_log`, as the broker's
    go to its ``server.log``: a test's or the demo's terminal shows what Python reports, and a Spark
    failure still reaches the caller as a pyspark exception carrying Spark's error.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    global _log
    scratch = Path(tempfile.mkdtemp(prefix="stream-recovery-spark-"))
    settings = {
        "spark.master": "local[2]",
        "spark.app.name": app_name,
        "spark.jars": ",".join(str(p) for p in spark_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        "spark.local.dir": str(scratch / "local"),
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.ui.showConsoleProgress": "false",
        **(conf or {}),
    }
    spark_conf = SparkConf().setAll(list(settings.items()))
    if SparkContext._gateway is None:  # no JVM in this process yet: start it, output to a file
        from pyspark.java_gateway import launch_gateway

        _log = scratch / "spark.log"
        with _log.open("ab") as out:  # the JVM holds its own copy of the descriptor
            # popen_kwargs is pyspark's documented way to capture the gateway JVM's stdout/stderr.
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                spark_conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT}
            )
        SparkContext(conf=spark_conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def spark_log() -> Path | None:
    """The file the rig's Spark JVM writes its output and log to (None: not started by the rig)."""
    return _log


def jvm_versions(spark: SparkSession) -> dict[str, str]:
    """Versions as the running JVM reports them (the classes actually loaded)."""
    jvm = spark.sparkContext._jvm  # the py4j gateway, the only way in
    assert jvm is not None
    return {
        "Spark (JVM)": spark.version,
        "kafka-clients (loaded by Spark)": str(jvm.org.apache.kafka.common.utils.AppInfoParser.getVersion()),
        # py4j resolves names through Spark's class loader, which holds the spark.jars.
        "Delta (loaded by Spark)": str(
            jvm.io.delta.sql.DeltaSparkSessionExtension._java_lang_class.getPackage().getImplementationVersion()
        ),
    }


def error_conditions(exc: BaseException) -> list[tuple[str, str | None, str]]:
    """(Java class, Spark error condition, message) along a pyspark exception's cause chain.

    ``StreamingQueryException`` wraps the real failure several levels deep (STREAM_FAILED ->
    task failure -> the source's own error); tests and the demo look for the source's condition,
    e.g. ``KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE``.
    """
    from py4j.protocol import Py4JError

    chain: list[tuple[str, str | None, str]] = []
    throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    while throwable is not None and len(chain) < 25:
        condition = None
        for name in ("getCondition", "getErrorClass"):  # getErrorClass before Spark 4.0
            with contextlib.suppress(Py4JError):
                found = getattr(throwable, name)()
                condition = None if found is None else str(found)
                break
        message = str(throwable.getMessage() or "").strip()
        chain.append((str(throwable.getClass().getName()), condition, message))
        throwable = throwable.getCause()
    return chain


def failure_conditions(chain: list[tuple[str, str | None, str]]) -> list[str]:
    """The error conditions along :func:`error_conditions`' chain, outermost first. Spark 3.5's Kafka
    source raises none: there, its message says which one it is (``spark_lines.condition_of``)."""
    return [c for _, condition, message in chain if (c := condition or condition_of(message))]
