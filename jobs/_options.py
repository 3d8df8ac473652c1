"""What the jobs share: Kafka's connection flags, the gate's flags, and the error boundary of a job's
command line.

The jobs are scripts (``python jobs/NAME.py`` or ``spark-submit jobs/NAME.py``), so this sibling
module is importable as ``_options``. They use the library (``recovery``), never its CLI.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from recovery.core.advice import in_words
from recovery.core.model import GateMode, Policy
from recovery.errors import ExitCode, RecoveryError
from recovery.kafka.config import KafkaConfig

# The library names a bad value by its Python parameter; these jobs' options are the CLI's flags
# (recovery.cli.flags, which a job does not import: it would load the CLI).
JOB_FLAGS = {"bootstrap_servers": "--bootstrap-server", "overrides": "-X"}
# The library's advice names functions (`plan_repair('/chk', kafka)`); an operator reading a job's
# error runs the CLI's command for it (as recovery.cli.flags.COMMANDS says it).
JOB_COMMANDS = {
    "plan_repair": "stream-recovery repair",
    "repair_ledger": "stream-recovery ledger repair",
}


def kafka_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``-b/--bootstrap-server``, ``--command-config FILE``, ``-X prop=val``: the command receives
    ``kafka: KafkaConfig`` (the same flags and meanings as ``stream-recovery``)."""

    @click.option(
        "-b",
        "--bootstrap-server",
        "bootstrap_server",
        required=True,
        envvar="KAFKA_BOOTSTRAP_SERVERS",
        metavar="HOST:PORT[,...]",
        help="Kafka brokers (env KAFKA_BOOTSTRAP_SERVERS).",
    )
    @click.option(
        "--command-config",
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="Kafka-style properties file of client settings (SASL/SSL).",
    )
    @click.option(
        "-X",
        "kafka_property",
        multiple=True,
        metavar="PROP=VAL",
        help="Set a client property (librdkafka name); repeatable; wins over the file.",
    )
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        bootstrap_server: str,
        command_config: str | None,
        kafka_property: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        kafka = KafkaConfig.from_options(
            bootstrap_server, command_config=command_config, overrides=kafka_property
        )
        return func(*args, kafka=kafka, **kwargs)

    return wrapper


def gate_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--gate fail|clamp|warn`` and ``--max-loss-records N``, one meaning in every gated job: the
    command receives ``gate: GateMode`` and ``policy: Policy``. ``clamp`` without a budget is a usage
    error (exit 2): a repair that may lose records needs the most it may lose."""

    @click.option(
        "--gate",
        type=click.Choice([mode.value for mode in GateMode]),
        default=GateMode.FAIL.value,
        show_default=True,
        help="When the job's offsets would not start cleanly: fail (exit 1), repair within "
        "--max-loss-records (clamp), or warn and start.",
    )
    @click.option(
        "--max-loss-records",
        type=click.IntRange(min=0),
        metavar="N",
        help="clamp (required with it): refuse a repair that loses more records.",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, gate: str, max_loss_records: int | None, **kwargs: Any) -> Any:
        mode = GateMode(gate)
        if mode is GateMode.CLAMP and max_loss_records is None:
            raise click.UsageError("--gate clamp needs --max-loss-records: the most records it may give up")
        return func(*args, gate=mode, policy=Policy(max_loss_records=max_loss_records), **kwargs)

    return wrapper


def run_job(command: click.Command, prog_name: str) -> None:
    """Run a job's command: a RecoveryError becomes ``Error: <message>`` on stderr and its exit code
    (2 bad input, 1 refused or action needed, 3 unreachable); usage errors exit 2. The library's
    warnings (the gate's report, a clamp repair) go to stderr through logging."""
    logging.basicConfig(
        level=logging.WARNING, format="stream-recovery %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        code = command.main(prog_name=prog_name, standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.INVALID_INPUT)
    except click.exceptions.Abort:
        sys.exit(ExitCode.ACTION_NEEDED)
    except RecoveryError as exc:
        click.echo(f"Error: {in_words(exc.worded(JOB_FLAGS), JOB_FLAGS, JOB_COMMANDS)}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
