"""The ``stream-recovery`` command line: a thin layer over the library.

Only :func:`main` turns a :class:`~recovery.errors.RecoveryError` into ``Error: <message>`` on stderr
and its exit code; any other exception is a bug and keeps its traceback. Nothing here imports
pyspark, pyarrow or deltalake at start-up, so ``--help`` stays fast.
"""

from __future__ import annotations

import sys

import click

from recovery import __version__
from recovery.errors import ExitCode, RecoveryError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stream-recovery")
def cli() -> None:
    """Inspect, validate and repair the Kafka offsets of Spark Structured Streaming jobs.

    Exit codes: 0 ok; 1 action needed or refused; 2 bad invocation or malformed input
    (nothing written); 3 Kafka or storage unreachable.
    """


def _register() -> None:
    # Each command module adds its own commands; the modules import nothing heavy at load time.
    from recovery.cli import checkpoint, delta, ledger, offsets, repair

    for module in (checkpoint, offsets, repair, delta, ledger):
        module.register(cli)


_register()


def run(command: click.Command, argv: list[str] | None = None, prog_name: str = "stream-recovery") -> None:
    """Run a Click command behind the error boundary: a RecoveryError becomes ``Error: <message>``
    on stderr and its exit code; Click's usage errors exit 2. Jobs in ``jobs/`` use it too."""
    try:
        # standalone_mode=False hands us Click's errors, and returns the code of --help/--version.
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(ExitCode.ACTION_NEEDED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.INVALID_INPUT)
    except RecoveryError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``stream-recovery`` and ``python -m recovery``)."""
    run(cli, argv)
