"""The Delta edge: what a table's ``_delta_log`` holds, read with deltalake (delta-rs) and fsspec.

No JVM: the table id and latest version come from ``deltalake.DeltaTable``; the commits and
checkpoints present are one listing of ``_delta_log``; the data files a commit adds are its JSON
``add`` actions (``dataChange=true``, what a Delta stream reads), each checked in storage.
deltalake's exceptions become :class:`~recovery.errors.DeltaError` (or ``InvalidInput`` when there is
no table at the path).

This module is the one place the library imports deltalake and pyarrow: :data:`deltalake` and
:data:`pyarrow` load them on first use, and raise :class:`~recovery.errors.DeltaNotInstalled` (exit 2,
naming the missing one and the extra to install) where ``pip install stream-recovery`` left them out,
or an ``InvalidInput`` (exit 2, the import error's text and the reinstall to run) where an install is
broken.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote, urlparse

from recovery.checkpoint.store import Store
from recovery.core.model import JsonObject
from recovery.delta.model import Retention, TableLog, VersionFiles
from recovery.delta.runway import parse_interval_ms
from recovery.errors import DeltaError, DeltaNotInstalled, DeltaTableNotFound, InvalidInput, RecoveryError

# What the ``delta`` extra installs (pyproject.toml), by top-level module.
DELTA_LIBRARIES = ("deltalake", "pyarrow")


def import_delta_library(name: str) -> ModuleType:
    """The module ``name`` (one of :data:`DELTA_LIBRARIES`); DeltaNotInstalled when it, or a module
    it needs, is not installed; InvalidInput when it is installed but cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise _import_failure(name, exc) from exc


def _import_failure(name: str, exc: ImportError) -> InvalidInput:
    """The one-line error (exit 2) for a Delta library ``name`` that ``exc`` kept from loading.

    A missing top-level module (``No module named 'pyarrow'``) means the extra, or a package it
    needs, was left out: DeltaNotInstalled. Anything else is a broken install that importing again
    will not mend: a missing submodule (``deltalake._internal``), a shared library or symbol the
    loader cannot find, a name a module no longer has. Reinstalling the extra mends those."""
    missing = exc.name or name
    if isinstance(exc, ModuleNotFoundError) and "." not in missing:
        return DeltaNotInstalled(missing)
    return InvalidInput(
        f"{name} cannot be imported ({exc}): reinstall the Delta extra: "
        "pip install --force-reinstall 'stream-recovery[delta]'"
    )


class _Library:
    """A heavy library loaded on first attribute access, so importing the Delta modules (and a
    Kafka-only command, or ``--help``) never loads it, and a missing one is a one-line error."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> object:
        return getattr(import_delta_library(self._name), attribute)


if TYPE_CHECKING:
    import deltalake as deltalake
    import pyarrow as pyarrow
else:
    deltalake = _Library("deltalake")
    pyarrow = _Library("pyarrow")

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
# Classic (<v>.checkpoint.parquet), multi-part (<v>.checkpoint.<i>.<n>.parquet) and V2
# (<v>.checkpoint.<uuid>.json|parquet) checkpoints: PROTOCOL.md "Checkpoints".
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.[^.]+)*\.(parquet|json)$")


@contextmanager
def delta_errors(table: str) -> Iterator[None]:
    """deltalake's exceptions (and a Delta library failing to load inside it) as ours."""
    try:
        yield
    except RecoveryError:
        raise
    except ImportError as exc:
        # deltalake imports pyarrow itself where it hands out Arrow data (pyarrow is optional to it).
        top = (exc.name or "").partition(".")[0]
        raise _import_failure(top if top in DELTA_LIBRARIES else "deltalake", exc) from exc
    except Exception as exc:
        if _is_table_not_found(exc):
            raise DeltaTableNotFound(f"{table}: not a Delta table ({exc})") from exc
        # delta-rs raises DeltaError, CommitFailedError, OSError and pyo3 panics alike.
        raise DeltaError(f"{table}: {type(exc).__name__}: {exc}") from exc


def _is_table_not_found(exc: Exception) -> bool:
    """Whether ``exc`` is deltalake's TableNotFoundError, without importing deltalake here: an
    ``except deltalake.exceptions...`` clause would load it, and a broken install would then raise
    from the clause itself. An exception deltalake raised means it loaded, and loading it loads
    ``deltalake.exceptions`` (``deltalake/table.py`` imports it)."""
    exceptions = sys.modules.get("deltalake.exceptions")
    return exceptions is not None and isinstance(exc, exceptions.TableNotFoundError)


def open_table(table: str, storage_options: Mapping[str, str] | None = None) -> deltalake.DeltaTable:
    """``deltalake.DeltaTable`` at ``table`` (its latest version)."""
    with delta_errors(table):
        return deltalake.DeltaTable(table, storage_options=dict(storage_options) if storage_options else None)


def app_transaction_version(
    table: str,
    app_id: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    missing_table_ok: bool = False,
) -> int | None:
    """The ``txn`` version recorded for ``app_id`` (a streaming query id for a Delta sink, a
    ``txnAppId`` for idempotent batch writes); None if the app never wrote to the table. With
    ``missing_table_ok``, also None when there is no table at all (only then: any other storage
    error still raises)."""
    try:
        dt = open_table(table, storage_options)
    except DeltaTableNotFound:
        if missing_table_ok:
            return None
        raise
    with delta_errors(table):
        version = dt.transaction_version(app_id)
    return None if version is None else int(version)


def _log_listing(store: Store) -> tuple[tuple[int, ...], tuple[int, ...]]:
    commits: list[int] = []
    checkpoints: set[int] = set()
    for entry in store.list(LOG_DIR):
        if m := _COMMIT.match(entry.name):
            commits.append(int(m.group(1)))
        elif m := _CHECKPOINT.match(entry.name):
            checkpoints.add(int(m.group(1)))
    return tuple(sorted(commits)), tuple(sorted(checkpoints))


def _data_path(store: Store, path: str) -> tuple[Store, str]:
    """A store and relative path for an ``add.path``: relative and URL-encoded, or an absolute URI."""
    parsed = urlparse(path)
    if parsed.scheme:
        parent, _, name = path.rpartition("/")
        return Store(parent, store.storage_options), unquote(name)
    return store, unquote(path)


class _Commit(NamedTuple):
    """What one commit adds (dataChange, with whether each is still in storage) and removes."""

    added: dict[str, bool]  # path -> still in storage
    removed: dict[str, int]  # path -> deletionTimestamp (0: none given)


def _read_commit(store: Store, version: int) -> _Commit:
    rel = f"{LOG_DIR}/{version:020d}.json"
    data = store.read(rel)
    commit = _Commit({}, {})
    if data is None:
        return commit
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action: JsonObject = json.loads(line)
        except ValueError as exc:
            raise DeltaError(f"{store.display(rel)}: line {number} is not JSON ({exc})") from None
        remove = action.get("remove")
        if isinstance(remove, dict) and "path" in remove:
            stamp = remove.get("deletionTimestamp")
            commit.removed[str(remove["path"])] = int(stamp) if isinstance(stamp, int) else 0
            continue
        add = action.get("add")
        if not isinstance(add, dict) or not add.get("dataChange", True):
            continue
        where, file = _data_path(store, str(add["path"]))
        commit.added[str(add["path"])] = where.exists(file)
    return commit


def _version_files(store: Store, versions: Iterable[int]) -> dict[int, VersionFiles]:
    """Each commit's added files, how many are gone (VACUUM), and when the first of them that a
    later commit of ``versions`` removed was removed (a tombstone VACUUM will act on)."""
    commits = {v: _read_commit(store, v) for v in sorted(versions)}
    removed_at: dict[str, int] = {}
    out: dict[int, VersionFiles] = {}
    for v in sorted(commits, reverse=True):  # newest first: removes of later versions are known
        commit = commits[v]
        stamps = [removed_at[p] for p in commit.added if p in removed_at]
        out[v] = VersionFiles(
            len(commit.added),
            sum(1 for present in commit.added.values() if not present),
            min(stamps) if stamps else None,
        )
        removed_at.update(commit.removed)
    return out


def _retention(configuration: Mapping[str, str]) -> Retention:
    """The table's cleanup settings from its properties (Delta's defaults when not set)."""

    def interval(key: str, default: int) -> int | str:
        text = configuration.get(key)
        if text is None:
            return default
        try:
            return parse_interval_ms(text)
        except ValueError as exc:
            return str(exc)

    defaults = Retention()
    cleanup = str(configuration.get("delta.enableExpiredLogCleanup", "true")).strip().lower() != "false"
    return Retention(
        interval("delta.logRetentionDuration", int(defaults.log_ms)),
        interval("delta.deletedFileRetentionDuration", int(defaults.deleted_file_ms)),
        cleanup,
    )


def _last_vacuum_ms(dt: deltalake.DeltaTable, table: str) -> int | None:
    """The time of the latest VACUUM in the table's last 100 commits (None: none there)."""
    with delta_errors(table):
        history = dt.history(limit=100)
    stamps = [
        int(entry["timestamp"])
        for entry in history
        if str(entry.get("operation", "")).startswith("VACUUM") and isinstance(entry.get("timestamp"), int)
    ]
    return max(stamps) if stamps else None


def read_table_log(
    table: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    files_from: int | None = None,
    times_of: Iterable[int] = (),
) -> TableLog:
    """What ``table``'s log holds now and its cleanup settings; with ``files_from``, also the data
    files each commit from that version on adds, how many of them are gone from storage (VACUUM),
    which a later commit removed and when, and the time of the last VACUUM; ``times_of``: the
    commits whose file times to read (log cleanup goes by them), with the version a snapshot of each
    is rebuilt from.

    Example: ``read_table_log("/data/orders").earliest_change``
    """
    dt = open_table(table, storage_options)
    with delta_errors(table):
        metadata = dt.metadata()
        identity, latest = str(metadata.id), int(dt.version())
        configuration = dict(metadata.configuration or {})
    store = Store(table, storage_options)
    commits, checkpoints = _log_listing(store)
    files: dict[int, VersionFiles] = {}
    last_vacuum = None
    if files_from is not None:
        files = _version_files(store, (v for v in commits if files_from <= v <= latest))
        if any(f.removed_ms is not None for f in files.values()):
            last_vacuum = _last_vacuum_ms(dt, table)
    present = set(commits)
    wanted = set(times_of)
    # and the version each snapshot of them is rebuilt from (its checkpoint's commit, or 0)
    wanted |= {max((c for c in checkpoints if c <= v), default=0) for v in wanted}
    times = {
        v: ms
        for v in wanted
        if v in present and (ms := store.modified_ms(f"{LOG_DIR}/{v:020d}.json")) is not None
    }
    return TableLog(
        table=table,
        table_id=identity,
        latest=latest,
        commits=tuple(v for v in commits if v <= latest),
        checkpoints=tuple(c for c in checkpoints if c <= latest),
        files=files,
        retention=_retention(configuration),
        commit_ms=times,
        last_vacuum_ms=last_vacuum,
    )
