"""Domain values shared across the toolkit: frozen, typed, compared with ``==``.

This module imports only the standard library (a structural test checks it), so the planning core
can use it without pulling in any IO.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic} [{self.partition}]"


@dataclass(frozen=True)
class OffsetRange:
    """What a partition still holds: offsets ``start`` (log start) up to ``end`` (exclusive)."""

    start: int  # log start offset (ListOffsets "earliest")
    end: int  # high watermark, or the last stable offset under read_committed

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"not an offset range: [{self.start}, {self.end})")

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.start <= offset <= self.end

    @property
    def size(self) -> int:
        return self.end - self.start
