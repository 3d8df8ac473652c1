"""``stream-recovery checkpoint ...``: inspect a Spark checkpoint, list and restore backups.

``show --output json`` prints one object with these keys: ``checkpoint``, ``query_id``,
``offsets`` / ``commits`` (``batches``: retained batch ids, ``latest``), ``batch`` (the batch shown),
``batch_timestamp_ms``, ``batch_watermark_ms``, ``sources`` (``source_id``, ``kind``,
``offsets``: rows of ``topic``/``partition``/``offset`` for Kafka, ``text`` otherwise,
``initial_offsets``: rows or null), ``next_run`` (``action``, ``batch_id``, ``start``, ``end``),
``issues`` (``level``, ``message``) and ``files`` (``path``, ``size``, ``crc``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from recovery.cli.options import output_option, parse_storage_options, storage_option

backup_dir_option = click.option(
    "--backup-dir",
    default=None,
    metavar="URL",
    help="Where backup sets live (default: <checkpoint>/_recovery/backups).",
)


def _stdout() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _rows(kafka: Any) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": offset}
        for tp, offset in sorted(kafka.partitions)
    ]


def _describe(location: str, batch: int | None, options: Mapping[str, str]) -> dict[str, Any]:
    from recovery.checkpoint import open_checkpoint

    chk = open_checkpoint(location, options)
    offset_ids, commit_ids = chk.offset_batch_ids, chk.commit_batch_ids
    state = chk.restart_state()
    if batch is None and offset_ids:
        batch = offset_ids[-1]
    entry = chk.offsets(batch) if batch is not None else None
    if batch is not None and batch in commit_ids:
        chk.commit(batch)  # parsed (and crc-checked) so a bad commit file is reported
    if commit_ids and commit_ids[-1] != batch:
        chk.latest_commit()
    sources = []
    for source in entry.sources if entry else ():
        initial = chk.initial_offsets(source.source_id) if source.kafka is not None else None
        sources.append(
            {
                "source_id": source.source_id,
                "kind": source.kind.value if source.kind else None,
                "offsets": _rows(source.kafka) if source.kafka is not None else None,
                "text": None if source.kafka is not None else source.text,
                "initial_offsets": _rows(initial.kafka) if initial is not None else None,
            }
        )
    meta = entry.metadata if entry else None
    return {
        "checkpoint": chk.location,
        "query_id": chk.query_id,
        "offsets": {"batches": list(offset_ids), "latest": offset_ids[-1] if offset_ids else None},
        "commits": {"batches": list(commit_ids), "latest": commit_ids[-1] if commit_ids else None},
        "batch": batch,
        "batch_timestamp_ms": meta.batch_timestamp_ms if meta else None,
        "batch_watermark_ms": meta.batch_watermark_ms if meta else None,
        "sources": sources,
        "next_run": {
            "action": state.next_run.value,
            "batch_id": state.batch_id,
            "start": state.start,
            "end": state.end,
        },
        "issues": [{"level": i.level.value, "message": i.message} for i in state.issues],
        "files": [{"path": f.path, "size": f.size, "crc": f.crc.value} for f in chk.files_read],
    }


def _span(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}..{ids[-1]} ({len(ids)} files), latest {ids[-1]}"


_NEXT = {
    "next_batch": "batch {batch_id} starts from {start}; its end is read fresh from the source",
    "rerun_batch": "batch {batch_id} runs again over [{start}, {end})",
    "first_batch": "batch 0 runs from the initial offsets ({start})",
}


def _render_show(info: dict[str, Any]) -> None:
    from rich.table import Table

    out = _stdout()
    out.print(f"checkpoint  {info['checkpoint']}")
    out.print(f"query id    {info['query_id']}")
    out.print(f"offsets     {_span(info['offsets']['batches'])}")
    out.print(f"commits     {_span(info['commits']['batches'])}")
    nxt = info["next_run"]
    text = _NEXT[nxt["action"]].format(**nxt)
    if nxt["action"] == "first_batch" and nxt["end"]:
        text += f" to {nxt['end']}"
    out.print(f"next run    {text}")
    for issue in info["issues"]:
        out.print(f"{issue['level']:<11} {issue['message']}")
    if info["batch"] is not None:
        table = Table(title=f"sources in offsets/{info['batch']}", title_justify="left")
        for column in ("source", "kind", "topic", "partition", "offset", "initial"):
            table.add_column(
                column, justify="right" if column in ("partition", "offset", "initial") else "left"
            )
        for source in info["sources"]:
            if source["offsets"] is None:
                table.add_row(source["source_id"], source["kind"] or "-", source["text"] or "-", "", "", "")
                continue
            initial = {(r["topic"], r["partition"]): r["offset"] for r in source["initial_offsets"] or ()}
            for row in source["offsets"]:
                first = initial.get((row["topic"], row["partition"]))
                table.add_row(
                    source["source_id"],
                    source["kind"],
                    row["topic"],
                    str(row["partition"]),
                    str(row["offset"]),
                    "" if first is None else str(first),
                )
        out.print(table)
    files = Table(title="files read", title_justify="left")
    files.add_column("path")
    files.add_column("bytes", justify="right")
    files.add_column("crc")
    for f in info["files"]:
        files.add_row(f["path"], str(f["size"]), f["crc"])
    out.print(files)


@click.group(name="checkpoint")
def checkpoint() -> None:
    """Read Spark Structured Streaming checkpoints; list and restore backups."""


@checkpoint.command(name="show")
@click.argument("path")
@click.option(
    "--batch", type=click.IntRange(min=0), default=None, help="Batch to show (default: the latest)."
)
@storage_option
@output_option()
def show_cmd(path: str, batch: int | None, storage_options: tuple[str, ...], output: str) -> None:
    """Show a checkpoint: query id, sources and their offsets, committed and uncommitted batches,
    what the next run will do, and the checksum status of each file read.

    Example: stream-recovery checkpoint show /data/chk --output json
    """
    info = _describe(path, batch, parse_storage_options(storage_options))
    if output == "json":
        click.echo(json.dumps(info, indent=2))
    else:
        _render_show(info)


@checkpoint.command(name="backups")
@click.argument("path")
@backup_dir_option
@storage_option
@output_option()
def backups_cmd(path: str, backup_dir: str | None, storage_options: tuple[str, ...], output: str) -> None:
    """List the backup sets taken before rewrites and restores, oldest first.

    Example: stream-recovery checkpoint backups /data/chk
    """
    from recovery.checkpoint import list_backups

    backups = list_backups(path, parse_storage_options(storage_options), backup_dir=backup_dir)
    rows = [
        {
            "id": b.id,
            "created": b.created,
            "reason": b.reason,
            "files": [f.path for f in b.files],
            "absent": list(b.absent),
            "location": b.location,
        }
        for b in backups
    ]
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no backups for {path}", err=True)
        return
    for row in rows:
        click.echo(f"{row['id']}  {row['created']}  {row['reason']}  {' '.join(row['files'])}")


@checkpoint.command(name="restore")
@click.argument("path")
@click.option("--backup", "backup_id", default=None, metavar="ID", help="Backup set (default: the newest).")
@click.option(
    "--dry-run/--execute",
    "dry_run",
    default=True,
    show_default=True,
    help="Only show what would change, or put the files back (after backing up the current ones).",
)
@backup_dir_option
@storage_option
@output_option()
def restore_cmd(
    path: str,
    backup_id: str | None,
    dry_run: bool,
    backup_dir: str | None,
    storage_options: tuple[str, ...],
    output: str,
) -> None:
    """Put a backup set back byte for byte, each file atomically; the current files are backed up
    first. Dry run unless --execute.

    Example: stream-recovery checkpoint restore /data/chk --backup 20260101T000000000000Z --execute
    """
    from recovery.checkpoint import restore_backup

    result = restore_backup(
        path,
        backup_id,
        execute=not dry_run,
        storage_options=parse_storage_options(storage_options),
        backup_dir=backup_dir,
    )
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "backup": result.backup.id,
                    "executed": result.executed,
                    "written": list(result.written),
                    "removed": list(result.removed),
                    "unchanged": list(result.unchanged),
                    "safety_backup": result.safety_backup.id if result.safety_backup else None,
                },
                indent=2,
            )
        )
    else:
        verb = ("restored", "removed") if result.executed else ("would restore", "would remove")
        for rel in result.written:
            click.echo(f"{verb[0]} {rel}")
        for rel in result.removed:
            click.echo(f"{verb[1]} {rel}")
        for rel in result.unchanged:
            click.echo(f"unchanged {rel}")
    if result.safety_backup:
        click.echo(f"the previous files were backed up as {result.safety_backup.id}", err=True)
    elif not result.executed and (result.written or result.removed):
        click.echo("dry run: nothing was written; add --execute to restore", err=True)


def register(cli: click.Group) -> None:
    cli.add_command(checkpoint)
