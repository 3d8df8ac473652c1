"""Options shared by several commands, as decorators (sqlite-utils style)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def stack(func: F, decorators: list[Callable[[Any], Any]]) -> F:
    """Apply ``decorators`` to ``func`` as if written as ``@`` lines in this order (first = outermost),
    so a group of options can be one decorator."""
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def output_option(*formats: str, default: str = "table") -> Callable[[F], F]:
    """``--output table|json[|csv]``: how results are printed on stdout (table by default)."""
    choices = formats or ("table", "json")
    return click.option(
        "--output",
        "output",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        help="How to print the result on stdout.",
    )


def kafka_options(func: F) -> F:
    """``-b/--bootstrap-server``, ``--command-config FILE``, ``-X prop=val``, ``--timeout``.

    The command receives one ``kafka: KafkaConfig`` argument instead of the four options.
    """

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        bootstrap_server: str,
        command_config: str | None,
        kafka_property: tuple[str, ...],
        kafka_timeout: float,
        **kwargs: Any,
    ) -> Any:
        # Imported here: recovery.kafka is light, but commands that never talk to Kafka don't pay for it.
        from recovery.kafka.config import KafkaConfig

        kafka = KafkaConfig.from_options(
            bootstrap_server,
            command_config=command_config,
            overrides=kafka_property,
            timeout_s=kafka_timeout,
        )
        return func(*args, kafka=kafka, **kwargs)

    decorators = [
        click.option(
            "-b",
            "--bootstrap-server",
            "bootstrap_server",
            required=True,
            envvar="KAFKA_BOOTSTRAP_SERVERS",
            metavar="HOST:PORT[,...]",
            help="Kafka brokers to connect to (env KAFKA_BOOTSTRAP_SERVERS).",
        ),
        click.option(
            "--command-config",
            "command_config",
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="Kafka-style properties file of client settings (SASL/SSL), as for kafka-get-offsets.",
        ),
        click.option(
            "-X",
            "kafka_property",
            multiple=True,
            metavar="PROP=VAL",
            help="Set a client property (librdkafka name), as kcat -X; repeatable; wins over the file.",
        ),
        click.option(
            "--timeout",
            "kafka_timeout",
            type=click.FloatRange(min=0.1),
            default=30.0,
            show_default=True,
            metavar="SECONDS",
            help="Give up (exit 3) when Kafka has not answered within this time, retries included.",
        ),
    ]
    return stack(wrapper, decorators)  # type: ignore[return-value]


def isolation_option(help: str) -> Callable[[F], F]:
    """``--isolation read_uncommitted|read_committed`` (the Kafka consumer's ``isolation.level``)."""
    return click.option(
        "--isolation",
        type=click.Choice(["read_uncommitted", "read_committed"]),
        default="read_uncommitted",
        show_default=True,
        help=help,
    )


def parse_storage_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--storage-option KEY=VALUE`` items as fsspec storage options."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--storage-option")
        out[key] = value
    return out


storage_option = click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable).",
)


def checkpoint_write_options(func: F) -> F:
    """``--force``, ``--active-within SECONDS``, ``--backup-dir URL``: how a command that rewrites a
    checkpoint guards it (``repair``, ``delta-source repair``)."""
    decorators = [
        click.option(
            "--force", is_flag=True, help="Write even if the checkpoint looks in use by a running query."
        ),
        click.option(
            "--active-within",
            type=click.FloatRange(min=0),
            default=300.0,
            show_default=True,
            metavar="SECONDS",
            help="A checkpoint whose newest batch file is younger than this looks in use.",
        ),
        click.option(
            "--backup-dir",
            metavar="URL",
            help="Where the backup set goes (default <checkpoint>/_recovery/backups).",
        ),
    ]
    return stack(func, decorators)
