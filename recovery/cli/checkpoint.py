"""``stream-recovery checkpoint ...``: inspect a Spark checkpoint, list and restore backups.

Each command: options -> one library call (:func:`~recovery.checkpoint.inspect_checkpoint`,
:func:`~recovery.checkpoint.inspect_backups`, :func:`~recovery.checkpoint.restore_backup`) -> rows and
``%`` lines from :mod:`recovery.cli.report.checkpoint` -> the result's exit code. The JSON keys are
listed in :mod:`recovery.cli.report.checkpoint` and docs/checkpoint.md.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import click

from recovery.checkpoint import inspect_backups, inspect_checkpoint, restore_backup
from recovery.checkpoint.intent import recover_interrupted
from recovery.cli.options import execute_option, output_option, storage_option
from recovery.cli.render import emit, emit_json, note, waiting
from recovery.cli.report import checkpoint as report

backup_dir_option = click.option(
    "--backup-dir",
    default=None,
    metavar="URL",
    help="Where backup sets live (default: <checkpoint>/_recovery/backups).",
)


@click.group(name="checkpoint")
def checkpoint() -> None:
    """Read Spark Structured Streaming checkpoints; list and restore backups."""


@checkpoint.command(name="show")
@click.argument("path")
@click.option(
    "--batch", type=click.IntRange(min=0), default=None, help="Batch to show (default: the latest)."
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="One table line per partition even beyond a page (default: then one line per topic).",
)
@storage_option
@output_option()
def show_cmd(
    path: str, batch: int | None, show_all: bool, storage_options: dict[str, str], output: str
) -> None:
    """Show a checkpoint: query id, sources and their offsets, committed and uncommitted batches,
    what the next run will do, and the checksum status of each file read. Beyond a page of
    partitions the table has one line per topic (--all: per partition; --output json: every one).

    Exit 0, or 1 when Spark would refuse to restart from it; 2 when a file is malformed.

    Example: stream-recovery checkpoint show /data/chk --output json
    """
    with waiting(f"reading {path}"):
        info = inspect_checkpoint(path, batch=batch, storage_options=storage_options)
    if output == "json":
        emit_json(report.show_body(info))
    elif report.is_summarised(info, show_all=show_all):
        emit(report.summary_rows(info), "table", report.summary_columns(info))
        _notes([*report.show_notes(info), report.summary_note(info)])
    else:
        emit(report.source_rows(info), "table", report.source_columns(info))
        _notes(report.show_notes(info))
    sys.exit(info.exit_code)


@checkpoint.command(name="backups")
@click.argument("path")
@backup_dir_option
@storage_option
@output_option()
def backups_cmd(path: str, backup_dir: str | None, storage_options: dict[str, str], output: str) -> None:
    """List the backup sets taken before rewrites and restores, oldest first.

    Example: stream-recovery checkpoint backups /data/chk
    """
    with waiting(f"listing backups of {path}"):
        listing = inspect_backups(path, backup_dir=backup_dir, storage_options=storage_options)
    rows = report.backup_rows(listing)
    if output == "json":
        emit_json(rows)
    else:
        emit(report.backup_table_rows(rows), "table", report.BACKUP_COLUMNS)
        _notes(report.backup_notes(listing))
    sys.exit(listing.exit_code)


@checkpoint.command(name="restore")
@click.argument("path")
@click.option("--backup", "backup_id", default=None, metavar="ID", help="Backup set (default: the newest).")
@execute_option
@backup_dir_option
@click.option("--force", is_flag=True, help="Write even if the checkpoint looks in use by a running query.")
@click.option(
    "--active-within",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Without a heartbeat, a checkpoint whose newest batch file is younger than this looks in use.",
)
@storage_option
@output_option()
def restore_cmd(
    path: str,
    backup_id: str | None,
    dry_run: bool,
    backup_dir: str | None,
    force: bool,
    active_within: float,
    storage_options: dict[str, str],
    output: str,
) -> None:
    """Put a backup set back byte for byte, each file atomically; the current files are backed up
    first. Dry run unless --execute.

    Refused (exit 1, nothing written) while a query runs on the checkpoint: its heartbeat says so,
    or without one its newest batch file is younger than --active-within; --force overrides.

    Exit 0 restored (or nothing to change), 1 changes pending in a dry run, no backups or refused,
    2 no checkpoint at PATH or no such backup.

    Example: stream-recovery checkpoint restore /data/chk --backup 20260101T000000000000Z --execute
    """
    with waiting(f"restoring {path}" if not dry_run else f"reading backups of {path}"):
        result = restore_backup(
            path,
            backup_id,
            execute=not dry_run,
            storage_options=storage_options,
            backup_dir=backup_dir,
            force=force,
            active_within_s=active_within,
        )
    if output == "json":
        emit_json(report.restore_body(result))
    else:
        emit(report.restore_rows(result), "table", report.RESTORE_COLUMNS)
    _notes(report.restore_notes(result))
    sys.exit(result.exit_code)


@checkpoint.command(name="recover")
@click.argument("path")
@click.option(
    "--take-over",
    is_flag=True,
    help="The interrupted command ran on another host and you made sure it is no longer running.",
)
@execute_option
@storage_option
def recover_cmd(path: str, take_over: bool, dry_run: bool, storage_options: dict[str, str]) -> None:
    """Roll back a repair or restore that was interrupted (killed, machine lost) from the backup set
    its intent record in <checkpoint>/_recovery names. Any writing command does this first by itself
    when the interrupted process ran on this host; this command is for looking, and for a process
    on another host (--take-over). Dry run unless --execute.

    Exit 0 rolled back or nothing to do, 1 a rollback pending (dry run) or the holder still runs,
    2 no checkpoint at PATH.

    Example: stream-recovery checkpoint recover /data/chk --take-over --execute
    """
    with waiting(f"recovering {path}" if not dry_run else f"reading {path}"):
        result = recover_interrupted(path, storage_options, take_over=take_over, execute=not dry_run)
    _notes(report.recover_notes(result))
    sys.exit(result.exit_code)


def _notes(lines: Iterable[str]) -> None:
    for line in lines:
        note(line)
