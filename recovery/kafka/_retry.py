"""Bounded waiting for the Kafka edge (private to admin, groups, read).

Every call gets one :class:`Deadline` from the config's timeout; its retries sleep :func:`backoff`
between attempts and stop when the deadline is near, and :func:`wait_for` bounds each future.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from typing import TypeVar

from recovery.kafka._errors import unreachable
from recovery.kafka.config import KafkaConfig


class Deadline:
    """A monotonic deadline shared by the retries of one call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def allows(self, attempt: int) -> bool:
        """Whether there is time to sleep ``backoff(attempt)`` and ask again."""
        return self.remaining() >= backoff(attempt)


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): 0.1, 0.2, 0.4 ... at most 2."""
    return float(min(2.0, 0.1 * 2**attempt))


_Result = TypeVar("_Result")
CHECK_EVERY_S = 0.2  # how often a wait looks at the client's error events


def wait_for(
    future: concurrent.futures.Future[_Result],
    deadline: Deadline,
    what: str,
    config: KafkaConfig,
    check: Callable[[], None] | None = None,
) -> _Result:
    """``future.result()`` bounded by the deadline; a future librdkafka never completes is unreachable.
    ``check`` is called every :data:`CHECK_EVERY_S` while waiting, and may raise (the client's
    error events: credentials refused, which librdkafka never turns into an answer)."""
    limit = time.monotonic() + deadline.remaining() + 5
    while True:
        try:
            step = limit - time.monotonic() if check is None else min(CHECK_EVERY_S, limit - time.monotonic())
            return future.result(timeout=max(0.0, step))
        except concurrent.futures.TimeoutError as exc:
            if time.monotonic() >= limit:
                raise unreachable(what, config) from exc
        if check is not None:
            check()
