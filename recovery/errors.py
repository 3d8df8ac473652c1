"""
The one exception hierarchy of stream-recovery. Callers only ever see a ``RecoveryError``; the edge
that talks to a third-party library translates that library's exceptions (``raise ... from exc``).

* RecoveryError
  x InvalidInput            bad value, unreadable or malformed file           -> exit 2
    + CheckpointFormatError, OffsetSpecError, ConfigError, DeltaTableNotFound,
      DeltaNotInstalled     a Delta table was named, and the Delta extra is not installed
  x StateError              the world is not in a state we can act on        -> exit 1
    + CheckpointInUse, LossBudgetExceeded, SinkWouldSkip, PlanOutdated, NoOffsetForTime,
      GateFailed, LedgerGateFailed, LedgerBehindData, LedgerJobStopped, GroupActive, GroupNotOurs,
      OffsetOutsideLog
  x ExternalError           a system we talk to failed or cannot be reached  -> exit 3
    + StorageError, KafkaError (KafkaUnavailable, KafkaAccessDenied), DeltaError,
      RigError              the embedded Kafka broker or Spark rig failed to start
  (TopicNotFound is a KafkaError that exits 1: the cluster answered, and the topic is not there)

Messages are written for a person at 3 a.m.: what happened, which file/field/partition, what to do.
They are one line (a third-party library's multi-line text is joined) and never contain secrets:
every message has the credentials of URLs masked (:func:`mask_credentials`), whoever wrote it and
whatever a third-party library put in it.

Messages speak Python: a bad value is named by the parameter it was passed as (``runway_warn_s must
be positive, not -1s``; a parser's ``name`` argument, ``to_datetime 'yesterday': ...``), never by
a command-line flag. An error whose message starts with such a parameter says which in
``.parameter``, so the CLI (``recovery.cli.flags``) can say its flag there instead. Advice is Python
in backquotes (``pass `force=True` if it is stopped``), which the CLI says in its own flags and
commands (:mod:`recovery.core.advice`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import IntEnum

# scheme://user:password@host -> scheme://***@host; and a bare user:password@host, as SDKs quote a
# URL's parts in their own messages (botocore: Invalid bucket name "user:password@bucket").
_WORD_CHAR = re.compile(r"\w")
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_BARE_USERINFO = re.compile(r"(?<![\w.+%-])[^\s\"'/@:=,]+:[^\s\"'/@]+@(?=[\w\[])")


def mask_credentials(text: str) -> str:
    """``text`` with the user-info part of URLs (``user:password@``) replaced by ``***@``."""
    return _BARE_USERINFO.sub("***@", _URL_USERINFO.sub(lambda m: f"{m['scheme']}***@", text))


class ExitCode(IntEnum):
    """Exit codes of the ``stream-recovery`` CLI (documented in the README)."""

    OK = 0
    ACTION_NEEDED = 1  # findings that need action, or a change refused by policy
    INVALID_INPUT = 2  # bad invocation or malformed input; nothing was written
    UNREACHABLE = 3  # Kafka, storage or another external system failed


class RecoveryError(Exception):
    """Base class of every error the library raises on purpose. Its message never shows the
    credentials of a URL (masked here, the last place before the message is printed)."""

    exit_code: ExitCode = ExitCode.ACTION_NEEDED
    one_line = True  # the CLI prints one line per error: a library's multi-line text is joined

    def __init__(self, *args: object, parameter: str | None = None) -> None:
        super().__init__(*(self._clean(a) if isinstance(a, str) else a for a in args))
        # The Python parameter (or a parser's ``name``) the message starts with, if it starts with one.
        self.parameter = parameter or None

    def worded(self, words: Mapping[str, str]) -> str:
        """The message with the parameter it starts with said as ``words`` says it (a command line's
        flag for it); the message as it is when it names no parameter ``words`` knows.

        >>> InvalidInput("parallel must be at least 1, not 0", parameter="parallel").worded(
        ...     {"parallel": "--parallel"})
        '--parallel must be at least 1, not 0'
        """
        text, parameter = str(self), self.parameter or ""
        word, rest = words.get(parameter), text[len(parameter) :]
        if word is None or not text.startswith(parameter) or _WORD_CHAR.match(rest[:1]):
            return text  # a longer word that starts the same is not the parameter
        return word + rest

    def _clean(self, text: str) -> str:
        text = mask_credentials(text)
        return " ".join(line.strip() for line in text.splitlines() if line.strip()) if self.one_line else text


class InvalidInput(RecoveryError):
    exit_code = ExitCode.INVALID_INPUT


class StateError(RecoveryError):
    exit_code = ExitCode.ACTION_NEEDED


class ExternalError(RecoveryError):
    exit_code = ExitCode.UNREACHABLE


class RigError(ExternalError):
    """The embedded test/demo rig (``recovery.local``) could not start or stopped unexpectedly."""

    one_line = False  # carries the tail of the service's log


# -- bad input (exit 2) --------------------------------------------------------------------------


class CheckpointFormatError(InvalidInput):
    """A checkpoint file is malformed. The message names the file and what is wrong."""


class OffsetSpecError(InvalidInput):
    """An offset, time or partition spec given by the user cannot be parsed."""


class ConfigError(InvalidInput):
    """A configuration file (client properties, ``conf/``) is unreadable or invalid."""


class DeltaTableNotFound(InvalidInput):
    """No Delta table at the path (as opposed to a table that could not be read just now)."""


class DeltaNotInstalled(InvalidInput):
    """Reading or writing a Delta table needs deltalake and pyarrow, which a plain
    ``pip install stream-recovery`` leaves out (~300 MB a Kafka-only install does not use).
    ``missing`` is the top-level module that could not be imported."""

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(
            f"{missing} is not installed; Delta tables need the Delta extra: "
            "pip install 'stream-recovery[delta]'"
        )


# -- state (exit 1) ------------------------------------------------------------------------------


class CheckpointInUse(StateError):
    """The checkpoint looks in use by a running query; nothing was written."""


class LossBudgetExceeded(StateError):
    """The repair policy refuses the plan (over the loss budget, offsets unreadable now, every
    partition of a source dropped); nothing was written."""


class SinkWouldSkip(StateError):
    """A Delta sink would skip the batches a repair changes; nothing was written."""


class PlanOutdated(StateError):
    """What a plan was made from changed before it was applied; nothing was written."""


class GateFailed(StateError):
    """The checkpoint would make the query fail or lose data, and the gate's mode is ``fail``."""


class LedgerGateFailed(StateError):
    """The ledger's offsets would make the next run fail or lose data, and the gate's mode is ``fail``."""


class LedgerBehindData(StateError):
    """The pipeline's data table records a batch the ledger does not: a run died between its data
    append and its ledger append. A correction now would take that batch's id and re-read its range."""


class LedgerJobStopped(StateError):
    """The run stopped without writing the ledger: another run got there first, or the data table
    and the ledger disagree in a way only a person can settle."""


class GroupActive(StateError):
    """The group has active members: its offsets cannot be written now."""


class GroupNotOurs(StateError):
    """The group's committed offsets were not written by stream-recovery (no marker in their commit
    metadata): overwriting them needs ``force``, and a backup of them is written first."""


class OffsetOutsideLog(StateError):
    """An offset to write is below the log start offset or above the high watermark."""


# -- external systems (exit 3) -------------------------------------------------------------------


class StorageError(ExternalError):
    """Checkpoint or table storage could not be read or written."""


class KafkaError(ExternalError):
    """A Kafka request failed."""


class KafkaUnavailable(KafkaError):
    """No answer from the Kafka cluster within the deadline."""


class KafkaAccessDenied(KafkaError):
    """The cluster answered and refused: our credentials (authentication: SASL, TLS) or an ACL (the
    principal may not do that operation on that resource). Exit 3 as for an unreachable cluster
    (nothing could be read, nothing was written); the message says which, at once."""


class TopicNotFound(KafkaError):
    """A topic named by the user or a checkpoint does not exist on the cluster. The cluster
    answered, so this is not "unreachable" (3) but a state to act on (1), as the TOPIC_GONE and
    PARTITION_GONE rows of the same commands are."""

    exit_code = ExitCode.ACTION_NEEDED


class DeltaError(ExternalError):
    """A Delta table could not be read or written."""


class NoOffsetForTime(StateError):
    """No record at or after a timestamp in some partitions, and the no-match policy is ``fail``."""

    def __init__(self, partitions: tuple[object, ...], time: str) -> None:
        self.partitions = partitions
        self.time = time
        named = ", ".join(str(tp) for tp in partitions[:5]) + (
            f" and {len(partitions) - 5} more" if len(partitions) > 5 else ""
        )
        what = "no readable record" if time == "max-timestamp" else f"no record at or after {time}"
        super().__init__(
            f"no_match 'fail': {what} in {named}; 'latest' or 'earliest' would use the log end or the "
            "log start there instead",
            parameter="no_match",
        )
