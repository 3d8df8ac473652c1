"""``stream-recovery checkpoint ...``: inspect a Spark checkpoint, list and restore backups."""

from __future__ import annotations

import click


@click.group(name="checkpoint")
def checkpoint() -> None:
    """Read Spark Structured Streaming checkpoints; list and restore backups."""


def register(cli: click.Group) -> None:
    cli.add_command(checkpoint)
