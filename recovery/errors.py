"""
The one exception hierarchy of stream-recovery. Callers only ever see a ``RecoveryError``; the edge
that talks to a third-party library translates that library's exceptions (``raise ... from exc``).

* RecoveryError
  x InvalidInput            bad flag, unreadable or malformed file            -> exit 2
  x StateError              the world is not in a state we can act on        -> exit 1
  x ExternalError           a system we talk to failed or cannot be reached  -> exit 3
    + RigError              the embedded Kafka broker or Spark rig failed to start

Messages are written for a person at 3 a.m.: what happened, which file/field/partition, what to do.
They never contain secrets.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of the ``stream-recovery`` CLI (documented in the README)."""

    OK = 0
    ACTION_NEEDED = 1  # findings that need action, or a change refused by policy
    INVALID_INPUT = 2  # bad invocation or malformed input; nothing was written
    UNREACHABLE = 3  # Kafka, storage or another external system failed


class RecoveryError(Exception):
    """Base class of every error the library raises on purpose."""

    exit_code: ExitCode = ExitCode.ACTION_NEEDED


class InvalidInput(RecoveryError):
    exit_code = ExitCode.INVALID_INPUT


class StateError(RecoveryError):
    exit_code = ExitCode.ACTION_NEEDED


class ExternalError(RecoveryError):
    exit_code = ExitCode.UNREACHABLE


class RigError(ExternalError):
    """The embedded test/demo rig (``recovery.local``) could not start or stopped unexpectedly."""
