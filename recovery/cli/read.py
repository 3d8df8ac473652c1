"""``stream-recovery read-to-end``: read partitions up to the end they had when the command started."""

from __future__ import annotations

import base64
import json
import sys
from typing import IO, Any

import click

from recovery.cli.options import isolation_option, kafka_options, output_option
from recovery.cli.tables import TimeSpecType, emit, iso_ms, selection_from, selection_options

_COLUMNS = (
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("start_offset", "START"),
    ("end_offset", "END"),
    ("records", "RECORDS"),
    ("min_timestamp_iso", "FIRST-TIMESTAMP"),
    ("max_timestamp_iso", "LAST-TIMESTAMP"),
    ("gaps_text", "DELETED-WHILE-READING"),
)


@click.command(name="read-to-end")
@kafka_options
@selection_options
@click.option(
    "--from",
    "start",
    type=TimeSpecType(),
    default="earliest",
    show_default=True,
    help="Where to start in each partition: earliest | latest | epoch ms | ISO-8601 (first record >= T).",
)
@isolation_option("read_committed reads up to the last stable offset and skips aborted transactions.")
@click.option(
    "--records",
    "records_file",
    type=click.File("w", lazy=False),
    metavar="FILE",
    help="Write the records as JSON lines to FILE ('-': stdout, and the summary goes to stderr).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="Fail (exit 3) if the end is not reached within this time.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@output_option("table", "json", "csv")
def read_to_end_cmd(
    kafka: Any,
    topic: str | None,
    topic_partitions: str | None,
    exclude_internal_topics: bool,
    start: Any,
    isolation: str,
    records_file: IO[str] | None,
    deadline: float,
    quiet: bool,
    output: str,
) -> None:
    """Read each partition from --from up to its end when the command started (the high watermark,
    or the last stable offset under read_committed), as Kafka Connect's readToLogEnd does; then
    print per partition the records read and their time span.

    Records deleted while they were being read (DeleteRecords, retention) are skipped: reading goes
    on at the new log start offset and the skipped offsets are reported.

    \b
    JSON (--output json) / CSV keys, one object per partition, sorted by topic and partition:
      topic, partition
      start_offset, end_offset   where reading began, and the end snapshot (exclusive)
      records                    records read (control records and aborted ones are not records)
      min_timestamp, max_timestamp   smallest and largest record timestamp, epoch ms (or null)
      skipped_offsets            offsets deleted before they could be read
      gaps                       those offsets as [start, end) pairs (CSV: "start-end;...")

    \b
    Record lines (--records FILE): {"topic", "partition", "offset", "timestamp", "key", "value",
    "headers": [[name, value], ...], "encoding"}; key/value/header values are UTF-8 text, or base64
    when "encoding" is "base64".

    \b
    Example:
      stream-recovery read-to-end -b localhost:9092 --topic orders --isolation read_committed \\
          --records orders.jsonl
    """
    from recovery.kafka.admin import Isolation, MissingPartition, NoMatch, OffsetRow, offset_table
    from recovery.kafka.read import LogReader
    from recovery.kafka.specs import TimeKind

    selection = selection_from(topic, topic_partitions, exclude_internal_topics)
    iso = Isolation(isolation)
    rows = offset_table(kafka, selection, start, isolation=iso, no_match=NoMatch.LATEST)
    starts: dict[Any, int | None] = {}
    for tp, row in rows.items():
        if isinstance(row, MissingPartition):
            starts[tp] = 0  # LogReader reports it as missing (TopicNotFound, exit 3)
        else:
            assert isinstance(row, OffsetRow)
            starts[tp] = None if start.kind is TimeKind.EARLIEST else row.lookup.offset

    records_to_stdout = records_file is not None and records_file is sys.stdout
    with _progress(quiet) as progress:
        reader = LogReader(kafka, starts, iso, deadline_s=deadline, progress=progress)
        for batch in reader.batches():
            if records_file is not None:
                records_file.write("".join(_record_line(r) for r in batch))
    if records_file is not None:
        records_file.flush()
    summary = [_summary_record(read) for read in reader.summary.values()]
    if records_to_stdout:
        with _stderr_echo():
            emit(_table_form(summary, output), output, _COLUMNS)
    else:
        emit(_table_form(summary, output), output, _COLUMNS)


def _table_form(summary: list[dict[str, Any]], output: str) -> list[dict[str, Any]]:
    if output == "table":
        return [
            {
                **row,
                "min_timestamp_iso": iso_ms(row["min_timestamp"]),
                "max_timestamp_iso": iso_ms(row["max_timestamp"]),
                "gaps_text": " ".join(f"[{a}, {b})" for a, b in row["gaps"]),
            }
            for row in summary
        ]
    if output == "csv":
        return [{**row, "gaps": ";".join(f"{a}-{b}" for a, b in row["gaps"])} for row in summary]
    return summary


def _summary_record(read: Any) -> dict[str, Any]:
    return {
        "topic": read.tp.topic,
        "partition": read.tp.partition,
        "start_offset": read.start,
        "end_offset": read.end,
        "records": read.records,
        "min_timestamp": read.min_timestamp_ms,
        "max_timestamp": read.max_timestamp_ms,
        "skipped_offsets": read.skipped_offsets,
        "gaps": [[gap.start, gap.end] for gap in read.gaps],
    }


def _record_line(record: Any) -> str:
    parts = [record.key, record.value, *(v for _, v in record.headers)]
    try:
        for part in parts:
            if part is not None:
                part.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        encoding = "base64"

    def text(raw: bytes | None) -> str | None:
        if raw is None:
            return None
        return raw.decode("utf-8") if encoding == "utf-8" else base64.b64encode(raw).decode("ascii")

    line = {
        "topic": record.tp.topic,
        "partition": record.tp.partition,
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "key": text(record.key),
        "value": text(record.value),
        "headers": [[name, text(value)] for name, value in record.headers],
        "encoding": encoding,
    }
    return json.dumps(line, ensure_ascii=False) + "\n"


class _stderr_echo:
    """Send click.echo's stdout output to stderr (the records own stdout)."""

    def __enter__(self) -> None:
        self._saved = sys.stdout
        sys.stdout = sys.stderr

    def __exit__(self, *exc: object) -> None:
        sys.stdout = self._saved


class _progress:
    """A transient progress bar on stderr, on a terminal only (and not with -q)."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress

        self._bar = Progress(console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task("reading to the end", total=None)
        return self.update

    def update(self, covered: int, total: int) -> None:
        self._bar.update(self._task, completed=covered, total=max(total, 1))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def register(cli: click.Group) -> None:
    cli.add_command(read_to_end_cmd)
