"""Where the rig's jars are, and which versions they are.

``make jars`` copies two closures into the repository's ``.cache/jars/`` (override with
``STREAM_RECOVERY_JARS``): ``kafka/`` (broker + kafka-tools + log4j2) and ``spark/`` (Kafka connector +
Delta). The two are never mixed: the broker runs kafka-clients 4.x, Spark's connector 3.9.x.
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


def jar_dir(name: str) -> Path:
    """The complete jar directory ``name`` (``kafka`` or ``spark``), or a RigError saying how to get it."""
    path = jar_root() / name
    if not (path / ".complete").exists():
        raise RigError(f"{path}: the {name} jars are missing; run `make jars` to fetch them with Maven")
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
    """The version of ``artifact`` in jar set ``name``, e.g. ``artifact_version("kafka", "kafka_2.13")``."""
    for path in jars(name):
        found, version = split_jar_name(path)
        if found == artifact:
            return version
    raise RigError(f"{jar_dir(name)}: no {artifact} jar; run `make clean jars`")


def versions() -> dict[str, str]:
    """The versions the rig actually uses, read from the jars and the installed pyspark."""
    from importlib.metadata import PackageNotFoundError, version

    def dist(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return {
        "Kafka broker": artifact_version("kafka", "kafka_2.13"),
        "pyspark": dist("pyspark"),
        "spark-sql-kafka-0-10": artifact_version("spark", "spark-sql-kafka-0-10_2.13"),
        "spark-token-provider-kafka-0-10": artifact_version("spark", "spark-token-provider-kafka-0-10_2.13"),
        "kafka-clients (Spark)": artifact_version("spark", "kafka-clients"),
        "delta-spark (JVM)": artifact_version("spark", "delta-spark_4.2_2.13"),
        "delta-spark (Python)": dist("delta-spark"),
        "confluent-kafka": dist("confluent-kafka"),
        "deltalake": dist("deltalake"),
    }
