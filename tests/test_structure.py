"""The shape of the package: no import circle, imports of our own modules at the top of each module,
a pure core that does no IO, a CLI that starts without the heavy libraries, and a library that
names no command-line flag.

Pure modules (values in, values out: no files, network, processes, threads, clock or randomness)
import only the standard library minus its IO modules, and other pure modules. They are the
modules listed in PURE below plus every module whose own docstring says it is pure ("(pure" or
"Pure:"), so a new pure module is covered as soon as it says so.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import itertools
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "recovery"

# The pure core. Globs are relative to the repository; a listed module that disappears fails
# test_every_listed_pure_module_exists (rename it here).
PURE = (
    "recovery/core/*.py",
    "recovery/errors.py",
    "recovery/cli/report/*.py",
    "recovery/checkpoint/format.py",
    "recovery/checkpoint/crc.py",
    "recovery/delta/model.py",
    "recovery/delta/source.py",
    "recovery/delta/ledger_model.py",
    "recovery/delta/ledger_plan.py",
)

# Standard-library modules that touch the outside world (files, network, processes, threads,
# signals, the clock, randomness, the interpreter's own state) or import code by name.
STDLIB_IO = frozenset(
    {
        "_thread",
        "asyncio",
        "atexit",
        "builtins",
        "bz2",
        "concurrent",
        "ctypes",
        "dbm",
        "fcntl",
        "fileinput",
        "filecmp",
        "ftplib",
        "getpass",
        "glob",
        "gzip",
        "http",
        "imaplib",
        "importlib",
        "io",
        "lzma",
        "mmap",
        "multiprocessing",
        "os",
        "pathlib",
        "platform",
        "poplib",
        "pty",
        "random",
        "resource",
        "sched",
        "secrets",
        "select",
        "selectors",
        "shelve",
        "shutil",
        "signal",
        "smtplib",
        "socket",
        "socketserver",
        "sqlite3",
        "ssl",
        "subprocess",
        "sys",
        "tarfile",
        "tempfile",
        "termios",
        "threading",
        "time",
        "tty",
        "urllib",
        "uuid",
        "webbrowser",
        "xmlrpc",
        "zipfile",
    }
)

# Calls that read the clock or do IO whatever the module imported: `datetime.now()`, `open(...)`.
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "breakpoint", "exec", "eval", "__import__"})
CLOCK_METHODS = frozenset({"now", "utcnow", "today"})

# Loaded by the CLI only inside the command that needs them, never to start or show --help.
HEAVY = (
    "pyspark",
    "py4j",
    "pyarrow",
    "pandas",
    "numpy",
    "deltalake",
    "confluent_kafka",
    "fsspec",
    "s3fs",
    "boto3",
    "botocore",
    "rich",
    "pydantic",
    "kafka",  # kafka-python (DescribeLogDirs)
    "prometheus_client",  # the listener's metrics; loads http.server and wsgiref
)


def module_name(path: Path) -> str:
    """``recovery/core/specs.py`` -> ``recovery.core.specs``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def says_it_is_pure(path: Path) -> bool:
    """The module's docstring calls the module itself pure (not a bullet naming another module)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return any(
        re.search(r"\(pure\b|(^|\. )Pure:", line.strip()) and ":mod:" not in line
        for line in doc.splitlines()
        if not line.strip().startswith("*")
    )


def pure_paths() -> dict[str, Path]:
    listed = {path for pattern in PURE for path in ROOT.glob(pattern)}
    declared = {path for path in PACKAGE.rglob("*.py") if says_it_is_pure(path)}
    return {module_name(path): path for path in sorted(listed | declared)}


PURE_MODULES = pure_paths()


@dataclass(frozen=True)
class Violation:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


def _typing_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (imports there never run)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return ids


def _imported(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The modules an import statement loads, relative imports resolved; for ``from pkg import x``,
    ``pkg.x`` when x is a module of this package."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if _is_package(module) else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    return [f"{base}.{alias.name}" if _exists(f"{base}.{alias.name}") else base for alias in node.names]


def _is_package(module: str) -> bool:
    return (ROOT / Path(*module.split(".")) / "__init__.py").exists()


def _exists(module: str) -> bool:
    path = ROOT / Path(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def violations(source: str, module: str) -> list[Violation]:
    """What makes ``source`` (the text of ``module``) impure, by line."""
    tree = ast.parse(source)
    skip = _typing_only(tree)
    stdlib = sys.stdlib_module_names
    found: list[Violation] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in dict.fromkeys(_imported(node, module)):
                top = name.split(".")[0]
                if top == "recovery":
                    if name not in PURE_MODULES:
                        found.append(Violation(node.lineno, f"imports {name}, which is not pure"))
                elif top == "__future__":
                    continue
                elif top not in stdlib:
                    found.append(Violation(node.lineno, f"imports {name} (third-party)"))
                elif top in STDLIB_IO:
                    found.append(Violation(node.lineno, f"imports {name} (IO)"))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append(Violation(node.lineno, f"calls {func.id}()"))
            elif isinstance(func, ast.Attribute) and func.attr in CLOCK_METHODS:
                found.append(Violation(node.lineno, f"reads the clock: {ast.unparse(func)}()"))
    return sorted(found, key=lambda v: v.line)


def test_every_listed_pure_module_exists() -> None:
    missing = [pattern for pattern in PURE if not list(ROOT.glob(pattern))]
    assert not missing, f"listed as pure but not found (renamed? update PURE): {missing}"


@pytest.mark.parametrize("module", sorted(PURE_MODULES))
def test_pure_module_does_no_io(module: str) -> None:
    """Only the standard library minus its IO modules, and pure modules of ours; no clock, no print."""
    path = PURE_MODULES[module]
    found = violations(path.read_text(), module)
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(map(str, found))


def test_the_purity_check_catches_what_it_must() -> None:
    """The checker itself: each kind of violation is found, typing-only imports are not."""
    source = (
        "from __future__ import annotations\n"
        "import json, os\n"  # 2: os
        "from typing import TYPE_CHECKING\n"
        "from recovery.core.model import TopicPartition\n"
        "from recovery import api\n"  # 5: recovery.api
        "if TYPE_CHECKING:\n"
        "    import fsspec\n"
        "def f() -> None:\n"
        "    import confluent_kafka\n"  # 9: third-party, inside a function
        "    from datetime import datetime\n"
        "    datetime.now()\n"  # 11: clock
        "    print(json.dumps(1))\n"  # 12: print
        "    from .. import apply\n"  # 13: recovery.apply, relative
        "    from . import source\n"  # 14: recovery.delta.source is pure
    )
    found = [v.line for v in violations(source, "recovery.delta.probe")]
    assert found == [2, 5, 9, 11, 12, 13]


# -- import circles ----------------------------------------------------------------------------------
# A reader follows the imports to learn the layers; a circle makes them meaningless. Imports inside
# functions count (they run, only later); `if TYPE_CHECKING:` ones do not. Dynamic imports by name
# (the CLI's command loader, the packages' lazy `__getattr__`) are not edges.

Graph = dict[str, dict[str, tuple[int, ...]]]  # module -> {module of ours it imports: lines}


def imports_of_ours(source: str, module: str) -> dict[str, tuple[int, ...]]:
    """The modules of this package that ``source`` (the text of ``module``) imports, with the lines:
    ``from pkg import name`` is ``pkg.name`` when that is a module, else ``pkg`` (its ``__init__``)."""
    tree = ast.parse(source)
    skip = _typing_only(tree)
    found: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for name in dict.fromkeys(_imported(node, module)):
            if name.split(".")[0] == "recovery" and name != module:
                found.setdefault(name, []).append(node.lineno)
    return {name: tuple(sorted(lines)) for name, lines in sorted(found.items())}


@functools.cache
def import_graph() -> Graph:
    paths = sorted(PACKAGE.rglob("*.py"))
    return {module_name(path): imports_of_ours(path.read_text(), module_name(path)) for path in paths}


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's components of ``graph``, each sorted; nodes outside ``graph``'s keys are leaves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def cycles(graph: Mapping[str, Iterable[str]], limit: int = 100) -> list[tuple[str, ...]]:
    """Every elementary cycle of ``graph`` (at most ``limit``), each as its nodes in order from its
    smallest one; a node importing itself is no cycle between modules."""
    found = (
        cycle
        for component in _strongly_connected(graph)
        if len(component) > 1
        for start in component
        for cycle in _cycles_from([start], graph, set(component))
    )
    return sorted(itertools.islice(found, limit))


def _cycles_from(
    path: list[str], graph: Mapping[str, Iterable[str]], members: set[str]
) -> Iterator[tuple[str, ...]]:
    """The cycles that go on from ``path`` back to its first node through larger nodes only, so
    that each cycle is found once: from its smallest node."""
    start = path[0]
    for target in sorted(set(graph.get(path[-1], ())) & members):
        if target == start and len(path) > 1:
            yield tuple(path)
        elif target > start and target not in path:
            yield from _cycles_from([*path, target], graph, members)


def _source_path(module: str) -> str:
    """``recovery.checkpoint`` -> ``recovery/checkpoint/__init__.py``."""
    path = ROOT / Path(*module.split("."))
    file = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
    return str(file.relative_to(ROOT))


def _describe(cycle: tuple[str, ...], graph: Graph) -> str:
    """``a -> b -> a`` and, per step, the file and lines of the import."""
    steps = [*cycle, cycle[0]]
    edges = (
        f"    {_source_path(a)}:{','.join(map(str, graph[a][b]))} imports {b}"
        for a, b in itertools.pairwise(steps)
    )
    return "\n".join(["  " + " -> ".join(steps), *edges])


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, f"import circles in recovery/ ({len(found)}):\n" + "\n".join(
        _describe(cycle, graph) for cycle in found
    )


def room(module: str) -> str:
    """The part of the house a module belongs to: its subpackage (``recovery.kafka``), or itself
    for a module directly under ``recovery/`` (``recovery.api``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or _is_package(module) else module


def room_graph(graph: Graph) -> dict[str, dict[str, tuple[str, str]]]:
    """{room: {room it imports: one (module, imported module) pair that does it}}; the package's own
    ``__init__`` (the public API, re-exporting everything) is no room."""
    rooms: dict[str, dict[str, tuple[str, str]]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = room(module), room(target)
            if a != b and "recovery" not in (a, b):
                rooms.setdefault(a, {}).setdefault(b, (module, target))
    return rooms


def test_no_import_runs_back_up_between_the_parts_of_the_package() -> None:
    """The layers a reader sees: errors, the pure core, the edges (checkpoint, kafka, delta), the
    use cases, report, cli, local. No circle between folders and top-level modules either."""
    rooms = room_graph(import_graph())
    found = cycles(rooms)
    described = (
        "  "
        + " -> ".join([*cycle, cycle[0]])
        + "".join(
            f"\n    {rooms[a][b][0]} imports {rooms[a][b][1]}"
            for a, b in itertools.pairwise([*cycle, cycle[0]])
        )
        for cycle in found
    )
    assert not found, "imports that run back up between parts of recovery/:\n" + "\n".join(described)


def test_the_core_imports_only_itself_and_the_errors() -> None:
    graph = import_graph()
    outside = [
        f"{module} imports {target}"
        for module, targets in graph.items()
        if room(module) == "recovery.core"
        for target in targets
        if room(target) not in ("recovery.core", "recovery.errors")
    ]
    assert not outside, "the core reaches out: " + "; ".join(outside)


def test_the_cycle_finder_finds_every_cycle_and_nothing_else() -> None:
    graph = {
        "a": {"b"},
        "b": {"b", "c", "d"},  # b -> b: itself, not a circle between modules
        "c": {"a"},  # a -> b -> c -> a
        "d": {"b", "e"},  # b -> d -> b
        "e": {"e"},
        "f": {"a", "g"},  # leads into a cycle, is on none
        "x": {"y"},
        "y": {"x"},  # a second component
    }
    assert cycles(graph) == [("a", "b", "c"), ("b", "d"), ("x", "y")]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert len(cycles(graph, limit=2)) == 2


def test_the_import_graph_counts_what_runs() -> None:
    """Function-level imports count, TYPE_CHECKING ones do not; a name from a package is its
    submodule when there is one, else the package's ``__init__``; relative imports are resolved."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from recovery.checkpoint import Checkpoint\n"  # 4: the package's __init__
        "from recovery.checkpoint import format as fmt\n"  # 5: a submodule
        "if TYPE_CHECKING:\n"
        "    from recovery.apply import Applied\n"
        "def f() -> None:\n"
        "    from recovery.delta.ledger import ledger_gate\n"  # 9: inside a function
        "    from . import ledger_plan, source\n"  # 10: relative, two submodules
        "    import recovery.core.model\n"  # 11
        "    from recovery.delta.probe import x\n"  # itself
    )
    assert imports_of_ours(source, "recovery.delta.probe") == {
        "recovery.checkpoint": (4,),
        "recovery.checkpoint.format": (5,),
        "recovery.delta.ledger": (9,),
        "recovery.delta.ledger_plan": (10,),
        "recovery.delta.source": (10,),
        "recovery.core.model": (11,),
    }


# -- imports of our own modules at the top --------------------------------------------------------------
# A reader learns what a module depends on from its head; an import inside a function hides a
# dependency until that function runs. Laziness is for the heavy third-party libraries and for what
# LAZY_OWN_IMPORTS names, each with why. A key is (files: a glob relative to the repository, the
# module of ours they may import inside a function: its name, "*" for any, or BY_NAME for an
# ``import_module(name)`` call, whose module is known only when it runs).

BY_NAME = "import_module(...)"

LAZY_OWN_IMPORTS: dict[tuple[str, str], str] = {
    ("recovery/cli/__init__.py", BY_NAME): (
        "the command loader: --help imports no command module, and a command only its own"
    ),
    ("recovery/__init__.py", BY_NAME): (
        "PEP 562: each public name loads its module on first use, so `import recovery` stays cheap"
    ),
    ("recovery/checkpoint/__init__.py", BY_NAME): "PEP 562, as recovery/__init__.py, for its names",
    ("recovery/kafka/__init__.py", BY_NAME): "PEP 562, as recovery/__init__.py, for its names",
    ("recovery/delta/log.py", BY_NAME): (
        "deltalake and pyarrow (HEAVY, the delta extra) by name, so a missing one is a one-line error"
    ),
    ("recovery/api.py", "recovery.apply"): (
        "validate, plan and starting-offsets import recovery.api; the write path loads only when a "
        "repair executes (test_the_reading_use_cases_do_not_load_the_write_path)"
    ),
    # recovery.conf, recovery.fleet and the ledger modules define pydantic models at import: at the
    # top of their command modules they would load pydantic for `conf --help`, `fleet --help`, ...
    ("recovery/cli/fleet.py", "recovery.conf"): "pydantic at import (conf/ models)",
    ("recovery/cli/fleet.py", "recovery.fleet"): "pydantic at import (through recovery.conf)",
    ("recovery/cli/fleet.py", "recovery.fleet_hold"): "pydantic at import (through recovery.conf)",
    ("recovery/cli/retention.py", "recovery.hold"): "pydantic at import (the hold record's format)",
    ("recovery/cli/fleet.py", "recovery.watch"): "pydantic at import (through recovery.conf)",
    ("recovery/cli/fleet.py", "recovery.cli.serve"): "the HTTP server and prometheus_client: serve only",
    ("recovery/cli/ledger.py", "recovery.delta.ledger_conf"): "pydantic at import (the [ledger] conf)",
    ("recovery/cli/ledger.py", "recovery.delta.ledger_table"): "pydantic at import (ledger_conf)",
    ("recovery/cli/ledger.py", "recovery.delta.ledger"): "pydantic at import (ledger_conf)",
    ("recovery/local/*.py", "*"): "the rig (demo and integration tests), not the library's layers",
}

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def lazy_imports_of_ours(source: str, module: str) -> list[tuple[int, str]]:
    """(line, module) for each import of a module of ours inside a function of ``source`` (the text
    of ``module``), and (line, BY_NAME) for each ``import_module(...)`` or ``__import__(...)`` call
    there; imports under ``if TYPE_CHECKING:`` never run and do not count."""
    tree = ast.parse(source)
    skip = _typing_only(tree)
    found: set[tuple[int, str]] = set()
    for function in ast.walk(tree):
        if not isinstance(function, _FUNCTIONS):
            continue
        for node in ast.walk(function):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(
                    (node.lineno, name)
                    for name in _imported(node, module)
                    if name.split(".")[0] == "recovery"
                )
            elif isinstance(node, ast.Call) and _called_name(node) in ("import_module", "__import__"):
                found.add((node.lineno, BY_NAME))
    return sorted(found)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _allowed_by(path: str, imported: str) -> list[tuple[str, str]]:
    """The LAZY_OWN_IMPORTS keys that let ``path`` import ``imported`` inside a function."""
    return [
        (files, what)
        for files, what in LAZY_OWN_IMPORTS
        if fnmatch.fnmatch(path, files) and (what == imported or (what == "*" and imported != BY_NAME))
    ]


@functools.cache
def lazy_imports() -> dict[str, list[tuple[int, str]]]:
    """{file relative to the repository: its lazy imports of ours}, for every module of recovery/."""
    found = {
        str(path.relative_to(ROOT)): lazy_imports_of_ours(path.read_text(), module_name(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    return {path: imports for path, imports in found.items() if imports}


def test_modules_of_ours_are_imported_at_the_top() -> None:
    hidden = [
        f"  {path}:{line} imports {imported} inside a function"
        for path, imports in lazy_imports().items()
        for line, imported in imports
        if not _allowed_by(path, imported)
    ]
    assert not hidden, (
        "move these imports to the top of their modules (laziness is for HEAVY libraries; to keep "
        "one, add it to LAZY_OWN_IMPORTS with why):\n" + "\n".join(hidden)
    )


def test_every_lazy_import_allowed_is_still_there() -> None:
    """An entry of LAZY_OWN_IMPORTS that allows nothing any more is removed, so the list stays the
    list of what is really lazy."""
    used = {
        key
        for path, imports in lazy_imports().items()
        for _, imported in imports
        for key in _allowed_by(path, imported)
    }
    stale = sorted(set(LAZY_OWN_IMPORTS) - used)
    assert not stale, f"nothing imports these lazily any more; remove them from LAZY_OWN_IMPORTS: {stale}"


def test_the_lazy_import_finder_finds_what_runs_inside_functions() -> None:
    """Imports at the top and under TYPE_CHECKING are not lazy; third-party ones are not ours; a
    nested function's import is found once; relative imports are resolved."""
    source = (
        "from __future__ import annotations\n"
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "from recovery.core.model import TopicPartition\n"
        "if TYPE_CHECKING:\n"
        "    from recovery.apply import Applied\n"
        "def f() -> None:\n"
        "    import json, confluent_kafka\n"
        "    from recovery.kafka.admin import admin_for\n"  # 9
        "    from . import source\n"  # 10: recovery.delta.source
        "    if TYPE_CHECKING:\n"
        "        from recovery.core.plan import Plan\n"
        "class Probe:\n"
        "    def method(self) -> None:\n"
        "        def inner() -> None:\n"
        "            import recovery.core.model\n"  # 16
        "        importlib.import_module(self.name)\n"  # 17
        "load = lambda name: __import__(name)\n"  # 18
    )
    assert lazy_imports_of_ours(source, "recovery.delta.probe") == [
        (9, "recovery.kafka.admin"),
        (10, "recovery.delta.source"),
        (16, "recovery.core.model"),
        (17, BY_NAME),
        (18, BY_NAME),
    ]
    assert _allowed_by("recovery/api.py", "recovery.apply") == [("recovery/api.py", "recovery.apply")]
    assert _allowed_by("recovery/api.py", "recovery.core.plan") == []
    assert _allowed_by("recovery/cli/repair.py", BY_NAME) == []


def _import_tree(stderr: str) -> dict[str, str]:
    """``-X importtime`` output -> {module: the module whose import loaded it}."""
    parent: dict[str, str] = {}
    waiting: list[tuple[int, str]] = []  # imported, parent not yet printed (children come first)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        field = line.split("|")[-1]
        name = field.strip()
        depth = (len(field) - len(field.lstrip()) - 1) // 2
        while waiting and waiting[-1][0] > depth:
            parent[waiting.pop()[1]] = name
        waiting.append((depth, name))
    return parent


def _chain(module: str, parent: dict[str, str]) -> str:
    chain = [module]
    while chain[-1] in parent and parent[chain[-1]] not in chain:
        chain.append(parent[chain[-1]])
    return " <- ".join(chain)


LOADED = "--- sys.modules ---"


def _loaded(code: str) -> tuple[str, dict[str, str]]:
    """Run ``code`` under ``python -X importtime``: its output, and {top-level module actually loaded
    (in sys.modules at the end, less what every interpreter here loads at start): how it was loaded}."""
    trailer = f"\nimport sys\nprint({LOADED!r})\nprint('\\n'.join(sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code + trailer],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output, _, modules = done.stdout.partition(LOADED + "\n")
    parent = _import_tree(done.stderr)
    tops = {m for m in modules.split() if "." not in m} - _at_start()
    return output, {m: _chain(m, parent) for m in sorted(tops)}


@functools.cache
def _at_start() -> frozenset[str]:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return frozenset(m for m in done.stdout.split() if "." not in m)


def test_importing_the_pure_core_loads_only_the_standard_library() -> None:
    """Package ``__init__`` modules count too: importing a pure module runs its package's. The CLI's
    report modules are left out: their package is the CLI (click), loaded by whoever renders."""
    library = sorted(m for m in PURE_MODULES if not m.startswith("recovery.cli."))
    _, loaded = _loaded("\n".join(f"import {module}" for module in library))
    foreign = [
        how
        for module, how in loaded.items()
        if module not in sys.stdlib_module_names and module != "recovery" and not module.startswith("_")
    ]
    assert not foreign, "loaded by the pure core: " + "; ".join(foreign)


# Every command's --help, in one interpreter: the group is walked (lazy groups too), so new commands
# are covered.
EVERY_HELP = """\
import click
from click.testing import CliRunner
from recovery.cli import cli

def walk(group, path):
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        yield [*path, name]
        if isinstance(command, click.Group):
            yield from walk(command, [*path, name])

for path in [[], *walk(cli, [])]:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, (path, result.output)
    print(" ".join(path))
"""


def test_every_help_loads_no_heavy_library() -> None:
    output, loaded = _loaded(EVERY_HELP)
    assert len(output.splitlines()) > 10  # the group and every command were asked
    heavy = [how for module, how in loaded.items() if module in HEAVY]
    assert not heavy, "loaded to show --help: " + "; ".join(heavy)


# What `stream-recovery --help` and `python -m recovery --help` run.
ENTRY_POINT = """\
import runpy, sys
sys.argv = ["stream-recovery", "--help"]
try:
    runpy.run_module("recovery", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
"""


def test_stream_recovery_help_loads_no_heavy_library() -> None:
    output, loaded = _loaded(ENTRY_POINT)
    assert "Usage:" in output
    heavy = [how for module, how in loaded.items() if module in HEAVY]
    assert not heavy, "loaded by `stream-recovery --help`: " + "; ".join(heavy)


# `checkpoint show` of a local checkpoint (built here), in one interpreter.
LOCAL_SHOW = """\
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "tests/checkpoint")
from chk_builder import write_checkpoint
from click.testing import CliRunner
from recovery.cli import cli

root = write_checkpoint(Path(tempfile.mkdtemp()) / "chk")
result = CliRunner().invoke(cli, ["checkpoint", "show", str(root), "--output", "json"])
assert result.exit_code == 0, result.output
print(result.output.count('"partition"'))
"""


def test_reading_a_local_checkpoint_loads_no_heavy_library() -> None:
    """fsspec is for object stores: a tenth of a second to import, most of a local command's start."""
    output, loaded = _loaded(LOCAL_SHOW)
    assert int(output.strip().splitlines()[-1]) > 0
    heavy = [how for module, how in loaded.items() if module in HEAVY]
    assert not heavy, "loaded to show a local checkpoint: " + "; ".join(heavy)


def test_the_reading_use_cases_do_not_load_the_write_path() -> None:
    """validate, plan and starting-offsets import recovery.api; only a repair --execute needs apply."""
    code = "import sys, recovery.api; print('recovery.apply' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "False"


# -- the library speaks Python: no command-line flag outside recovery/cli/ ------------------------
# A message names the Python parameter it is about; only the CLI turns that into its flag
# (recovery/cli/flags.py). Docstrings and comments may mention flags (they document what the CLI
# passes); string constants may not, except the advice below: texts that tell the reader what to
# run or pass next, and the rendering layer's notes, left for later. The list can only shrink.

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
OUTSIDE_THE_LIBRARY = ("recovery/cli/", "recovery/local/")

# (file, an excerpt of the string around the flag): another tool's command line, which the library
# quotes as it is. Its own advice is Python in backquotes, which the CLI says as flags and commands
# (test_every_piece_of_advice_is_said_on_the_command_line); an f-string is read with {} per value.
OTHER_TOOLS = (
    ("recovery/core/plan.py", "kafka-topics --describe"),
    ("recovery/delta/log.py", "pip install --force-reinstall"),
)


def string_texts(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string the module's code uses: an f-string as one text with ``{}`` for
    each value; docstrings and other strings standing alone as statements (documentation) left out."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in ast.walk(node) if part is not node)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.JoinedStr):
            parts = (v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            yield node.lineno, "".join(str(part) for part in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def flags_outside_the_allowed(
    texts: Iterable[tuple[str, int, str]], allowed: Iterable[tuple[str, str]]
) -> tuple[list[str], set[tuple[str, str]]]:
    """The flags in ``texts`` ((file, line, text)) that no allowed excerpt of their file covers, and
    the allowed excerpts that cover nothing."""
    by_file: dict[str, list[str]] = {}
    for path, excerpt in allowed:
        by_file.setdefault(path, []).append(excerpt)
    unused = set(allowed)
    bad = []
    for path, line, text in texts:
        covered: set[int] = set()
        for excerpt in by_file.get(path, ()):
            for start in (m.start() for m in re.finditer(re.escape(excerpt), text)):
                covered.update(range(start, start + len(excerpt)))
                unused.discard((path, excerpt))
        bad += [
            f"{path}:{line}: {m.group()} in {text!r}" for m in FLAG.finditer(text) if m.start() not in covered
        ]
    return bad, unused


def library_strings() -> Iterator[tuple[str, int, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(OUTSIDE_THE_LIBRARY):
            yield from ((rel, line, text) for line, text in string_texts(path.read_text()))


def test_the_library_names_no_command_line_flag() -> None:
    bad, unused = flags_outside_the_allowed(library_strings(), OTHER_TOOLS)
    hint = "quote the Python parameter or call instead (recovery/cli/flags.py says the flag)"
    assert not bad, hint + ":\n" + "\n".join(bad)
    assert not unused, f"no longer in the code: remove from OTHER_TOOLS: {sorted(unused)}"


def test_the_flag_finder_finds_what_a_user_would_read() -> None:
    source = '''"""Docstring: --documented is fine."""
x = "--runway-warn must be positive"
y = f"{a}: choose one with --source"
z = ("name it with "
     "--pipeline")
def f() -> None:
    """--also-fine"""
    "--a-bare-string"  # --a-comment
    raise E(f"--export: two sources read {tp}: use --output json", "a-b --c", "x--y", "-X", "--")
'''
    texts = [("m.py", line, text) for line, text in string_texts(source)]
    bad, unused = flags_outside_the_allowed(texts, [("m.py", "use --output json"), ("m.py", "never there")])
    found = sorted(b.split(": ", 1)[1].split(" in ")[0] for b in bad)
    assert found == ["--c", "--export", "--pipeline", "--runway-warn", "--source"]
    assert unused == {("m.py", "never there")}


# Backquoted Python the library gives as advice: a parameter, `name=value`, or a call.
ADVICE = re.compile(r"`([a-z_]+(?:=[^`]*|\([^`]*\))?)`")


def test_every_piece_of_advice_is_said_on_the_command_line() -> None:
    """Each parameter, keyword argument and call the library's strings quote has the CLI's words
    (recovery.cli.flags): a CLI user reads --force where a Python caller reads `force=True`."""
    from recovery.cli.flags import in_cli_words

    unsaid = [
        f"{path}:{line}: `{advice}`"
        for path, line, text in library_strings()
        for advice in ADVICE.findall(text)
        # an f-string's values as Python literals
        if in_cli_words(f"`{advice.replace('{}', repr('x'))}`") == f"`{advice.replace('{}', repr('x'))}`"
    ]
    assert not unsaid, "add the parameter to FLAGS or the function to COMMANDS:\n" + "\n".join(unsaid)


def test_the_jobs_name_the_commands_the_cli_does() -> None:
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        from _options import JOB_COMMANDS
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    from recovery.cli.flags import COMMANDS

    assert {name: COMMANDS[name] for name in JOB_COMMANDS} == JOB_COMMANDS


# -- one writer ------------------------------------------------------------------------------------
# A checkpoint's files change only through the executor (and the rollback of an interrupted change,
# which runs while the lock is taken); the store's writing methods are called only by the modules
# that keep the toolkit's own files, each for its own.
REPLACERS = {"recovery/checkpoint/executor.py", "recovery/checkpoint/intent.py"}
STORE_WRITES = frozenset(
    {"write_atomic", "write", "create", "remove", "remove_temp_files", "remove_empty_dirs"}
)
STORE_WRITERS = {
    "recovery/checkpoint/store.py": "the store itself",
    "recovery/checkpoint/replacement.py": "replace_files, called by the two REPLACERS",
    "recovery/checkpoint/executor.py": "the rollback of a failed change (temp files)",
    "recovery/checkpoint/intent.py": "the lock's record, last-write.json, an interrupted change's rollback",
    "recovery/checkpoint/backup.py": "backup sets",
    "recovery/checkpoint/heartbeat.py": "the running query's heartbeat",
    "recovery/topic_ids.py": "_recovery/topic-ids.json when nothing else changes",
    "recovery/hold.py": "_recovery/retention-hold.json: a topic's values before a retention hold",
}


def _store_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, method) of each call ``x.store.M(...)``/``store.M(...)``/``root.M(...)`` of a writing
    method: any call of such a name on a receiver named like a store (file handles, gauges and
    deltalake are named otherwise)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in STORE_WRITES
        ):
            receiver = ast.unparse(node.func.value)
            if receiver.split(".")[-1].split("(")[0] in {"store", "root", "chk_store", "_store"} or (
                receiver.endswith(")") and "_store(" in receiver
            ):
                found.append((node.lineno, node.func.attr))
    return found


def test_only_the_executor_replaces_a_checkpoints_files() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and any(a.name == "replace_files" for a in node.names)
    }
    assert importers == REPLACERS


def test_only_the_keepers_of_the_toolkits_files_call_the_stores_writing_methods() -> None:
    callers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OUTSIDE_THE_LIBRARY):
            continue
        calls = _store_writes(ast.parse(path.read_text()))
        if calls and rel not in STORE_WRITERS:
            callers[rel] = calls
    assert not callers, f"write through recovery.checkpoint.executor.execute_change instead: {callers}"


def test_the_store_write_finder_sees_the_calls_that_write() -> None:
    source = (
        "store.write_atomic('a', b'')\nchk.store.remove('x')\nroot.remove_empty_dirs('s')\n"
        "_store(c, o).write_atomic('h', b'')\nhandle.write(b'')\ng['age'].remove(1)\n"
    )
    assert [m for _, m in _store_writes(ast.parse(source))] == [
        "write_atomic",
        "remove",
        "remove_empty_dirs",
        "write_atomic",
    ]
