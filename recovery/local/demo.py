"""``make demo``: the failure this toolkit exists for, on the real rig.

1. start a real Kafka broker and a real SparkSession (Kafka connector + Delta);
2. a streaming query copies topic ``orders`` into a Delta table, with a checkpoint;
3. while the job is down, new records arrive and retention (here: DeleteRecords) moves the log start
   offset of two partitions past the checkpoint;
4. the restarted query dies with Spark's data-loss error; we print what happened per partition.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from recovery.local import topics
from recovery.local.broker import LocalKafkaBroker
from recovery.local.jars import versions

TOPIC = "orders"
PARTITIONS = 3
out = Console(soft_wrap=True)


def _checkpoint_offsets(checkpoint: Path) -> dict[int, int]:
    newest = max(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    return {int(p): o for p, o in json.loads(newest.read_text().split("\n")[2])[TOPIC].items()}


def _step(text: str) -> None:
    out.print(f"\n[bold cyan]==>[/] [bold]{text}[/]")


def main() -> None:
    from pyspark.errors import StreamingQueryException

    from recovery.local.pipeline import run_once
    from recovery.local.spark import error_conditions, jvm_versions, local_spark

    workdir = Path(tempfile.mkdtemp(prefix="stream-recovery-demo-"))
    table, checkpoint = str(workdir / "orders_delta"), workdir / "checkpoint"
    try:
        _step("Versions in use")
        for name, version in versions().items():
            out.print(f"  {name:32} {version}")

        _step("Starting a real Kafka broker (KRaft, single node)")
        with LocalKafkaBroker() as broker:
            bootstrap = broker.bootstrap_servers
            out.print(f"  BROKERS={bootstrap}  (pid {broker.pid}, log {broker.log_path})")

            _step("Starting Spark with the Kafka connector and Delta jars")
            spark = local_spark("stream-recovery-demo", {"spark.ui.showConsoleProgress": "false"})
            spark.sparkContext.setLogLevel("OFF")  # the demo prints the failure itself
            for name, version in jvm_versions(spark).items():
                out.print(f"  {name:32} {version}")

            _step(f"Producing 1,000 keyed records to {TOPIC} ({PARTITIONS} partitions)")
            topics.create_topic(bootstrap, TOPIC, PARTITIONS)
            now = int(time.time() * 1000)
            topics.produce(
                bootstrap, TOPIC, topics.keyed_records(1000, partitions=PARTITIONS, timestamp_ms=now)
            )

            _step("Running the streaming job Kafka -> Delta (checkpointed) until it has caught up")
            args = {"bootstrap": bootstrap, "topic": TOPIC, "table": table, "checkpoint": str(checkpoint)}
            run_once(spark, **args)
            rows = spark.read.format("delta").load(table).count()
            saved = _checkpoint_offsets(checkpoint)
            out.print(f"  Delta table has {rows} rows; checkpoint offsets/N says next offsets {saved}")

            _step("The job is down. 100 more records arrive; retention removes old data from 2 partitions")
            topics.produce(bootstrap, TOPIC, topics.keyed_records(100, partitions=PARTITIONS, start=1000))
            topics.delete_records(bootstrap, TOPIC, {0: saved[0] + 15, 1: saved[1] + 15})

            report = Table("partition", "checkpoint offset", "log start", "high watermark", "records lost")
            for partition in range(PARTITIONS):
                start, end = topics.offset_range(bootstrap, TOPIC, partition)
                lost = max(0, start - saved[partition])
                report.add_row(
                    f"{TOPIC} [{partition}]",
                    str(saved[partition]),
                    str(start),
                    str(end),
                    f"[red]{lost}[/]" if lost else "0",
                )
            out.print(report)

            _step("Restarting the job from its checkpoint")
            try:
                run_once(spark, **args)
                out.print("[red]Unexpected: Spark restarted without an error.[/]")
                raise SystemExit(1)
            except StreamingQueryException as exc:
                chain = error_conditions(exc)
            # The deepest error with a Spark condition is the source's own (below STREAM_FAILED).
            source = [link for link in chain if link[1]][-1]
            out.print(f"  Spark failed: [bold red]{source[1]}[/] ({source[0]})")
            for line in source[2].splitlines():
                out.print(f"    {line}", markup=False, highlight=False)

            _step("What happened")
            out.print(
                "  The checkpoint still points at offsets that Kafka no longer holds, so Spark stops\n"
                "  with a data-loss error on every restart (or, with failOnDataLoss=false, skips the\n"
                "  records silently). Today the choices are hand-editing offsets/N (and its .crc) or\n"
                "  throwing the checkpoint away. stream-recovery's validate and repair commands do this\n"
                "  safely: predict the failure, clamp to the log start offset with a backup, and count\n"
                "  exactly what was lost."
            )
            spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
