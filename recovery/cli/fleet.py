"""``conf check DIR`` and ``fleet validate DIR``: clusters and jobs described in TOML files.

Each command: options -> one library call (:func:`recovery.conf.load_conf`,
:func:`recovery.fleet.validate_fleet`) -> rows and lines from :mod:`recovery.cli.report.fleet` (where
the JSON keys are documented) -> the result's exit code.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from recovery.cli import render
from recovery.cli.options import duration_option, execute_option, output_option, runway_warn_option
from recovery.cli.report import fleet as report
from recovery.errors import InvalidInput

if TYPE_CHECKING:
    from recovery.fleet import JobResult


@click.group(name="conf")
def conf_group() -> None:
    """Kafka clusters and streaming jobs described in TOML files (docs/fleet.md)."""


@conf_group.command(name="check")
@click.argument("directory", metavar="DIR")
@output_option("table", "json")
def check_cmd(directory: str, output: str) -> None:
    """Read every *.toml file of DIR (or the one file DIR) and list the clusters and jobs found.

    Secrets are never shown: values read from the environment print as $NAME. Exit 0 when the
    files are valid and every environment variable they name is set; 2 with a one-line error
    naming the file and the key otherwise.

    Example: stream-recovery conf check conf/examples
    """
    # Imported here: recovery.conf loads pydantic (its file format), which --help must not.
    from recovery.conf import load_conf

    conf = load_conf(directory)
    if output == "json":
        render.emit_json(report.conf_body(conf))
        return
    clusters = [report.cluster_row(c, table=True) for _, c in sorted(conf.clusters.items())]
    jobs = [report.conf_job_row(j, table=True) for _, j in sorted(conf.jobs.items())]
    render.emit(clusters, "table", report.CLUSTER_COLUMNS)
    click.echo()
    render.emit(jobs, "table", report.JOB_COLUMNS)
    render.note(report.conf_summary(conf))


@click.group(name="fleet")
def fleet_group() -> None:
    """Check many streaming jobs at once, as configured in TOML files (docs/fleet.md)."""


# fleet validate's and fleet serve's (recovery.fleet.DEFAULT_PARALLEL, not imported: start-up)
_PARALLEL_OPTION = click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    metavar="N",
    help="Check at most N jobs at a time (fleet serve: at most N batches of a cluster's due jobs at "
    "once, each reading at most N checkpoints at a time).",
)


@fleet_group.command(name="validate")
@click.argument("directory", metavar="DIR")
@_PARALLEL_OPTION
@click.option(
    "--job",
    "jobs",
    multiple=True,
    metavar="NAME",
    help="Check only this job (repeatable); default: every job in DIR.",
)
@runway_warn_option(
    "AT_RISK threshold for jobs whose conf sets no runway_warn: a partition whose unread records "
    "retention may delete within DURATION (PT6H, 6h, 1h30m). Default: none (RUNWAY shown anyway)."
)
@output_option("table", "json", "csv")
def validate_cmd(
    directory: str, parallel: int, jobs: tuple[str, ...], runway_warn_s: float | None, output: str
) -> None:
    """Say, for every job configured in DIR, what Spark will do when it restarts from its checkpoint.

    One row per job: the worst of its partitions' verdicts, records lost, records Spark would skip
    with failOnDataLoss=false, Spark's error on restart, and RUNWAY: the shortest time until
    retention may delete records the job has not read (AT_RISK below the job's runway_warn). A job
    whose cluster or storage does not answer is UNREACHABLE, one whose checkpoint cannot be read is
    BAD_CHECKPOINT; the others are still checked. Never writes.

    Exit code, the most urgent of the jobs': 1 if any job needs action; else 2 if any job's
    checkpoint, sink or client settings are invalid (or DIR is); else 3 if any job could not be
    checked because its cluster or storage was unreachable; else 0.

    Example: stream-recovery fleet validate conf/ --parallel 16 --output json
    """
    # Imported here: recovery.conf loads pydantic (its file format), which --help must not.
    from recovery.conf import load_conf
    from recovery.fleet import validate_fleet

    conf = load_conf(directory)
    total = len(jobs) if jobs else len(conf.jobs)
    with _progress(total) as advance:
        result = validate_fleet(
            conf, parallel=parallel, jobs=jobs or None, on_done=advance, runway_warn_s=runway_warn_s
        )
    render.emit(report.fleet_rows(result), output, report.FLEET_COLUMNS)
    if output == "table":
        for line in report.fleet_notes(result):
            render.note(line)
    else:
        render.note(report.summary_line(result))
    sys.exit(result.exit_code)


_JOB_OPTION = click.option(
    "--job",
    "jobs",
    multiple=True,
    metavar="NAME",
    help="Only this job (repeatable); default: every job in DIR.",
)


@fleet_group.command(name="hold")
@click.argument("directory", metavar="DIR")
@_JOB_OPTION
@execute_option
@output_option("table", "json")
def hold_cmd(directory: str, jobs: tuple[str, ...], dry_run: bool, output: str) -> None:
    """`retention hold` for every job in DIR that opted in with a `hold` key (its --keep).

    One row per job and topic, as `retention hold` shows them (JSON: the same keys, and job).
    Jobs run one after the other (two jobs reading one topic must not raise it at once); a job
    without `hold` is SKIPPED; one that fails is reported with why, the others go on. Dry run by
    default; --execute raises. Exit code: the most urgent of the jobs', as `fleet validate`.

    Example: stream-recovery fleet hold conf/ --execute
    """
    from recovery.conf import load_conf
    from recovery.fleet_hold import hold_fleet

    with render.waiting("holding retention" if not dry_run else "planning the holds"):
        result = hold_fleet(load_conf(directory), execute=not dry_run, jobs=jobs or None)
    render.emit(report.fleet_hold_rows(result, output), output, report.FLEET_HOLD_COLUMNS)
    for line in report.fleet_hold_notes(result):
        render.note(line)
    sys.exit(result.exit_code)


@fleet_group.command(name="release")
@click.argument("directory", metavar="DIR")
@_JOB_OPTION
@click.option(
    "--now",
    "now",
    is_flag=True,
    help="Put the values back even where a job has not read past the records its hold protects.",
)
@execute_option
@output_option("table", "json")
def release_cmd(directory: str, jobs: tuple[str, ...], now: bool, dry_run: bool, output: str) -> None:
    """`retention release` for every job in DIR (a job without a hold recorded has nothing to do).

    One row per job and held topic, as `retention release` shows them (JSON: the same keys, and
    job). Dry run by default; --execute puts the values back. Exit code: the most urgent of the
    jobs', as `fleet validate`.

    Example: stream-recovery fleet release conf/ --execute
    """
    from recovery.conf import load_conf
    from recovery.fleet_hold import release_fleet

    with render.waiting("releasing the holds" if not dry_run else "checking the holds"):
        result = release_fleet(load_conf(directory), execute=not dry_run, now=now, jobs=jobs or None)
    render.emit(report.fleet_hold_rows(result, output), output, report.FLEET_RELEASE_COLUMNS)
    for line in report.fleet_hold_notes(result):
        render.note(line)
    sys.exit(result.exit_code)


def _shard(_ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``--shard 1/3`` as (1, 3)."""
    if value is None:
        return None
    index, slash, count = value.partition("/")
    if slash and index.isdecimal() and count.isdecimal() and 0 <= int(index) < int(count):
        return int(index), int(count)
    raise click.BadParameter(f"expected I/N with 0 <= I < N (e.g. 0/3), not {value!r}", param=param)


@fleet_group.command(name="serve")
@click.argument("directory", metavar="DIR")
@click.option(
    "--metrics-port",
    "port",
    type=click.IntRange(min=0, max=65535),
    default=9465,
    show_default=True,
    metavar="PORT",
    help="HTTP port of /metrics, /v1/jobs and /healthz (0: any free port, printed at start).",
)
@click.option(
    "--bind",
    "host",
    default="127.0.0.1",
    show_default=True,
    metavar="ADDRESS",
    help="Address to listen on (0.0.0.0: every interface).",
)
@duration_option(
    "--interval",
    "interval_s",
    "Check each job this often (after its last check ended), unless the conf sets an interval for "
    "the job or its cluster.",
    default="60s",
)
@_PARALLEL_OPTION
@runway_warn_option(
    "AT_RISK threshold for jobs whose conf sets no runway_warn (PT6H, 6h, 1h30m). Default: none."
)
@click.option(
    "--apply-holds",
    "holds",
    is_flag=True,
    help='Hold retention for jobs that opted in (hold = "2d" in their conf) when their runway is '
    "shorter, and put it back once they have caught up. Default: never write.",
)
@click.option(
    "--shard",
    callback=_shard,
    metavar="I/N",
    help="Watch only shard I (0 to N-1) of N: run N replicas, each with its own I, to split the "
    "jobs between them by a stable hash of the job name. Default: every job.",
)
def serve_cmd(
    directory: str,
    port: int,
    host: str,
    interval_s: float,
    parallel: int,
    runway_warn_s: float | None,
    holds: bool,
    shard: tuple[int, int] | None,
) -> None:
    """Check every job of DIR all the time, and serve the results: Prometheus metrics on /metrics,
    the rows of `fleet validate --output json` (with the time of each check) on /v1/jobs and
    /v1/jobs/NAME, and /healthz.

    Each job is checked --interval (or its conf's `interval`, or its cluster's) after its last
    check ended. The due jobs of a cluster are checked together: one read of the cluster for all
    of them (in batches of about 5,000 partitions, at most --parallel batches and 20,000
    partitions at once); a local checkpoint is read again only once it changed. A cluster that
    does not answer is probed once
    an interval and its jobs reported UNREACHABLE meanwhile, so it never delays the others. With
    --shard I/N, only the jobs of shard I are watched (N replicas split one conf, each job once).
    Never writes (read-only Kafka and storage credentials suffice), unless --apply-holds: then,
    for each job with a `hold` key, its topics' retention is held when its runway is shorter
    (`retention hold`, needs AlterConfigs on those topics) and put back once it has caught up
    (`retention release`), each action logged, counted and shown on /v1/jobs. SIGHUP reads DIR
    again (a broken file keeps the last good conf, and says so on /healthz and in
    stream_recovery_config_last_reload_success); SIGTERM or Ctrl-C stops after the checks
    running. Metric names: docs/fleet-service.md.

    Exit 0 when stopped; 2 when DIR is invalid at start or the port cannot be bound.

    Example: stream-recovery fleet serve conf/ --metrics-port 9465 --interval 60s --shard 0/3
    """
    from recovery.cli.serve import serve
    from recovery.watch import FleetWatch

    for name in ("recovery.watch", "recovery.cli.serve"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False
    watch = FleetWatch(
        directory,
        interval_s=interval_s,
        parallel=parallel,
        runway_warn_s=runway_warn_s,
        holds=holds,
        shard=shard,
    )
    try:
        serve(watch, host, port)
    except OSError as exc:
        raise InvalidInput(
            f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})"
        ) from None


@contextmanager
def _progress(total: int) -> Iterator[Callable[[JobResult], None]]:
    """A transient progress bar on stderr, only when stderr is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("checking jobs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("jobs", total=total)
        yield lambda _result: progress.advance(task)


def register(cli: click.Group) -> None:
    cli.add_command(conf_group)
    cli.add_command(fleet_group)
