"""Options shared by several commands, as decorators (sqlite-utils style)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


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
