"""Griffe extensions for the API reference (docs/api.md), read by mkdocstrings (mkdocs.yml).

``recovery/__init__.py`` exports its names lazily (PEP 562: ``_EXPORTS`` maps each name to its
module, and ``__getattr__`` imports it on first use), which static analysis cannot follow. This reads
that map from the source, makes each name an alias of the object in its module and declares the
names as the package's exports, so ``::: recovery`` documents exactly ``recovery.__all__``. Once the package
imports its names itself there is no map and this does nothing: Griffe follows the imports.

The docstrings cross-reference in Sphinx's roles (``:func:`~recovery.apply.apply```), which Markdown
would print as they are; ``SphinxRoles`` shows each as the code span Sphinx would (``apply``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from griffe import Alias, Extension, Module, Object

PACKAGE = "recovery"
MAP = "_EXPORTS"
# :func:`name`, :py:meth:`~pkg.Class.name`, ... (a leading ``~`` shows only the last component).
ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def lazy_exports(source: str) -> dict[str, str]:
    """The ``name -> module`` map assigned to ``_EXPORTS`` at the top level of ``source``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(target, ast.Name) and target.id == MAP for target in targets):
            exports = ast.literal_eval(value)
            assert isinstance(exports, dict), f"{MAP} is not a dict literal"
            return {str(name): str(module) for name, module in exports.items()}
    return {}


class LazyExports(Extension):
    """Alias each lazily exported name of ``recovery`` to its object, once the package is loaded."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        if pkg.path != PACKAGE or not isinstance(pkg.filepath, Path):
            return
        exports = lazy_exports(pkg.filepath.read_text())
        # A name that is also a submodule (``apply``) is left to the submodule: at run time the
        # import system sets ``recovery.<submodule>`` once it is imported. docs/api.md documents
        # such a function by its full path.
        names = [name for name in exports if name not in pkg.members]
        for name in names:
            pkg.set_member(name, Alias(name, f"{exports[name]}.{name}", parent=pkg))
        if names:
            pkg.exports = sorted([*names, *(["__version__"] if "__version__" in pkg.members else [])])


def plain_roles(text: str) -> str:
    """``text`` with each Sphinx cross-reference role written as the code span it renders as."""
    return ROLE.sub(lambda m: f"``{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}``", text)


class SphinxRoles(Extension):
    """Show ``:func:`x``` in docstrings as ``x``, as Sphinx renders it."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
