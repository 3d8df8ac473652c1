"""The CLI's words for the library's parameters.

The library names a bad value by the Python parameter it was passed as (``runway_warn_s must be
positive``, ``scope ordrs: the checkpoint reads no such topic``) and says which in the error's
``parameter`` (:mod:`recovery.errors`). A CLI user passed a flag, not a parameter: the error
boundary (:func:`recovery.cli.run`) prints such a message with the flag in its place
(:func:`in_flag_words`). Where the CLI calls a parser itself it passes the flag as the parser's
``name`` instead, and checks that name several options at once (``--source`` without
``--from-checkpoint``) are made before the library is called.
"""

from __future__ import annotations

from recovery.errors import RecoveryError

# Python parameter (or a field of a value the CLI builds from its options) -> the flag that sets
# it. One meaning per key across the library: a key here is the same flag in every command.
FLAGS: dict[str, str] = {
    "backup_dir": "--backup-dir",
    "bootstrap_servers": "--bootstrap-server",
    "by_duration": "--by-duration",
    "from_file": "--from-file",
    "kind": "--strategy",  # StrategyRequest.kind
    "no_match": "--no-match",
    "on_beyond_end": "--on-beyond-end",
    "overrides": "-X",  # KafkaConfig.from_options(overrides=...)
    "parallel": "--parallel",
    "pipeline": "--pipeline",
    "runway_warn_s": "--runway-warn",
    "scope": "--topic",  # StrategyRequest.scope
    "shift_by": "--shift-by",
    "source_id": "--source",
    "to_datetime": "--to-datetime",
    "to_offset": "--to-offset",
    "topics": "--topic",
}


def in_flag_words(exc: RecoveryError) -> str:
    """``exc``'s message as a CLI user reads it: when it starts with the parameter it names, the
    flag stands there instead.

    >>> from recovery.errors import InvalidInput
    >>> in_flag_words(InvalidInput("parallel must be at least 1, not 0", parameter="parallel"))
    '--parallel must be at least 1, not 0'
    """
    return exc.worded(FLAGS)
