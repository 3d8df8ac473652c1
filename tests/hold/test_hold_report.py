"""What ``retention hold`` prints beside its rows: each broker's free space and what the hold adds."""

from __future__ import annotations

from recovery.cli.report.hold import free_space_lines
from recovery.core.hold import HoldAction, HoldPlan, LogDir, TopicHold

GIB = 1 << 30


def test_each_broker_a_raise_lands_on_says_its_free_space_and_what_the_hold_adds() -> None:
    raise_a = TopicHold("a", HoldAction.RAISE, "", extra_bytes={1: 3 << 20, 2: 1 << 20})
    raise_b = TopicHold("b", HoldAction.RAISE, "", extra_bytes={1: 1 << 20})
    refused = TopicHold("c", HoldAction.REFUSED, "", extra_bytes={3: GIB})
    dirs = (
        LogDir(1, "/d1", 100 * GIB, 40 * GIB, {}),
        LogDir(1, "/d2", 100 * GIB, 10 * GIB, {}),
        LogDir(2, "/d", None, None, {}),
    )
    plan = HoldPlan("/chk", 86_400_000, 0, (raise_a, raise_b, refused), free_space=dirs)

    assert free_space_lines(plan) == [
        "broker 1: 50.0 GiB free of 200.0 GiB; the hold adds ~4.0 MiB (estimate)",
        "broker 2: free space not reported; the hold adds ~1.0 MiB (estimate)",
    ]
