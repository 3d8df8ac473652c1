"""``stream-recovery offsets``: per-partition offset ranges, like kafka-get-offsets."""

from __future__ import annotations
