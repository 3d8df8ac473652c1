"""Waiting on the rig: poll a condition until it holds or a deadline passes. Imported as ``from
waiting import wait_until`` (pytest puts tests/ on the path for its conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(check: Callable[[], bool], what: str, seconds: float = 60.0, every_s: float = 0.2) -> None:
    """Call ``check`` every ``every_s`` until it returns true; fail the test naming ``what`` if it
    has not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds:g}s: {what}"
        time.sleep(every_s)
