"""Which partitions a :class:`~recovery.core.model.TopicSelection` names on a cluster (pure: no IO).

Partitions named one by one (``orders:0,7``) are kept even when they do not exist, so the answer can
say PARTITION_GONE / TOPIC_GONE instead of leaving them out (kafka-get-offsets leaves them out). A
plain topic name that does not exist, or a selection that matches nothing, is TopicNotFound.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from recovery.core.model import TopicPartition, TopicPattern, TopicSelection
from recovery.errors import TopicNotFound

# A regex that can only match itself: a topic name (letters, digits, '_', '-', dot-separated).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
# A name without '.', so it is a regex that matches nothing but itself.
_LITERAL = re.compile(r"[A-Za-z0-9_-]+")
# Explicit partition lists longer than this are treated as ranges over the existing partitions.
_MAX_EXPLICIT = 10_000


class Topic(Protocol):
    """What the selection needs of a topic: a :class:`~recovery.kafka.values.TopicInfo` (described)
    or a :class:`~recovery.kafka.values.ListedTopic` (listed)."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> int: ...
    @property
    def internal(self) -> bool: ...


def is_topic_name(regex: str) -> bool:
    return _TOPIC_NAME.fullmatch(regex) is not None


def exact_names(selection: TopicSelection) -> frozenset[str] | None:
    """The topic names a selection can match when every item is a literal name (letters, digits,
    '_' and '-': a regex that matches only itself); None when some item needs the topic listing."""
    if not selection.patterns or not all(_LITERAL.fullmatch(p.regex) for p in selection.patterns):
        return None
    return frozenset(p.regex for p in selection.patterns)


def explicit_partitions(pattern: TopicPattern) -> tuple[int, ...] | None:
    """The partitions a ``topic:N,M`` item names one by one; None if it is a regex or open range."""
    if not is_topic_name(pattern.regex) or not pattern.partitions:
        return None
    if any(r.hi is None or r.hi - r.lo > _MAX_EXPLICIT for r in pattern.partitions):
        return None
    return tuple(sorted({p for r in pattern.partitions for p in range(r.lo, r.hi or r.lo)}))


def selected_partitions(
    selection: TopicSelection, infos: Mapping[str, Topic], cluster: str
) -> tuple[TopicPartition, ...]:
    """The partitions ``selection`` names among the topics ``infos`` describes (the topics it
    matched), plus the explicitly named ones that do not exist; sorted. ``cluster`` names the
    cluster in messages."""
    wanted: set[TopicPartition] = set()
    for info in infos.values():
        # Each pattern's regex is matched once per topic, not once per partition.
        if info.internal and selection.exclude_internal:
            continue
        hits = [p for p in selection.patterns if p.matches_topic(info.name)]
        if any(not p.partitions for p in hits):
            numbers: Iterable[int] = range(info.partitions)
        else:
            numbers = (n for n in range(info.partitions) if any(n in r for p in hits for r in p.partitions))
        wanted.update(TopicPartition(info.name, n) for n in numbers)
    for pattern in selection.patterns:
        explicit = explicit_partitions(pattern)
        if explicit is not None:
            wanted.update(TopicPartition(pattern.regex, p) for p in explicit)
        elif is_topic_name(pattern.regex) and pattern.regex not in infos:
            raise TopicNotFound(f"topic {pattern.regex} does not exist on the cluster at {cluster}")
    if not wanted:
        regexes = ", ".join(p.regex for p in selection.patterns)
        raise TopicNotFound(f"no partition of the cluster at {cluster} matches {regexes}")
    return tuple(sorted(wanted, key=lambda tp: (tp.topic, tp.partition)))  # C-level tuple compares
