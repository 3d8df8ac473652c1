"""Kafka's own command-line tools, run from the rig's Kafka jars (what ``bin/kafka-*.sh`` run)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from recovery.local.jars import jar_dir, kafka_set

# kafka-consumer-groups.sh runs this class (Kafka 3.7+ moved it from kafka.admin into kafka-tools).
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    assert java, "java not found"
    return java


def kafka_tool(main_class: str, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools (its main class, as its ``bin/kafka-*.sh`` runs it) with
    ``--bootstrap-server BOOTSTRAP ARGS...``."""
    command = [
        _java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{jar_dir(kafka_set())}/*",
        main_class, "--bootstrap-server", bootstrap, *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def kafka_consumer_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kafka-consumer-groups.sh --bootstrap-server BOOTSTRAP ARGS...``."""
    return kafka_tool(CONSUMER_GROUP_COMMAND, bootstrap, *args)


def describe_group(bootstrap: str, group: str) -> dict[tuple[str, int], dict[str, str]]:
    """``--describe --group GROUP`` as {(topic, partition): {column: value}} (CURRENT-OFFSET,
    LOG-END-OFFSET, LAG, CONSUMER-ID, ...), as the tool prints them."""
    done = kafka_consumer_groups(bootstrap, "--describe", "--group", group)
    assert done.returncode == 0, done.stderr[-2000:]
    rows: dict[tuple[str, int], dict[str, str]] = {}
    header: list[str] = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if fields[:2] == ["GROUP", "TOPIC"]:
            header = fields
        elif header and len(fields) == len(header) and fields[0] == group:
            row = dict(zip(header, fields, strict=True))
            rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    return rows


def get_offsets(bootstrap: str, topic: str, time: str) -> dict[int, int]:
    """``kafka-get-offsets.sh --topic TOPIC --time TIME`` as {partition: offset} (``-4``: the earliest
    local offset, the first still on the brokers' disks under tiered storage; librdkafka cannot ask)."""
    done = kafka_tool("org.apache.kafka.tools.GetOffsetShell", bootstrap, "--topic", topic, "--time", time)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = (line.rsplit(":", 2) for line in done.stdout.split())
    return {int(partition): int(offset) for _, partition, offset in rows}
