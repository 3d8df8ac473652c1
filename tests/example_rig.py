"""``conf/examples/rig.py`` as a module, for the tests that write the examples' checkpoints (the
rig's own set-up and checkpoint writer). Imported as ``from example_rig import RIG``: pytest puts
``tests/`` on the path for its conftest."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def example_rig() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "conf/examples/rig.py"
    spec = importlib.util.spec_from_file_location("example_rig_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RIG = example_rig()
