"""The CLI's words for the library's parameters.

The library names a bad value by the Python parameter it was passed as (``runway_warn_s must be
positive``, ``scope ordrs: the checkpoint reads no such topic``) and says which in the error's
``parameter`` (:mod:`recovery.errors`). A CLI user passed a flag, not a parameter: the error
boundary (:func:`recovery.cli.run`) prints such a message with the flag in its place
(:func:`in_flag_words`). Where the CLI calls a parser itself it passes the flag as the parser's
``name`` instead, and checks that name several options at once (``--source`` without
``--from-checkpoint``) are made before the library is called.

Advice in the library's messages and notes is Python in backquotes: a parameter (`` `backup_dir` ``),
a keyword argument (`` `force=True` ``) or a call (`` `recover_interrupted('/chk', execute=True)` ``).
Everything the CLI prints says it as a command line instead (:func:`in_cli_words`): ``--backup-dir``,
``--force``, `` `stream-recovery checkpoint recover /chk --execute` ``.
"""

from __future__ import annotations

from recovery.core.advice import in_words
from recovery.errors import RecoveryError

# Python parameter (or a field of a value the CLI builds from its options) -> the flag that sets
# it. One meaning per key across the library: a key here is the same flag in every command.
FLAGS: dict[str, str] = {
    "accept_sink_skip": "--accept-sink-skip",
    "adopt_new_table": "--adopt-new-table",
    "backup_dir": "--backup-dir",
    "backup_id": "--backup",
    "bootstrap_servers": "--bootstrap-server",
    "by_duration": "--by-duration",
    "deadline_s": "--deadline",
    "delta_tables": "--delta-table",
    "execute": "--execute",
    "force": "--force",
    "from_file": "--from-file",
    "interval_s": "--interval",
    "keep_s": "--keep",
    "kind": "--strategy",  # StrategyRequest.kind
    "max_extra_bytes": "--max-extra-bytes",
    "max_retention_s": "--max-retention",
    "min_free_ratio": "--min-free-ratio",
    "no_match": "--no-match",
    "now": "--now",
    "on_beyond_end": "--on-beyond-end",
    "overrides": "-X",  # KafkaConfig.from_options(overrides=...)
    "parallel": "--parallel",
    "pipeline": "--pipeline",
    "real_time": "--real-time",
    "runway_warn_s": "--runway-warn",
    "scope": "--topic",  # StrategyRequest.scope
    "shard": "--shard",
    "shift_by": "--shift-by",
    "sink": "--sink",
    "source_id": "--source",
    "spark_version": "--spark-version",
    "tables": "--table",
    "take_over": "--take-over",
    "to_datetime": "--to-datetime",
    "to_offset": "--to-offset",
    "topics": "--topic",
    "why": "--why",
}

# The library's functions the advice may name -> the command that calls each.
COMMANDS: dict[str, str] = {
    "hold_retention": "stream-recovery retention hold",
    "inspect_checkpoint": "stream-recovery checkpoint show",
    "plan_delta_source": "stream-recovery delta-source validate",
    "plan_repair": "stream-recovery repair",
    "recover_interrupted": "stream-recovery checkpoint recover",
    "repair_checkpoint": "stream-recovery repair",
    "repair_delta_source": "stream-recovery delta-source repair",
    "repair_ledger": "stream-recovery ledger repair",
    "release_retention": "stream-recovery retention release",
    "restore_backup": "stream-recovery checkpoint restore",
    "starting_offsets": "stream-recovery starting-offsets",
    "validate_checkpoint": "stream-recovery validate",
}


def in_flag_words(exc: RecoveryError) -> str:
    """``exc``'s message as a CLI user reads it: when it starts with the parameter it names, the
    flag stands there instead; its advice is said as command lines (:func:`in_cli_words`).

    >>> from recovery.errors import InvalidInput
    >>> in_flag_words(InvalidInput("parallel must be at least 1, not 0", parameter="parallel"))
    '--parallel must be at least 1, not 0'
    """
    return in_cli_words(exc.worded(FLAGS))


def in_cli_words(text: str) -> str:
    """``text`` with each piece of Python advice in backquotes said as the CLI says it. Quoted text
    that is not a parameter, keyword argument or call of the library stays as it is.

    >>> in_cli_words("Stop it first, or pass `force=True` if it is stopped.")
    'Stop it first, or pass --force if it is stopped.'
    >>> in_cli_words("run `recover_interrupted('/data/chk', take_over=True, execute=True)`")
    'run `stream-recovery checkpoint recover /data/chk --take-over --execute`'
    >>> in_cli_words("give `delta_tables={'1': 'TABLE'}`, or name it with `backup_dir`")
    'give --delta-table 1=TABLE, or name it with --backup-dir'
    """
    return in_words(text, FLAGS, COMMANDS)
