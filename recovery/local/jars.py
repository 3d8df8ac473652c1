"""Where the rig's jars are, and which versions they are.

``make jars`` copies two closures into the repository's ``.cache/jars/`` (override with
``STREAM_RECOVERY_JARS``): ``kafka/`` (broker + kafka-tools + log4j2) and ``spark/`` (Kafka connector +
Delta). The two are never mixed: the broker runs kafka-clients 4.x, Spark's connector 3.9.x.

Each other Spark line of the version matrix has its own set, ``spark-<line>/`` (``make line-3.5``),
used by the venv holding that line's pyspark: the set follows the running pyspark, never a setting.
Each other Kafka version has its own broker set, ``kafka-<version>/`` (``make kafka-3.9.1``), used
when ``KAFKA_VERSION`` names it (the Kafka version matrix, ``make test-kafka-matrix``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from recovery.errors import RigError

_REPO_ROOT = Path(__file__).resolve().parents[2]
_VERSIONED = re.compile(r"^(?P<artifact>.+)-(?P<version>\d+\.\d+[\w.\-]*)\.jar$")


def jar_root() -> Path:
    return Path(os.environ.get("STREAM_RECOVERY_JARS", _REPO_ROOT / ".cache" / "jars"))


# The Spark line `make jars` fetches into spark/ (pyproject's `spark` extra); the others are matrix lines.
PRIMARY_SPARK_LINE = "4.2"


# The broker `make jars` fetches into kafka/ (jvm/kafka.pom.xml); KAFKA_VERSION picks another.
PRIMARY_KAFKA_VERSION = "4.1.1"
_KAFKA_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def kafka_set() -> str:
    """The broker's jar set: ``kafka`` for the primary version, else ``kafka-<KAFKA_VERSION>``."""
    wanted = os.environ.get("KAFKA_VERSION", "").strip()
    if not wanted or wanted == PRIMARY_KAFKA_VERSION:
        return "kafka"
    if not _KAFKA_VERSION.match(wanted):
        raise RigError(f"KAFKA_VERSION={wanted!r}: expected a Kafka release, as 3.9.1")
    return f"kafka-{wanted}"


def installed_spark_line() -> str:
    """The installed pyspark's line, ``major.minor``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return ".".join(version("pyspark").split(".")[:2])
    except PackageNotFoundError:
        raise RigError("pyspark is not installed: run `make venv` (the rig's Spark)") from None


def spark_set() -> str:
    """The jar set for the installed pyspark: ``spark`` for the primary line, else ``spark-<line>``."""
    line = installed_spark_line()
    return "spark" if line == PRIMARY_SPARK_LINE else f"spark-{line}"


def jar_dir(name: str) -> Path:
    """The complete jar directory ``name`` (``kafka``, ``spark`` or ``spark-<line>``), or a RigError
    saying how to get it."""
    path = jar_root() / name
    if not (path / ".complete").exists():
        raise RigError(f"{path}: the {name} jars are missing; run `{_fetch(name)}` to fetch them with Maven")
    return path


def jars(name: str) -> list[Path]:
    return sorted(jar_dir(name).glob("*.jar"))


def split_jar_name(path: Path) -> tuple[str, str]:
    """``kafka-clients-3.9.2.jar`` -> (``kafka-clients``, ``3.9.2``)."""
    match = _VERSIONED.match(path.name)
    if not match:
        return path.stem, ""
    return match["artifact"], match["version"]


def artifact_version(name: str, artifact: str) -> str:
    """The version of ``artifact`` in jar set ``name``, e.g. ``artifact_version("kafka", "kafka_2.13")``;
    an ``artifact`` ending in ``_`` matches any suffix (``delta-spark_`` finds ``delta-spark_4.2_2.13``)."""
    for path in jars(name):
        found, version = split_jar_name(path)
        if found == artifact or (artifact.endswith("_") and found.startswith(artifact)):
            return version
    raise RigError(f"{jar_dir(name)}: no {artifact} jar; run `{_fetch(name, clean=True)}`")


def require_jar(name: str, pattern: str, what: str) -> None:
    """A RigError saying how to fetch jar set ``name`` afresh when no jar of it matches ``pattern``
    (a set fetched before the jar was added to its POM)."""
    if not any(jar_dir(name).glob(pattern)):
        raise RigError(f"{jar_dir(name)}: no {what} ({pattern}); run `{_fetch(name, clean=True)}`")


def _fetch(name: str, *, clean: bool = False) -> str:
    """The make command that fetches jar set ``name`` (``clean``: afresh, the set being complete)."""
    target = f"line-{name.removeprefix('spark-')}" if name.startswith("spark-") else "jars"
    target = name if name.startswith("kafka-") else target
    return f"make {'clean ' if clean else ''}{target}"


def versions() -> dict[str, str]:
    """The versions the rig actually uses, read from the jars and the installed pyspark."""
    from importlib.metadata import PackageNotFoundError, version

    def dist(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    spark = spark_set()
    return {
        "Kafka broker": artifact_version(kafka_set(), "kafka_2.13"),
        "pyspark": dist("pyspark"),
        "spark-sql-kafka-0-10": artifact_version(spark, "spark-sql-kafka-0-10_"),
        "spark-token-provider-kafka-0-10": artifact_version(spark, "spark-token-provider-kafka-0-10_"),
        "kafka-clients (Spark)": artifact_version(spark, "kafka-clients"),
        "delta-spark (JVM)": artifact_version(spark, "delta-spark_"),
        "delta-spark (Python)": dist("delta-spark"),
        "confluent-kafka": dist("confluent-kafka"),
        "deltalake": dist("deltalake"),
    }
