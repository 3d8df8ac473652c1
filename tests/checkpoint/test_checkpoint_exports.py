"""``recovery.checkpoint`` exports exactly its public names, sorted, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import recovery.checkpoint


def test_all_is_sorted_and_importable() -> None:
    names = recovery.checkpoint.__all__
    assert names == sorted(names)
    assert dir(recovery.checkpoint) == names
    for name in names:
        value = getattr(recovery.checkpoint, name)
        assert value.__module__ == recovery.checkpoint._EXPORTS[name], name


def test_importing_a_pure_module_does_not_load_the_store() -> None:
    """``recovery.checkpoint.format`` runs the package's ``__init__``, which must not import fsspec."""
    code = (
        "import sys; import recovery.checkpoint.format, recovery.core.restart, "
        "recovery.checkpoint.crc; "
        "print(sorted(m for m in ('fsspec', 'recovery.checkpoint.store') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
