"""``recovery`` exports exactly its public API, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import recovery


def test_every_exported_name_resolves() -> None:
    for name in recovery.__all__:
        assert getattr(recovery, name) is not None, name


def test_all_is_sorted_and_importing_the_package_loads_no_io_library() -> None:
    assert recovery.__all__ == sorted(recovery.__all__)
    heavy = ("confluent_kafka", "fsspec", "pyspark")
    code = f"import sys, recovery; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
