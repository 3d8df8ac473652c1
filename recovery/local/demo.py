"""``make demo``: the failure this toolkit exists for, on the real rig.

1. start a real Kafka broker and a real SparkSession (Kafka connector + Delta);
2. a streaming query copies topic ``orders`` into a Delta table, with a checkpoint;
3. while the job is down, new records arrive and retention (here: DeleteRecords) moves the log start
   offset of two partitions past the checkpoint;
4. the restarted query dies with Spark's data-loss error;
5. ``stream-recovery validate`` predicts it, ``repair`` plans the follower-style fix, ``repair
   --execute`` applies it with a backup, and the job restarts, having lost exactly what the plan said.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from recovery.cli.render import table_lines
from recovery.local import topics
from recovery.local.broker import LocalKafkaBroker
from recovery.local.jars import versions

TOPIC = "orders"
PARTITIONS = 3
LOSS_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("checkpoint_offset", "CHECKPOINT"),
    ("log_start_offset", "LOG-START"),
    ("high_watermark", "LOG-END"),
    ("records_lost", "LOST"),
)
out = Console(soft_wrap=True)


def _checkpoint_offsets(checkpoint: Path) -> dict[int, int]:
    newest = max(
        (p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    return {int(p): o for p, o in json.loads(newest.read_text().split("\n")[2])[TOPIC].items()}


def _cli(*args: str, expect: int) -> None:
    """Run the real CLI, as an operator would, and show its output; stop if its exit code is not the
    one the story expects (a CLI error must not scroll by as part of the demo)."""
    out.print(f"  [dim]$ stream-recovery {' '.join(args)}[/]")
    done = subprocess.run(
        [sys.executable, "-m", "recovery", *args], capture_output=True, text=True, check=False
    )
    for line in (done.stdout + done.stderr).splitlines():
        out.print(f"    {line}", markup=False, highlight=False)
    out.print(f"  [dim](exit code {done.returncode})[/]")
    if done.returncode != expect:
        out.print(f"[red]Unexpected: exit code {done.returncode}, the story expects {expect}.[/]")
        raise SystemExit(1)


def _step(text: str) -> None:
    out.print(f"\n[bold cyan]==>[/] [bold]{text}[/]")


def main() -> None:
    from pyspark.errors import StreamingQueryException

    from recovery.local.pipeline import run_once
    from recovery.local.spark import error_conditions, jvm_versions, local_spark, spark_log

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
            out.print(f"  Spark's own output and log: {spark_log()}")
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

            positions = []
            for partition in range(PARTITIONS):
                start, end = topics.offset_range(bootstrap, TOPIC, partition)
                positions.append(
                    {
                        "topic": TOPIC,
                        "partition": partition,
                        "checkpoint_offset": saved[partition],
                        "log_start_offset": start,
                        "high_watermark": end,
                        "records_lost": max(0, start - saved[partition]),
                    }
                )
            # The CLI's own table style (validate prints the same columns below).
            for line in table_lines(positions, LOSS_COLUMNS):
                out.print(f"  {line}", markup=False, highlight=False)

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

            _step("Pre-start check: stream-recovery validate (no Spark, no JVM)")
            _cli("validate", str(checkpoint), "-b", bootstrap, expect=1)  # 1: action needed

            _step("The repair plan: stream-recovery repair (a dry run by default)")
            _cli("repair", str(checkpoint), "-b", bootstrap, expect=1)  # 1: a dry run with changes pending

            _step("Apply it: --execute (backup, atomic rewrite, fresh .crc). The job is stopped: --force")
            _cli("repair", str(checkpoint), "-b", bootstrap, "--execute", "--force", expect=0)
            _cli("checkpoint", "backups", str(checkpoint), expect=0)

            _step("Restarting the job from the repaired checkpoint")
            run_once(spark, **args)
            frame = spark.read.format("delta").load(table)
            rows, distinct = frame.count(), frame.select("partition", "offset").distinct().count()
            produced, lost = (
                1100,
                sum(max(0, topics.offset_range(bootstrap, TOPIC, p)[0] - saved[p]) for p in saved),
            )
            out.print(
                f"  The job ran. Delta table: {rows} rows ({distinct} distinct offsets) "
                f"of the {produced} produced;\n  {produced - rows} missing = the {lost} records "
                "retention deleted before the job read them, the loss the plan reported."
            )
            if rows != distinct or produced - rows != lost:
                out.print("[red]Unexpected: the table does not match the plan.[/]")
                raise SystemExit(1)
            spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
