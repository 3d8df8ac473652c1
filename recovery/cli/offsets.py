"""``stream-recovery offsets``: per-partition offset ranges, like kafka-get-offsets."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Add this module's commands to the top-level group."""
