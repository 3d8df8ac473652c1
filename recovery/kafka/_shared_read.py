"""What a read-to-end shares with its helper processes (private to the reader and its helpers).

Reading is bound by one core: librdkafka fetches and parses on its own threads, but every record
becomes a Python ``Message`` on the interpreter's one thread (about a microsecond each, most of a
read's CPU). A read of many records for the summary alone (:meth:`recovery.kafka.read.LogReader.run`)
is therefore split: the partitions go in :func:`groups` to ``python -m recovery.kafka.read_helper``
processes, each reading its group from the position the parent's snapshot gave to the snapshot end
with the very same code (a LogReader whose states are given), while the parent reads the first
group. Each partition is read by one process, so every property of a read holds per partition as
before (read_committed, control records, records deleted under the reader). Nothing is committed
anywhere.

Here are the pieces :mod:`recovery.kafka.read` needs to share a read, so the imports run one way
(this module <- ``read`` <- ``read_helper``, the helper's program, which runs a LogReader):

* :class:`ReadState`: one partition's progress, the reader's own and what crosses the pipes;
* :func:`worth`, :func:`worth_sharing`, :func:`groups`: how a read is split;
* :class:`Helper`: the parent's handle on one helper process.

The parent talks to a helper over pipes, never argv or the environment (the Kafka settings may hold
passwords): one JSON line on stdin (the job), then stdin stays open, and its end (the parent gone,
even by ``kill -9``) ends the helper. On stdout, while reading when progress is wanted,
``{"covered": N}`` lines, then one ``{"states": [...]}`` or ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field

from recovery import errors
from recovery.core.model import Isolation, JsonObject, OffsetRange, TopicPartition
from recovery.errors import KafkaError, KafkaUnavailable, RecoveryError
from recovery.kafka._errors import scrub
from recovery.kafka._retry import Deadline
from recovery.kafka.config import KafkaConfig
from recovery.kafka.values import PartitionRead


@dataclass
class ReadState:
    """Mutable progress of one partition (counted per run of records, kept out of the frozen value)."""

    tp: TopicPartition
    start: int
    end: int
    position: int
    done: bool = False
    records: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    gaps: list[OffsetRange] = field(default_factory=list)

    def count(self, stamps: list[int]) -> None:
        """Add a run of records, given their timestamps (-1: none)."""
        self.records += len(stamps)
        lo, hi = min(stamps), max(stamps)
        if lo < 0:
            known = [ts for ts in stamps if ts >= 0]
            if not known:
                return
            lo = min(known)
        if hi < 0:
            return
        self.min_ts = lo if self.min_ts is None else min(self.min_ts, lo)
        self.max_ts = hi if self.max_ts is None else max(self.max_ts, hi)

    def freeze(self) -> PartitionRead:
        return PartitionRead(
            self.tp, self.start, self.end, self.records, self.min_ts, self.max_ts, tuple(self.gaps)
        )

    def as_json(self) -> JsonObject:
        """For a helper process (:meth:`Helper.start`) and back (:meth:`from_json`)."""
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "start": self.start,
            "end": self.end,
            "position": self.position,
            "done": self.done,
            "records": self.records,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "gaps": [[gap.start, gap.end] for gap in self.gaps],
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> ReadState:
        return cls(
            TopicPartition(str(data["topic"]), int(data["partition"])),
            int(data["start"]),
            int(data["end"]),
            int(data["position"]),
            done=bool(data["done"]),
            records=int(data["records"]),
            min_ts=data["min_ts"],
            max_ts=data["max_ts"],
            gaps=[OffsetRange(int(lo), int(hi)) for lo, hi in data["gaps"]],
        )


# A helper pays an interpreter's start and a connection (~0.3 s here) and earns it back at about a
# microsecond per record it takes off the parent: worth it from a few hundred thousand records each.
OFFSETS_PER_PROCESS = 250_000
MAX_PROCESSES = 4


def worth(left: Mapping[TopicPartition, int]) -> int:
    """How many processes a read of ``left`` offsets per partition is worth sharing among: one per
    :data:`OFFSETS_PER_PROCESS`, no more than the cores this process may use or the partitions."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, len(left), MAX_PROCESSES, sum(left.values()) // OFFSETS_PER_PROCESS))


def worth_sharing(left: Mapping[TopicPartition, int]) -> list[list[TopicPartition]]:
    """:func:`groups` for :func:`worth` processes, a group too small to pay for its helper's start
    (under half of :data:`OFFSETS_PER_PROCESS`) read by the parent instead."""
    shares = groups(left, worth(left))
    small = [group for group in shares[1:] if sum(left[tp] for tp in group) < OFFSETS_PER_PROCESS // 2]
    if not small:
        return shares
    first = sorted([*shares[0], *(tp for group in small for tp in group)])
    return [first, *(group for group in shares[1:] if group not in small)]


def groups(left: Mapping[TopicPartition, int], processes: int) -> list[list[TopicPartition]]:
    """``left``'s partitions in ``processes`` groups of about equal offsets (largest first, each to
    the lightest group), the heaviest group first; empty groups are dropped."""
    count = max(1, processes)
    loads: list[int] = [0] * count
    members: list[list[TopicPartition]] = [[] for _ in range(count)]
    for tp in sorted(left, key=lambda tp: (-left[tp], tp)):
        lightest = min(range(count), key=loads.__getitem__)
        loads[lightest] += left[tp]
        members[lightest].append(tp)
    heaviest_first = sorted((i for i in range(count) if members[i]), key=lambda i: -loads[i])
    return [sorted(members[i]) for i in heaviest_first]


class Helper:
    """One helper process and what it has said."""

    def __init__(
        self, process: subprocess.Popen[str], partitions: Sequence[TopicPartition], config: KafkaConfig
    ):
        self.process = process
        self.partitions = frozenset(partitions)
        self.config = config
        self.covered = 0  # offsets of its partitions behind it, as last reported
        self._answer: JsonObject | None = None
        self._listener = threading.Thread(target=self._listen, name="read-helper", daemon=True)
        self._listener.start()

    @classmethod
    def start(
        cls,
        config: KafkaConfig,
        isolation: Isolation,
        states: Sequence[ReadState],
        deadline: Deadline,
        *,
        progress: bool,
    ) -> Helper:
        """Start a helper reading ``states`` until ``deadline`` (the parent's, to the instant).
        Raises OSError when no process can be started."""
        if not sys.executable:
            raise OSError("no Python interpreter to start (sys.executable is empty)")
        job = {
            "bootstrap_servers": config.bootstrap_servers,
            "properties": dict(config.properties),
            "timeout_s": config.timeout_s,
            "isolation": isolation.value,
            "deadline_s": deadline.seconds,  # for messages: the deadline the user gave
            "deadline_at": deadline.at,  # time.monotonic() is one clock for every process here
            "progress": progress,
            "states": [state.as_json() for state in states],
        }
        process = subprocess.Popen(
            # -P: the working directory is not put on sys.path (a recovery/ there is not ours).
            [sys.executable, "-P", "-m", "recovery.kafka.read_helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # librdkafka's own logging is off (log_level 0); nothing else
            text=True,
            start_new_session=True,  # Ctrl-C is the parent's to handle: it stops its helpers
        )
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()  # stdin stays open: its end tells the helper the parent is gone
            return cls(process, [state.tp for state in states], config)
        except BaseException:
            process.kill()
            process.wait()
            raise

    def _listen(self) -> None:
        assert self.process.stdout is not None
        try:
            for line in self.process.stdout:
                try:
                    said = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(said, dict):
                    continue
                if "covered" in said:
                    self.covered = int(said["covered"])
                else:
                    self._answer = said
        except (OSError, ValueError, TypeError):  # the pipe closed under us (stop), or nonsense
            return

    def check(self) -> None:
        """Raise the helper's error now if it has already met one (the parent need not finish its
        own group first)."""
        answer = self._answer
        if answer is not None and "error" in answer:
            self._raise(answer)

    def finish(self, deadline: Deadline, report: Callable[[], None]) -> dict[TopicPartition, ReadState]:
        """Wait for the helper's answer (reporting progress meanwhile): the states of its
        partitions, each read to its end, or the error it met, raised here as the same class with
        the same message."""
        while self._listener.is_alive() and not deadline.expired():
            self._listener.join(0.2)
            report()
        self._listener.join(5.0)  # the helper has the same deadline: its answer is due by now
        answer = self._answer
        if answer is None:
            if deadline.expired():
                raise KafkaUnavailable(
                    f"read-to-end did not reach the end within {deadline.seconds:g}s: "
                    f"{len(self.partitions)} partition(s) read by a helper process gave no answer"
                    f" ({', '.join(sorted(map(str, self.partitions))[:5])}); try again with a longer"
                    " deadline (`deadline_s`)"
                )
            raise KafkaError(
                f"a helper process reading {len(self.partitions)} partition(s) to the end ended without"
                f" an answer (exit {self.process.poll()})"
            )
        if "error" in answer:
            self._raise(answer)
        try:
            states = {state.tp: state for state in map(ReadState.from_json, answer["states"])}
        except (KeyError, TypeError, ValueError):
            states = {}
        if set(states) != self.partitions or not all(state.done for state in states.values()):
            raise KafkaError(
                "a helper process reading to the end gave an answer that does not cover its partitions"
            )
        self.covered = sum(min(s.position, s.end) - s.start for s in states.values())
        return states

    def _raise(self, answer: JsonObject) -> None:
        said = answer["error"] if isinstance(answer["error"], dict) else {}
        message = scrub(str(said.get("message", "a helper process failed")), self.config)
        kind = getattr(errors, str(said.get("type")), None)
        if isinstance(kind, type) and issubclass(kind, RecoveryError):
            try:
                error = kind(message)
            except TypeError:  # an error class with a constructor of its own
                error = KafkaError(message)
        else:
            error = KafkaError(message)
        raise error

    def stop(self) -> None:
        """End the helper: closing its stdin tells one that answered to go; one that did not (the
        read failed or was interrupted) is killed. Then its pipes."""
        if self.process.stdin is not None:
            with suppress(OSError):
                self.process.stdin.close()
        if self._answer is None and self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._listener.join(5.0)  # it reads to the pipe's end, which the helper's exit makes
        if self.process.stdout is not None:
            with suppress(OSError):
                self.process.stdout.close()
