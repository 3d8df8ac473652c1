"""The ``stream-recovery`` command line: a thin layer over the library.

Only :func:`run` turns a :class:`~recovery.errors.RecoveryError` into ``Error: <message>`` on stderr
(naming the flag where the library names a parameter: :mod:`recovery.cli.flags`) and its exit code;
any other exception is a bug and keeps its traceback. Commands are loaded lazily:
``stream-recovery --help`` imports no command module, and ``stream-recovery offsets`` imports only
``recovery.cli.offsets`` (and what it needs), so every command starts fast.
"""

from __future__ import annotations

import gc
import logging
import sys
from importlib import import_module

import click

from recovery import __version__
from recovery.cli.flags import in_cli_words, in_flag_words
from recovery.errors import ExitCode, RecoveryError, mask_credentials

# name -> (module, attribute, the one-line help shown by ``--help``; a test keeps it equal to the
# command's own).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "checkpoint": (
        "recovery.cli.checkpoint",
        "checkpoint",
        "Read Spark Structured Streaming checkpoints; list and restore backups.",
    ),
    "conf": (
        "recovery.cli.fleet",
        "conf_group",
        "Kafka clusters and streaming jobs described in TOML files (docs/fleet.md).",
    ),
    "delta-source": (
        "recovery.cli.delta",
        "delta_source",
        "Validate and repair the offsets of Delta tables read as streaming sources.",
    ),
    "fleet": (
        "recovery.cli.fleet",
        "fleet_group",
        "Check many streaming jobs at once, as configured in TOML files (docs/fleet.md).",
    ),
    "group": (
        "recovery.cli.groups",
        "group",
        "Consumer-group offsets: show them, set them (inactive groups only), spot expired ones.",
    ),
    "ledger": (
        "recovery.cli.ledger",
        "ledger",
        "Show, validate and repair Kafka offsets kept in a Delta ledger table.",
    ),
    "offsets": (
        "recovery.cli.offsets",
        "offsets_cmd",
        "One line per partition: log start offset, high watermark, last stable offset, and the "
        "offset --time maps to (with the timestamp of that record).",
    ),
    "read-to-end": (
        "recovery.cli.read",
        "read_to_end_cmd",
        "Read each partition from --from up to its end when the command started (the high watermark, "
        "or the last stable offset under read_committed), as Kafka Connect's readToLogEnd does; then "
        "print per partition the records read and their time span.",
    ),
    "repair": (
        "recovery.cli.repair",
        "repair_cmd",
        "Plan (and with --execute, apply) new Kafka offsets for CHECKPOINT.",
    ),
    "retention": (
        "recovery.cli.retention",
        "retention",
        "Hold a topic's retention while a query is down (keep what it has not read), and put it back "
        "once the query has caught up.",
    ),
    "starting-offsets": (
        "recovery.cli.repair",
        "starting_offsets_cmd",
        "Print a complete Spark startingOffsets JSON (every partition listed) for a NEW checkpoint.",
    ),
    "validate": (
        "recovery.cli.repair",
        "validate_cmd",
        "Say what Spark will do when the query restarts from CHECKPOINT, per Kafka partition.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when run (Click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, _ = entry
        command = getattr(import_module(module), attribute)
        assert isinstance(command, click.Command), f"{module}.{attribute} is not a command"
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing uses the stored one-line helps, so --help imports no command module.
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit))
            for name in sorted(COMMANDS)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stream-recovery")
def cli() -> None:
    """Inspect, validate and repair the Kafka offsets of Spark Structured Streaming jobs.

    Exit codes: 0 ok; 1 action needed or refused; 2 bad invocation or malformed input
    (nothing written); 3 Kafka or storage unreachable.
    """


class _WarningLines(logging.Handler):
    """The library speaks through logging; a command shows its warnings (a killed command rolled
    back first, say) as ``% warning:`` lines on stderr, like its own."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"% warning: {in_cli_words(record.getMessage())}", err=True)


def _show_library_warnings() -> None:
    root = logging.getLogger("recovery")
    if not any(isinstance(h, _WarningLines) for h in root.handlers):
        root.addHandler(_WarningLines(logging.WARNING))


def run(command: click.Command, argv: list[str] | None = None, prog_name: str = "stream-recovery") -> None:
    """Run a Click command behind the error boundary: a RecoveryError becomes ``Error: <message>``
    on stderr, in flag words, and its exit code; Click's usage errors exit 2."""
    _show_library_warnings()
    try:
        # standalone_mode=False hands us Click's errors, and returns the code of --help/--version.
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(ExitCode.ACTION_NEEDED)
    except click.ClickException as exc:
        # A flag's value may be a URL with user:password@; click types message Final, yet it is a plain
        # attribute that show() reads.
        exc.message = mask_credentials(exc.message)  # type: ignore[misc]
        exc.show()
        sys.exit(ExitCode.INVALID_INPUT)
    except RecoveryError as exc:
        click.echo(f"Error: {in_flag_words(exc)}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``stream-recovery`` and ``python -m recovery``)."""
    # While a command runs, the cyclic collector is off. A command is one short-lived process that
    # builds large, long-lived views of a checkpoint and a cluster, and its objects form no cycles
    # worth collecting before exit (refcounting frees the rest). Collecting every 200,000
    # allocations (mypy's setting) still cost 0.6-1.0 s of a 100,000-partition repair plan: 32
    # passes over the young objects; off, the plan used 0.75 s less CPU at the same peak memory.
    # It is switched back on afterwards: the library never leaves it changed for its callers.
    collecting = gc.isenabled()
    gc.disable()
    try:
        run(cli, argv)
    finally:
        if collecting:
            gc.enable()
