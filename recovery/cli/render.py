"""One voice for every command: results on stdout, everything else on stderr.

* results: :func:`emit` prints rows (dicts with the documented JSON keys) as an aligned plain table
  with an upper-case header, as JSON, or as CSV, so the three outputs cannot disagree;
  :func:`emit_json` prints one JSON document;
* messages: :func:`note` prints ``% text`` on stderr (kcat's ``%`` lines), :func:`warn` ``% warning:
  text``; errors are printed only by ``recovery.cli.run`` (``Error: text``);
* waits: :func:`waiting` shows a transient spinner on stderr while the library works, after one
  second and only when stderr is a terminal, so scripts and pipes see nothing extra.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import click

# Keys whose cells are right-aligned in tables (numbers), whatever the command.
NUMERIC = frozenset(
    {
        "partition",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "offset",
        "committed_offset",
        "lag",
        "records",
        "start_offset",
        "end_offset",
        "skipped_offsets",
        "checkpoint_offset",
        "log_end_offset",
        "ledger_offset",
        "versions_lost",
        "files_missing",
        "batch_end",
        "records_lost",
        "silently_skipped",
        "old",
        "new",
        "lost",
        "skipped",
        "replayed",
        "batch",
        "batch_id",
        "version",
        "files",
        "size",
    }
)


def show(value: Any) -> str:
    """A table cell: empty for None."""
    return "" if value is None else str(value)


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> list[str]:
    """The plain table: a header of ``columns`` (key, HEADER) and one line per row, two spaces apart."""
    cells = [[header for _, header in columns]]
    cells += [[show(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return [
        "  ".join(
            cell.rjust(width) if key in NUMERIC else cell.ljust(width)
            for cell, width, (key, _) in zip(line, widths, columns, strict=True)
        ).rstrip()
        for line in cells
    ]


def emit(rows: Sequence[Mapping[str, Any]], fmt: str, columns: Sequence[tuple[str, str]]) -> None:
    """Print ``rows`` on stdout as ``fmt`` (table|json|csv); ``columns`` pick the table's columns."""
    if fmt == "json":
        emit_json(list(rows))
    elif fmt == "csv":
        buffer = io.StringIO()
        keys = list(rows[0]) if rows else [key for key, _ in columns]
        writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: show(v) for k, v in row.items()})
        click.echo(buffer.getvalue(), nl=False)
    else:
        for line in table_lines(rows, columns):
            click.echo(line)


def emit_json(body: Any) -> None:
    click.echo(json.dumps(body, indent=2))


def note(message: str) -> None:
    """``% message`` on stderr: context, advice and outcomes that are not the result itself."""
    click.echo(f"% {message}", err=True)


def warn(message: str) -> None:
    click.echo(f"% warning: {message}", err=True)


@contextmanager
def waiting(what: str, *, after_s: float = 1.0) -> Iterator[None]:
    """Show ``what …`` with a spinner on stderr while the block runs longer than ``after_s``, when
    stderr is a terminal; it disappears when the block ends."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    done = threading.Event()

    def spin() -> None:
        if done.wait(after_s):
            return
        with Console(stderr=True).status(what, spinner="dots"):
            done.wait()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
