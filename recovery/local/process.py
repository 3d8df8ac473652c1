"""The rig's child processes (broker, Spark master and worker): launched to die with their parent,
stopped politely first."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess


def die_with_parent() -> list[str]:
    """A command prefix giving the child ``PR_SET_PDEATHSIG=SIGKILL`` (util-linux ``setpriv``), so it
    dies with the Python process that started it even on SIGKILL; empty where setpriv is missing.
    The signal comes when the *thread* that started the child ends: start it from one that lasts."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


def terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM (after SIGCONT: a paused JVM cannot run its shutdown hooks), 20 s, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
