"""``stream-recovery read-to-end``: read partitions up to the end they had when the command started."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import IO, TYPE_CHECKING

import click

from recovery.cli import render
from recovery.cli.options import (
    TimeSpecType,
    exclude_internal_option,
    isolation_option,
    kafka_options,
    output_option,
    selection_from,
    topic_option,
)
from recovery.cli.report.offsets import READ_COLUMNS, read_rows, record_lines
from recovery.core.model import Isolation, TopicSelection
from recovery.core.specs import TimeSpec
from recovery.kafka.config import KafkaConfig
from recovery.kafka.read import LogReader, Progress

if TYPE_CHECKING:
    from rich.progress import Progress as ProgressBar
    from rich.progress import TaskID


@click.command(name="read-to-end")
@kafka_options
@topic_option(alias=True)
@exclude_internal_option
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
    kafka: KafkaConfig,
    topics: TopicSelection | None,
    exclude_internal_topics: bool,
    start: TimeSpec,
    isolation: Isolation,
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
    selection = selection_from(topics, exclude_internal_topics)
    with _progress(quiet) as progress:
        with render.waiting("looking up where each partition starts"):
            reader = LogReader.from_selection(
                kafka, selection, start, isolation, deadline_s=deadline, progress=progress
            )
        if records_file is None:
            result = reader.run()  # the summary alone: nothing is kept per record
        else:
            write = records_file.write
            for chunks in reader.chunks():
                write("".join(map(record_lines, chunks)))
            records_file.flush()
            result = reader.result()
    rows = read_rows(result.reads, output)
    if records_file is sys.stdout:  # the records own stdout: the summary goes to stderr
        with redirect_stdout(sys.stderr):
            render.emit(rows, output, READ_COLUMNS)
    else:
        render.emit(rows, output, READ_COLUMNS)
    sys.exit(result.exit_code)


class _Bar:
    """A transient rich progress bar on stderr, started on the first report (so it does not overlap
    the waiting line of the offset lookup)."""

    def __init__(self) -> None:
        self._shown: tuple[ProgressBar, TaskID] | None = None  # the bar and its task, once started

    def update(self, covered: int, total: int) -> None:
        if self._shown is None:
            from rich.console import Console
            from rich.progress import Progress as ProgressBar

            bar = ProgressBar(console=Console(stderr=True), transient=True)
            bar.start()
            self._shown = (bar, bar.add_task("reading to the end", total=None))
        bar, task = self._shown
        bar.update(task, completed=covered, total=max(total, 1))

    def stop(self) -> None:
        if self._shown is not None:
            self._shown[0].stop()


@contextmanager
def _progress(quiet: bool) -> Iterator[Progress | None]:
    """The progress callback for the reader: a bar on a terminal (not with -q), else None."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar = _Bar()
    try:
        yield bar.update
    finally:
        bar.stop()
