"""Fixtures of the fleet tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    """An empty directory for *.toml files."""
    path = tmp_path / "conf"
    path.mkdir()
    return path
