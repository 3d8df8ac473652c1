"""One voice for every command: results on stdout, everything else on stderr.

* results: :func:`emit` prints rows (dicts with the documented JSON keys) as an aligned plain table
  with an upper-case header, as JSON, or as CSV, so the three outputs cannot disagree;
  :func:`emit_json` prints one JSON document;
* messages: :func:`note` prints ``% text`` on stderr (kcat's ``%`` lines), :func:`warn` ``% warning:
  text``; errors are printed only by ``recovery.cli.run`` (``Error: text``);
* words: everything printed says the library's advice (Python in backquotes) as the CLI's flags and
  command lines (:func:`recovery.cli.flags.in_cli_words`);
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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import repeat

import click

from recovery.cli.flags import in_cli_words

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


def show(value: object) -> str:
    """A table cell: empty for None."""
    text = "" if value is None else str(value)
    return _cell_in_cli_words(text) if "`" in text else text


@functools.lru_cache(maxsize=1024)
def _cell_in_cli_words(text: str) -> str:
    return in_cli_words(text)  # cached: a CSV of 100,000 rows repeats one note in each


def table_lines(rows: Sequence[Mapping[str, object]], columns: Sequence[tuple[str, str]]) -> list[str]:
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


def emit(rows: Sequence[Mapping[str, object]], fmt: str, columns: Sequence[tuple[str, str]]) -> None:
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


def emit_json(body: object) -> None:
    text = _in_cli_words_json(json_bytes(body))
    # Bytes go to a binary stdout as they are (not decoded and encoded again: 160 MB for a plan
    # of 100,000 partitions); a text-only stdout (io.StringIO, a notebook) gets the text.
    click.echo(text if getattr(sys.stdout, "buffer", None) is not None else text.decode("ascii"))


def json_text(body: object) -> str:
    """``json.dumps(body, indent=2)``: the same text (floats aside: see :func:`json_bytes`)."""
    return json_bytes(body).decode("ascii")


def json_bytes(body: object) -> bytes:
    """``json.dumps(body, indent=2)`` as ASCII bytes, written by orjson: Python 3.11's C encoder
    is used only without ``indent``, and the pure-Python one takes seconds on 100,000 rows (a
    repair plan of 100,000 partitions: 3.1 s against 0.2 s). The text is the same: keys and
    strings as ``json.dumps`` escapes them (``ensure_ascii``), non-string keys turned into strings;
    a float in its shortest form, which may differ in spelling (``1e-5``, not ``1e-05``), not in
    value, but NaN and infinities as ``null`` (``json.dumps`` writes ``NaN``, which is not JSON; no
    body holds one). orjson also writes what ``json.dumps`` refuses (dates, UUIDs, dataclasses);
    what orjson refuses (an integer beyond 64 bits, a lone surrogate, a named tuple) is left to
    ``json.dumps``."""
    import orjson

    try:
        text = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(body, indent=2).encode("ascii")
    if text.isascii() and b"\x7f" not in text:
        return text
    # Only inside strings (JSON's syntax is ASCII): escaped as json.dumps escapes them.
    return _NOT_ASCII.sub(_escaped, text.decode("utf-8")).encode("ascii")


# DEL and beyond, as a negated class: the range "[\x7f-\U0010ffff]" takes ~6 ms to compile, at
# the start of every command that writes JSON.
_NOT_ASCII = re.compile("[^\x00-\x7e]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as json.dumps writes it
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def _in_cli_words_json(text: bytes) -> bytes:
    """The JSON ``text`` with the advice in its strings in the CLI's words (a plan's notes). On the
    text, not the body: the strings holding a backquote are found by ``find`` (0.1 s for a plan of
    100,000 partitions whose every row holds a note; a walk of the body, or a regular expression
    over the text, took seconds), and each distinct one is translated once."""
    if b"`" not in text:
        return text
    source = text.decode("ascii")
    pieces: list[str] = []
    done = 0
    at = source.find("`")
    while at != -1:
        start = _quote_before(source, at)
        end = _quote_after(source, at)
        pieces += [source[done:start], _json_string_in_cli_words(source[start : end + 1])]
        done = end + 1
        at = source.find("`", done)
    pieces.append(source[done:])
    return "".join(pieces).encode("ascii")


def _quote_before(source: str, at: int) -> int:
    """The opening quote of the JSON string holding ``at`` (one no backslash escapes)."""
    start = source.rfind('"', 0, at)
    while _escaped_at(source, start):
        start = source.rfind('"', 0, start)
    return start


def _quote_after(source: str, at: int) -> int:
    end = source.find('"', at)
    while _escaped_at(source, end):
        end = source.find('"', end + 1)
    return end


def _escaped_at(source: str, quote: int) -> bool:
    """Whether the quote at ``quote`` is escaped: an odd number of backslashes before it."""
    backslashes = 0
    while source[quote - 1 - backslashes] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


@functools.lru_cache(maxsize=1024)
def _json_string_in_cli_words(text: str) -> str:
    # Cached: a plan of 100,000 partitions repeats one note 100,000 times.
    return json.dumps(in_cli_words(json.loads(text)))


def note(message: str) -> None:
    """``% message`` on stderr: context, advice and outcomes that are not the result itself."""
    click.echo(f"% {in_cli_words(message)}", err=True)


def warn(message: str) -> None:
    click.echo(f"% warning: {in_cli_words(message)}", err=True)


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
