"""Export a Spark streaming query's Kafka lag, read from its checkpoint.

Spark commits no offsets to Kafka, so kafka-consumer-groups, Burrow and friends cannot see a Spark
job's lag. This job reads where the checkpoint resumes, compares it with the log end, and

* prints one JSON line per partition (``source, topic, partition, position, log_start, log_end, lag,
  records_lost, records_lost_upper_bound, verdict``) on stdout, for a metrics pipeline: ``lag`` is
  log end - position as the checkpoint holds it (a job 20 behind is 20 behind even when retention
  deleted 10 of those records; ``records_lost`` says how many are gone); and
* with ``--group NAME``, commits the positions to that consumer group, a monitor-only group with no
  members, so the usual Kafka lag tools show the job (the group is never used to consume). Each
  offset carries ``stream-recovery:1:lag_export`` in its commit metadata; a group holding offsets
  without that marker is someone else's and is refused unless ``--force``, which first saves its
  offsets to ``--backup-dir`` (a ``topic,partition,offset`` file ``stream-recovery group set
  --from-file`` restores) and prints the path.

Run it on a schedule (cron, an Airflow task, a Kubernetes CronJob):

    python jobs/lag_export.py /data/chk -b kafka:9092 --group spark-orders-monitor

Exit codes: 0 written; 2 bad input; 3 Kafka or storage unreachable; 1 refused, nothing committed:
--group has active members (even with --force: never commit into a live group) or holds offsets
stream-recovery did not commit (without --force).
"""

from __future__ import annotations

import json

import click
from _options import kafka_options, run_job

from recovery.api import checkpoint_lag
from recovery.core.model import Isolation, OffsetRange, TopicPartition
from recovery.core.plan import clamp
from recovery.kafka.groups import set_group_offsets


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("checkpoint")
@kafka_options
@click.option("--group", metavar="NAME", help="Also commit the positions to this monitor-only group.")
@click.option(
    "--force",
    is_flag=True,
    help="Commit even into a --group holding offsets stream-recovery did not commit (saved first).",
)
@click.option(
    "--backup-dir",
    metavar="DIR",
    help="Where --force saves the group's previous offsets (default "
    "$XDG_STATE_HOME/stream-recovery/group-backups).",
)
@click.option(
    "--isolation",
    type=click.Choice([level.value for level in Isolation]),
    default=Isolation.READ_UNCOMMITTED.value,
    show_default=True,
    help="The query's kafka.isolation.level: read_committed measures lag to the last stable offset.",
)
def lag_export(
    checkpoint: str,
    kafka: object,
    group: str | None,
    force: bool,
    backup_dir: str | None,
    isolation: str,
) -> None:
    """Print the Kafka lag of the Spark checkpoint CHECKPOINT as JSON lines."""
    rows = checkpoint_lag(checkpoint, kafka, isolation=Isolation(isolation))  # type: ignore[arg-type]
    for row in rows:
        line = {
            "source": row.source_id,
            "topic": row.tp.topic,
            "partition": row.tp.partition,
            "position": row.position,
            "log_start": row.log_start,
            "log_end": row.log_end,
            "lag": row.lag,
            "records_lost": row.records_lost,
            # seconds until retention may delete records the query has not read (null: no limit)
            "runway_s": row.runway_s,
            "records_lost_upper_bound": row.upper_bound,
            "verdict": row.verdict.value,
        }
        click.echo(json.dumps(line))
    if group:
        # Clamped into the log (the group API refuses offsets outside it, as kafka-consumer-groups
        # does); where several sources read one partition, the one furthest behind speaks for it.
        positions: dict[TopicPartition, int] = {}
        for r in rows:
            if r.position is None or r.log_start is None or r.log_end is None:
                continue
            offset = clamp(r.position, OffsetRange(r.log_start, r.log_end))
            positions[r.tp] = min(offset, positions.get(r.tp, offset))
        change = set_group_offsets(
            kafka,  # type: ignore[arg-type]
            group,
            positions,
            execute=True,
            force=force,
            backup_dir=backup_dir,
            written_by="lag_export",
        )
        if change.backup:
            click.echo(f"% the group's previous offsets are saved in {change.backup}", err=True)
        click.echo(f"% committed {len(positions)} positions to group {group}", err=True)


if __name__ == "__main__":
    run_job(lag_export, prog_name="lag_export.py")
