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
import functools
import io
import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain, repeat
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
        "partitions",
        "min_offset",
        "max_offset",
        "min_initial",
        "max_initial",
    }
)


def show(value: Any) -> str:
    """A table cell: empty for None."""
    return "" if value is None else str(value)


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> list[str]:
    """The plain table: a header of ``columns`` (key, HEADER) and one line per row, two spaces apart.

    Built column by column (each width computed once, cells padded by C loops), so 100,000 rows
    cost a fraction of a second."""
    padded = []
    for key, header in columns:
        cells = [header, *map(show, [row.get(key) for row in rows])]
        width = max(map(len, cells))
        pad = str.rjust if key in NUMERIC else str.ljust
        padded.append(list(map(pad, cells, repeat(width, len(cells)))))
    return list(map(str.rstrip, map("  ".join, zip(*padded, strict=True))))


def emit(rows: Sequence[Mapping[str, Any]], fmt: str, columns: Sequence[tuple[str, str]]) -> None:
    """Print ``rows`` on stdout as ``fmt`` (table|json|csv); ``columns`` pick the table's columns."""
    if fmt == "json":
        emit_json(list(rows))
    elif fmt == "csv":
        buffer = io.StringIO()
        keys = list(rows[0]) if rows else [key for key, _ in columns]
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(keys)
        # Column by column, as table_lines: the cells are made by C loops, not a dict per row.
        writer.writerows(zip(*(map(show, [row.get(key) for row in rows]) for key in keys), strict=True))
        click.echo(buffer.getvalue(), nl=False)
    else:
        click.echo("\n".join(table_lines(rows, columns)))  # one write, not one per line


def emit_json(body: Any) -> None:
    click.echo(json_text(body))


_SCALARS = frozenset({str, int, float, bool, type(None)})  # exact types: subclasses take the slow path
_SCALARS_OR_CONTAINERS = _SCALARS | {list, dict}


def json_text(body: Any) -> str:
    """``json.dumps(body, indent=2)``, the same text, fast for long lists of flat objects.

    Python 3.11's C encoder is used only without ``indent``, and the pure-Python one takes seconds
    on 100,000 rows. Here a flat object or list (scalars only), or a list of flat objects, is one
    C-encoder call whose item separator carries the line break and indentation (JSON strings hold
    no raw line break, so the separators can be found again); everything else recurses."""
    out: list[str] = []
    _json_into(out, body, 0)
    return "".join(out)


def _flat(values: Iterable[Any]) -> bool:
    """Scalars, and empty lists or objects (``[]`` and ``{}`` under indent too: no line break)."""
    values = list(values)
    types = set(map(type, values))
    if types <= _SCALARS:
        return True
    return types <= _SCALARS_OR_CONTAINERS and not any(v for v in values if type(v) in (list, dict))


def _rows(items: Sequence[Any]) -> bool:
    """Non-empty dicts with string keys (checked by C loops)."""
    return (
        set(map(type, items)) == {dict} and all(items) and set(map(type, chain.from_iterable(items))) == {str}
    )


def _flat_rows(items: Sequence[Any]) -> bool:
    """:func:`_rows` whose values are all flat (checked by C loops, mostly)."""
    return _rows(items) and _flat(chain.from_iterable(map(dict.values, items)))


@functools.cache
def _encoder(level: int) -> json.JSONEncoder:
    return json.JSONEncoder(separators=(",\n" + "  " * level, ": "))


def _flat_rows_text(rows: Sequence[dict[str, Any]], level: int) -> str:
    """Flat rows (:func:`_flat_rows`) as members of a list at ``level``: one encoder call with
    every separator ",\n" + 2 levels, then the row boundaries "}<sep>{" re-indented one level up,
    with the braces on their own lines (JSON strings hold no raw line break: the boundaries are
    unique)."""
    inner, deeper = "\n" + "  " * (level + 1), "\n" + "  " * (level + 2)
    body = _encoder(level + 2).encode(list(rows))[2:-2]
    body = body.replace("}," + deeper + "{", inner + "}," + inner + "{" + deeper)
    return "{" + deeper + body + inner + "}"


def _rows_text(rows: Sequence[dict[str, Any]], level: int) -> str | None:
    """Rows (:func:`_rows`) as :func:`_flat_rows_text` writes them. A member that is not flat
    (validate's list of notes) goes into that one call as a placeholder string ``"\x00<n>"``,
    which its own text (:func:`_json_into` at its depth) then replaces. None when the rows' own
    strings hold something that reads as a placeholder: the caller takes the slow path."""
    if _flat_rows(rows):
        return _flat_rows_text(rows, level)
    nested: list[Any] = []
    swapped: list[dict[str, Any]] = []
    for row in rows:
        # Not flat: anything but a scalar, an empty list or an empty dict (scalars may be falsy).
        deep = [key for key, item in row.items() if item and type(item) not in _SCALARS]
        if deep:
            row = dict(row)
            for key in deep:
                nested.append(row[key])
                row[key] = f"\x00{len(nested) - 1}"
        swapped.append(row)
    texts = _members_text(nested, level + 2)

    def put(match: re.Match[str]) -> str:
        n = int(match[1])
        return texts[n] if n < len(texts) else match[0]

    # Every match counts: a row's own string that reads as a placeholder makes the count differ.
    body, found = _PLACEHOLDER.subn(put, _flat_rows_text(swapped, level))
    return body if found == len(texts) else None


def _members_text(values: Sequence[Any], level: int) -> list[str]:
    """Each of ``values`` as :func:`_json_into` writes it at ``level``; the lists of scalars among
    them (lists of notes) in one encoder call, split where one list ends and the next begins (the
    separator holds a line break, which no JSON string does)."""
    texts: list[str | None] = [None] * len(values)
    # Scalars only: an empty list inside would make a boundary of its own.
    flat = [i for i, v in enumerate(values) if type(v) is list and v and set(map(type, v)) <= _SCALARS]
    if flat:
        inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
        sep = ",\n" + "  " * (level + 1)
        joined = _encoder(level + 1).encode([values[i] for i in flat])[2:-2]
        for i, part in zip(flat, joined.split("]" + sep + "["), strict=True):
            texts[i] = "[" + inner + part + outer + "]"
    for i, text in enumerate(texts):
        if text is None:
            out: list[str] = []
            _json_into(out, values[i], level)
            texts[i] = "".join(out)
    return [t for t in texts if t is not None]


_PLACEHOLDER = re.compile(r'"\\u0000(\d+)"')


def _json_into(out: list[str], value: Any, level: int) -> None:
    inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
    if type(value) is dict and value and set(map(type, value)) == {str}:
        if _flat(value.values()):
            out.append("{" + inner + _encoder(level + 1).encode(value)[1:-1] + outer + "}")
            return
        # Runs of flat members are one C-encoder call each; only the others recurse.
        encoder, run, first = _encoder(level + 1), {}, True
        out.append("{")
        for key, item in value.items():
            if type(item) in _SCALARS or (type(item) in (list, dict) and not item):
                run[key] = item
                continue
            if run:
                out.append(("" if first else ",") + inner + encoder.encode(run)[1:-1])
                first, run = False, {}
            out.append(("" if first else ",") + inner + json.dumps(key) + ": ")
            first = False
            _json_into(out, item, level + 1)
        if run:
            out.append(("" if first else ",") + inner + encoder.encode(run)[1:-1])
        out.append(outer + "}")
    elif type(value) in (list, tuple) and value:
        if _flat(value):
            out.append("[" + inner + _encoder(level + 1).encode(value)[1:-1] + outer + "]")
        elif _rows(value) and (text := _rows_text(value, level)) is not None:
            out.append("[" + inner + text + outer + "]")
        else:
            # Runs of flat rows are one C-encoder call each (validate's rows with notes break runs).
            rows: list[dict[str, Any]] = []
            first = True
            out.append("[")
            for item in value:
                if type(item) is dict and item and set(map(type, item)) == {str} and _flat(item.values()):
                    rows.append(item)
                    continue
                if rows:
                    out.append(("" if first else ",") + inner + _flat_rows_text(rows, level))
                    first, rows = False, []
                out.append(("" if first else ",") + inner)
                first = False
                _json_into(out, item, level + 1)
            if rows:
                out.append(("" if first else ",") + inner + _flat_rows_text(rows, level))
            out.append(outer + "]")
    elif type(value) in _SCALARS:  # no line break in a scalar's JSON: the C encoder, no indent
        out.append(_encoder(0).encode(value))
    else:  # an empty container, another type: json.dumps itself, re-indented
        out.append(json.dumps(value, indent=2).replace("\n", outer))


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
