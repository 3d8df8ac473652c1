"""The documentation site builds with ``mkdocs build --strict`` (any warning fails it: a broken link or
anchor, a page left out of the nav, a docstring mkdocstrings cannot read), and its Python API page
documents every public name of ``recovery``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import recovery

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strict_and_documents_the_public_api(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # Material prints a notice about MkDocs 2 on every build; the variable is its documented switch.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    assert "WARNING" not in build.stderr, build.stderr

    api = (site / "api" / "index.html").read_text()
    documented = set(re.findall(r'id="(recovery\.[\w.]+)"', api))
    # `recovery.apply` is also a submodule: the page documents the function by its full path.
    missing = [
        name
        for name in recovery.__all__
        if f"recovery.{name}" not in documented and f"recovery.{name}.{name}" not in documented
    ]
    assert not missing, f"docs/api.md does not document {missing}"
