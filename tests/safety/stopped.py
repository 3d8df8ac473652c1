"""A checkpoint built by a test is brand new: every batch file looks just written, which the write path
takes as a running query. ``stopped(root)`` ages the batch files as a query stopped an hour ago
leaves them."""

from __future__ import annotations

import os
import time
from pathlib import Path


def stopped(root: Path, seconds_ago: float = 3600.0) -> Path:
    then = time.time() - seconds_ago
    for top in ("offsets", "commits"):
        for path in (root / top).glob("*"):
            os.utime(path, (then, then))
    return root
