"""The heartbeat a running query leaves in its checkpoint: ``_recovery/heartbeat.json``.

File ages only guess whether a query runs: an idle query writes no batch files, so after
``--active-within`` seconds of quiet a live checkpoint looks stopped. The toolkit's
StreamingQueryListener (:mod:`recovery.listener`) calls :func:`write_heartbeat` on progress and idle
events (state ``running``) and on termination (state ``terminated``); every writing command reads it
with :func:`read_heartbeat` and judges it with :func:`judge`, which does no IO:

* a ``running`` heartbeat younger than ``max(60 s, 3 x interval_s)`` -> in use (refused unless
  ``--force``), naming query id, run id, host and age;
* a ``terminated`` heartbeat written after the newest batch file -> stopped, no file-age guess;
* anything else (no heartbeat, a stale one, a terminated one older than the newest batch file) ->
  the file-age guess, and the message says that liveness is only guessed.

The heartbeat is written through the checkpoint's :class:`~recovery.checkpoint.store.Store`: temp
file + rename on local disk, one PUT on object stores, so a reader sees a whole record or none. It
never touches another file of the checkpoint, and a failure to write it is logged, never raised: a
job must not die because its heartbeat could not be written.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from dataclasses import dataclass
from enum import StrEnum

from recovery.checkpoint.intent import read_last_write
from recovery.checkpoint.options import StorageOptions
from recovery.checkpoint.reader import Checkpoint
from recovery.checkpoint.recovery_dir import HEARTBEAT_FILE
from recovery.checkpoint.store import Store
from recovery.errors import CheckpointFormatError, CheckpointInUse, mask_credentials

log = logging.getLogger(__name__)

HEARTBEAT_FORMAT = 1
MIN_FRESH_S = 60.0  # a heartbeat is fresh for max(MIN_FRESH_S, FRESH_INTERVALS x interval_s)
FRESH_INTERVALS = 3
OWN_WRITE_SLACK_MS = 2000  # object stores stamp mtimes with their own clock
RUNNING = "running"
TERMINATED = "terminated"
STATES = (RUNNING, TERMINATED)
NO_HEARTBEAT = (
    "liveness is guessed from file ages (no heartbeat: the query does not run the toolkit's listener)"
)


@dataclass(frozen=True)
class Heartbeat:
    """One heartbeat record, as the running query's listener wrote it."""

    query_id: str
    run_id: str
    state: str  # "running" or "terminated"
    interval_s: float  # how often the writer means to write it
    written_ms: int  # epoch milliseconds, the writer's clock
    host: str
    pid: int

    @property
    def fresh_for_s(self) -> float:
        """How long a ``running`` heartbeat counts as proof that the query runs."""
        return max(MIN_FRESH_S, FRESH_INTERVALS * self.interval_s)

    def age_s(self, now_ms: int) -> float:
        return (now_ms - self.written_ms) / 1000.0

    def describe(self, now_ms: int) -> str:
        return (
            f"query {self.query_id} (run {self.run_id}) on host {self.host}, pid {self.pid}, "
            f"reported {self.state} {max(self.age_s(now_ms), 0.0):.0f}s ago"
        )


class Liveness(StrEnum):
    RUNNING = "running"  # a fresh running heartbeat: refuse
    STOPPED = "stopped"  # a terminated heartbeat newer than every batch file: go ahead
    GUESS = "guess"  # fall back to file ages


@dataclass(frozen=True)
class Judgement:
    """What the heartbeat says about whether the query runs; ``note`` explains a GUESS."""

    liveness: Liveness
    heartbeat: Heartbeat | None
    note: str


def judge(heartbeat: Heartbeat | None, newest_batch_ms: int | None, now_ms: int) -> Judgement:
    """Decide (no IO) from the heartbeat, if any, the newest batch file's mtime and the clock."""
    if heartbeat is None:
        return Judgement(Liveness.GUESS, None, NO_HEARTBEAT)
    if heartbeat.state == RUNNING:
        if heartbeat.age_s(now_ms) < heartbeat.fresh_for_s:
            return Judgement(Liveness.RUNNING, heartbeat, heartbeat.describe(now_ms))
        return Judgement(
            Liveness.GUESS,
            heartbeat,
            f"liveness is guessed from file ages (the heartbeat is stale: {heartbeat.describe(now_ms)}, "
            f"expected every {heartbeat.interval_s:g}s; the query may have been killed)",
        )
    if newest_batch_ms is None or heartbeat.written_ms >= newest_batch_ms:
        return Judgement(Liveness.STOPPED, heartbeat, heartbeat.describe(now_ms))
    return Judgement(
        Liveness.GUESS,
        heartbeat,
        f"liveness is guessed from file ages (batch files were written after the last heartbeat, "
        f"{heartbeat.describe(now_ms)}: a run without the toolkit's listener)",
    )


def heartbeat_json(heartbeat: Heartbeat) -> str:
    return json.dumps(
        {
            "format": HEARTBEAT_FORMAT,
            "query_id": heartbeat.query_id,
            "run_id": heartbeat.run_id,
            "state": heartbeat.state,
            "interval_s": heartbeat.interval_s,
            "written_ms": heartbeat.written_ms,
            "host": heartbeat.host,
            "pid": heartbeat.pid,
        },
        indent=2,
    )


def parse_heartbeat(data: bytes, where: str) -> Heartbeat:
    """The record in ``data``; CheckpointFormatError naming ``where`` and the field otherwise."""
    try:
        v = json.loads(data.decode("utf-8"))
        if not isinstance(v, dict):
            raise ValueError("not a JSON object")
        if v.get("format") != HEARTBEAT_FORMAT:
            raise ValueError(f"format {v.get('format')!r}, expected {HEARTBEAT_FORMAT}")
        for name in ("query_id", "run_id", "host"):
            if not isinstance(v.get(name), str) or not v[name]:
                raise ValueError(f"{name} is not a non-empty string")
        if v.get("state") not in STATES:
            raise ValueError(f"state {v.get('state')!r} is not one of {', '.join(STATES)}")
        interval = v.get("interval_s")
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not math.isfinite(interval):
            raise ValueError("interval_s is not a number")
        if interval < 0:
            raise ValueError("interval_s is negative")
        for name in ("written_ms", "pid"):
            if isinstance(v.get(name), bool) or not isinstance(v.get(name), int) or v[name] < 0:
                raise ValueError(f"{name} is not a non-negative integer")
        return Heartbeat(
            query_id=v["query_id"],
            run_id=v["run_id"],
            state=v["state"],
            interval_s=float(interval),
            written_ms=v["written_ms"],
            host=v["host"],
            pid=v["pid"],
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointFormatError(f"{where}: not a heartbeat record ({exc})") from None


def _store(checkpoint: str | Store, storage_options: StorageOptions | None) -> Store:
    return checkpoint if isinstance(checkpoint, Store) else Store(checkpoint, storage_options)


def write_heartbeat(
    checkpoint: str | Store,
    *,
    query_id: str,
    run_id: str,
    state: str,
    interval_s: float,
    storage_options: StorageOptions | None = None,
    now_ms: int | None = None,
) -> None:
    """Write (replace) the checkpoint's heartbeat atomically. Never raises for IO: a failure is
    logged as a warning. ``state`` is ``"running"`` or ``"terminated"`` (anything else: ValueError,
    a programming error).

    Example: ``write_heartbeat("/chk", query_id=q.id, run_id=q.runId, state="running", interval_s=10)``
    """
    if state not in STATES:
        raise ValueError(f"heartbeat state {state!r} is not one of {', '.join(STATES)}")
    record = Heartbeat(
        query_id=str(query_id),
        run_id=str(run_id),
        state=state,
        interval_s=float(interval_s),
        written_ms=int(time.time() * 1000) if now_ms is None else int(now_ms),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    try:
        # The store's confinement refuses a _recovery/ symlink leading out of the checkpoint.
        _store(checkpoint, storage_options).write_atomic(
            HEARTBEAT_FILE, heartbeat_json(record).encode("utf-8")
        )
    except Exception as exc:  # the job must go on (see the module docstring)
        log.warning(
            "could not write the heartbeat %s of query %s: %s",
            HEARTBEAT_FILE,
            query_id,
            mask_credentials(str(exc)),
        )


def read_heartbeat(
    checkpoint: str | Store, storage_options: StorageOptions | None = None
) -> Heartbeat | None:
    """The checkpoint's heartbeat; None when there is none, or (with a logged warning) when it is
    malformed. Raises StorageError when the store cannot be read at all.

    Example: ``read_heartbeat("/chk").state``
    """
    store = _store(checkpoint, storage_options)
    try:
        data = store.read(HEARTBEAT_FILE)
        return None if data is None else parse_heartbeat(data, store.display(HEARTBEAT_FILE))
    except CheckpointFormatError as exc:  # malformed, a directory, a FIFO ...: as if there were none
        log.warning("%s; ignoring it", exc)
        return None


def refuse_if_in_use(chk: Checkpoint, active_within_s: float, *, now_ms: int | None = None) -> None:
    """Raise CheckpointInUse when a query looks like it is running on this checkpoint.

    The heartbeat the toolkit's listener leaves in ``_recovery/`` decides first (:func:`judge`):
    a fresh ``running`` one refuses, a ``terminated`` one written
    after the newest batch file allows. Otherwise liveness is guessed from file ages: a running
    query writes offsets/N before each batch and commits/N after it, so a newest one younger than
    ``active_within_s`` refuses. An idle query writes no batch files, so the guess cannot prove a
    query stopped; the message (and a logged notice when allowed) says so. A batch file the
    toolkit's own last writing command rewrote (``_recovery/last-write.json``) is no sign of a
    query: a repair followed by a restore is not refused for the repair's own writes."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    newest = [f"offsets/{i}" for i in chk.offset_batch_ids[-1:]] + [
        f"commits/{i}" for i in chk.commit_batch_ids[-1:]
    ]
    ours = read_last_write(chk.store)
    ages: list[tuple[str, int]] = []
    for rel in newest:
        modified_ms = chk.store.modified_ms(rel)
        if modified_ms is None:
            continue  # a store that cannot say: nothing to go on
        if ours is not None and rel in ours.files and modified_ms <= ours.finished_ms + OWN_WRITE_SLACK_MS:
            continue  # rewritten by the toolkit itself, under this same check (or --force)
        ages.append((rel, modified_ms))
    verdict = judge(read_heartbeat(chk.store), max((m for _, m in ages), default=None), now_ms)
    heartbeat = chk.store.display(HEARTBEAT_FILE)
    if verdict.liveness is Liveness.RUNNING:
        assert verdict.heartbeat is not None
        raise CheckpointInUse(
            f"{heartbeat}: {verdict.note} (fresh for {verdict.heartbeat.fresh_for_s:.0f}s): the query is "
            "running. Stop it first, or pass `force=True` if it is stopped. Nothing was written."
        )
    if verdict.liveness is Liveness.STOPPED:
        log.info("%s: %s; the query is stopped", heartbeat, verdict.note)
        return
    if active_within_s <= 0:
        return  # the heartbeat alone decides (the pre-start gate: its own query is not started yet)
    for rel, modified_ms in ages:
        age = (now_ms - modified_ms) / 1000.0
        if age < active_within_s:
            raise CheckpointInUse(
                f"{chk.store.display(rel)} was written {age:.0f}s ago: the query looks like it is running "
                f"({verdict.note}). Stop it first, or pass `force=True` if it is stopped. Nothing was "
                "written."
            )
    log.warning(
        "%s: no batch file written in the last %.0fs, taken as stopped; %s",
        chk.store.display(),
        active_within_s,
        verdict.note,
    )
