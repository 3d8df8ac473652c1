"""Runbook pages as executable transcripts, parsed with Sybil (https://github.com/simplistix/sybil).

A page shows commands in fenced ``console`` blocks, the way an operator types them::

    ```console
    $ stream-recovery validate /chk/orders -b kafka:9092      # exit 1: action needed
    orders  0  100  110  …  BELOW_LOG_START  …  10
    ```

* ``$ `` starts a command; only ``stream-recovery`` commands are allowed (a trailing ``\\`` continues
  the line). A comment saying ``exit N`` is the exit code the page promises; without one it is 0.
* The lines under a command are lines its output (stdout and stderr, as a terminal shows them)
  must contain, in that order. Whitespace runs compare equal (tables align to the data), ``…``
  stands for any text, and ``<name>`` captures a word that later commands use as ``<name>``
  (``--backup <id>``).
* Placeholders operators know (``/chk/orders``, ``kafka:9092``, ``orders``) are mapped to the real
  checkpoint, bootstrap server and topic of the failure the test made, and back in the output.
* Steps that are not commands of ours (Spark failing, restarting the query) are hidden HTML
  comments, ``<!-- runbook-test: restart -->``, performed by the test's incident (tests/runbooks/
  incidents.py) at that point of the page.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
PROGRAM = "stream-recovery"
HOOK = "runbook-test"
EXIT = re.compile(r"\bexit (\d+)\b")
SHOW = "RUNBOOK_SHOW"  # set it to print every command's output, to write a page's promised lines
CAPTURE = re.compile(r"<([a-z][a-z0-9_-]*)>")


@dataclass(frozen=True)
class Command:
    """One ``$`` line of a console block and the output lines the page promises for it."""

    line: str  # as written, without the ``$ `` and the comment
    exit_code: int
    promised: tuple[str, ...]
    lineno: int  # in the page


@dataclass(frozen=True)
class Hook:
    """A hidden step: ``<!-- runbook-test: ACTION ARG... -->``."""

    action: str
    args: tuple[str, ...]


def split_comment(line: str) -> tuple[str, str]:
    """``cmd args   # comment`` -> (``cmd args``, ``comment``); a ``#`` inside quotes is kept."""
    quote: str | None = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def parse_console(source: str, first_line: int = 1) -> list[Command]:
    """The commands of one console block (``first_line``: the page line of its first line)."""
    commands: list[Command] = []
    pending: list[str] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        if not raw.startswith("$ "):
            if raw.strip():
                if not commands:
                    raise ValueError(f"line {first_line + i}: output before any `$ ` command: {raw!r}")
                pending.append(raw)
            i += 1
            continue
        start = i
        text = raw[2:]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):  # a continued command
            i += 1
            text = text.rstrip()[:-1].rstrip() + " " + lines[i].strip()
        if commands:
            commands[-1] = _with_promised(commands[-1], pending)
            pending = []
        command, comment = split_comment(text)
        if shlex.split(command)[:1] != [PROGRAM]:
            raise ValueError(f"line {first_line + start}: only `{PROGRAM}` commands run here: {command!r}")
        found = EXIT.search(comment)
        commands.append(Command(command, int(found.group(1)) if found else 0, (), first_line + start))
        i += 1
    if commands:
        commands[-1] = _with_promised(commands[-1], pending)
    return commands


def _with_promised(command: Command, lines: list[str]) -> Command:
    return Command(command.line, command.exit_code, tuple(lines), command.lineno)


def promise_pattern(line: str) -> re.Pattern[str]:
    """A promised line as a regex over a whitespace-normalised output line (``…`` also absorbs the
    spaces around it, so ``HEADER …`` matches a header that gained columns, or none)."""
    parts = []
    normal = re.sub(r"\s*…\s*", "…", " ".join(line.split()))
    for piece in re.split(r"(…|<[a-z][a-z0-9_-]*>)", normal):
        if piece == "…":
            parts.append(".*?")
        elif CAPTURE.fullmatch(piece):
            parts.append(f"(?P<{piece[1:-1].replace('-', '_')}>\\S+)")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def match_promised(promised: tuple[str, ...], output: str) -> tuple[dict[str, str], str | None]:
    """Find the promised lines in ``output``, in order. Returns (captures, failure or None)."""
    actual = [" ".join(line.split()) for line in output.splitlines()]
    captures: dict[str, str] = {}
    at = 0
    for line in promised:
        pattern = promise_pattern(line)
        for j in range(at, len(actual)):
            found = pattern.fullmatch(actual[j])
            if found:
                captures.update(found.groupdict())
                at = j + 1
                break
        else:
            return captures, f"promised line not found (in order): {line.strip()!r}"
    return captures, None


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace whole placeholders (``/chk/orders``, ``orders``, ``<id>``), longest first."""
    if not values:
        return text
    keys = sorted(values, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, keys)) + r")(?![\w.-])")
    return pattern.sub(lambda m: values[m.group(1)], text)


def unsubstitute(text: str, values: Iterable[tuple[str, str]]) -> str:
    """The output as the page shows it: real paths, servers and topic names back to placeholders
    (``values``: (placeholder, real) pairs)."""
    for placeholder, real in sorted(values, key=lambda kv: len(kv[1]), reverse=True):
        if real and placeholder != real and not CAPTURE.fullmatch(placeholder):
            text = text.replace(real, placeholder)
    return text


def program() -> list[str]:
    """The console script installed next to this interpreter (what operators run), else -m."""
    script = Path(sys.executable).with_name(PROGRAM)
    return [str(script)] if script.exists() else [sys.executable, "-m", "recovery"]


@dataclass
class Session:
    """What one page's run knows: placeholder values, the incident's hidden steps, what ran."""

    values: dict[str, str]
    hooks: Mapping[str, Callable[..., None]]
    aliases: list[tuple[str, str]] = field(default_factory=list)  # more (placeholder, real) to show
    ran: list[str] = field(default_factory=list)

    def run(self, command: Command) -> str | None:
        argv = shlex.split(substitute(command.line, self.values))
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
        env |= {"PYTHONUNBUFFERED": "1", "COLUMNS": "200", "NO_COLOR": "1"}
        done = subprocess.run(
            [*program(), *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows it
            text=True,
            env=env,
            timeout=300,
        )
        output = unsubstitute(done.stdout, [*self.aliases, *self.values.items()])
        self.ran.append(f"line {command.lineno}: $ {command.line}")
        if os.environ.get(SHOW):  # writing a page: see what each command prints (pytest -s)
            print(f"$ {command.line}\n{output}[exit {done.returncode}]\n")
        if done.returncode != command.exit_code:
            return f"$ {command.line}\nexit {done.returncode}, the page says {command.exit_code}:\n{output}"
        captures, failure = match_promised(command.promised, output)
        if failure:
            return f"$ {command.line}\n{failure}\noutput:\n{output}"
        # a captured value is kept as the real thing (a topic name inside a JSON answer, say)
        self.values.update({f"<{k}>": substitute(v, self.values) for k, v in captures.items()})
        return None

    def perform(self, hook: Hook) -> None:
        if hook.action not in self.hooks:
            raise AssertionError(f"no hidden step {hook.action!r}: this incident has {sorted(self.hooks)}")
        self.hooks[hook.action](*(substitute(a, self.values) for a in hook.args))
        self.ran.append(f"{HOOK}: {hook.action} {' '.join(hook.args)}".rstrip())


def _session(example: Example) -> Session:
    session = example.namespace.get("session")
    assert isinstance(session, Session), "evaluate a runbook through tests/runbooks/transcript.run_page"
    return session


def evaluate_console(example: Example) -> str | None:
    session = _session(example)
    for command in example.parsed:
        failure = session.run(command)
        if failure:
            return failure
    return None


def evaluate_hook(example: Example) -> str | None:
    _session(example).perform(example.parsed)
    return None


class ConsoleParser:
    """Fenced ``console`` blocks -> lists of :class:`Command`."""

    lexer = FencedCodeBlockLexer("console")

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexer(document):
            source = region.lexemes["source"]
            first = document.text.count("\n", 0, region.start) + 2  # the line after the fence
            region.parsed = parse_console(str(source), first)
            region.evaluator = evaluate_console
            yield region


class HookParser:
    """``<!-- runbook-test: ACTION ARG... -->`` -> :class:`Hook`."""

    lexer = DirectiveInHTMLCommentLexer(HOOK)

    def __call__(self, document: Document) -> Iterator[Region]:
        for region in self.lexer(document):
            words = shlex.split(region.lexemes["arguments"])
            if not words:
                raise ValueError(f"{document.path}: `<!-- {HOOK}: -->` without an action")
            region.parsed = Hook(words[0], tuple(words[1:]))
            region.evaluator = evaluate_hook
            yield region


def parse_page(path: Path) -> Document:
    return Document.parse(str(path), ConsoleParser(), HookParser())


def run_page(path: Path, session: Session) -> list[str]:
    """Evaluate every console block and hidden step of the page in order; what ran, one per line."""
    document = parse_page(path)
    document.namespace["session"] = session
    examples = list(document)
    for example in examples:
        example.evaluate()
    commands = [c for e in examples if isinstance(e.parsed, list) for c in e.parsed]
    ran = [line for line in session.ran if line.startswith("line ")]
    assert len(ran) == len(commands), (ran, commands)  # every block of the page ran, none twice
    return session.ran
