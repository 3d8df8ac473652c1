"""Advice in a caller's words (pure).

The library's messages and notes give advice as Python in backquotes: a parameter (`` `backup_dir` ``),
a keyword argument (`` `force=True` ``) or a call (`` `recover_interrupted('/chk', execute=True)` ``),
so a Python caller reads what to pass. A command line (the CLI, a job) says the same advice in its
own flags and commands with :func:`in_words`; its tables are its own (``recovery.cli.flags``).
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping

_QUOTED = re.compile(r"`([^`\n]+)`")


def in_words(text: str, flags: Mapping[str, str], commands: Mapping[str, str]) -> str:
    """``text`` with each piece of Python advice in backquotes said with ``flags`` (parameter ->
    flag) and ``commands`` (function -> command line). Quoted text that is not a parameter, keyword
    argument or call these name stays as it is.

    >>> words = {"force": "--force", "take_over": "--take-over", "execute": "--execute"}
    >>> in_words("or pass `force=True` if it is stopped", words, {})
    'or pass --force if it is stopped'
    >>> in_words("run `recover(\'/chk\', take_over=True, execute=True)`", words, {"recover": "tool recover"})
    'run `tool recover /chk --take-over --execute`'
    """
    if "`" not in text:
        return text
    return _QUOTED.sub(lambda match: _said(match, flags, commands), text)


def _said(match: re.Match[str], flags: Mapping[str, str], commands: Mapping[str, str]) -> str:
    python = match.group(1)
    try:
        said = _command_line(ast.parse(python).body, flags, commands)
    except SyntaxError:
        said = None
    return match.group(0) if said is None else said


def _command_line(
    statements: list[ast.stmt], flags: Mapping[str, str], commands: Mapping[str, str]
) -> str | None:
    """A parameter or ``name=value`` -> its flag; a call of the library -> its command line, in
    backquotes; None for anything else."""
    if len(statements) != 1:
        return None
    statement = statements[0]
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return _option(target.id, statement.value, flags) if isinstance(target, ast.Name) else None
    if not isinstance(statement, ast.Expr):
        return None
    node = statement.value
    if isinstance(node, ast.Name):  # a parameter, or a function holding a lock (restore_backup)
        command = commands.get(node.id)
        return flags.get(node.id) if command is None else f"`{command}`"
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in commands):
        return None
    words = [commands[node.func.id]]
    for arg in node.args:
        if isinstance(arg, ast.Name):
            continue  # an object a Python caller builds (kafka, conf): options of its own on the CLI
        value = _value(arg)
        if value is None:
            return None
        words.append(value)
    for keyword in node.keywords:
        option = _option(keyword.arg, keyword.value, flags) if keyword.arg else None
        if option is None:
            return None
        words += [option] if option else []
    return "`" + " ".join(words) + "`"


def _option(parameter: str, node: ast.expr, flags: Mapping[str, str]) -> str | None:
    """``parameter=node`` as options: True -> the flag; a mapping -> one ``flag key=value`` each."""
    flag = flags.get(parameter)
    if flag is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return flag if node.value else ""
    if isinstance(node, ast.Dict):
        pairs = [(_value(k) if k else None, _value(v)) for k, v in zip(node.keys, node.values, strict=True)]
        if any(k is None or v is None for k, v in pairs):
            return None
        return " ".join(f"{flag} {k}={v}" for k, v in pairs)
    value = _value(node)
    return None if value is None else f"{flag} {value}"


def _value(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return "..."
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
        return shlex.quote(str(node.value))
    return None
