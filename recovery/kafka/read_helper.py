"""The program of a helper process of a shared read-to-end: ``python -m recovery.kafka.read_helper``.

:meth:`recovery.kafka._shared_read.Helper.start` launches it and says the job on stdin (the Kafka
settings, the parent's deadline, the :class:`~recovery.kafka._shared_read.ReadState` of each
partition of its group); it reads those partitions with a :class:`~recovery.kafka.read.LogReader`
whose states are given (:meth:`~recovery.kafka.read.LogReader.share`) and says the outcome on
stdout. The protocol is described in :mod:`recovery.kafka._shared_read`.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from recovery.core.model import Isolation, JsonObject
from recovery.errors import RecoveryError
from recovery.kafka._shared_read import ReadState
from recovery.kafka.config import KafkaConfig
from recovery.kafka.read import LogReader


def _end_when_parent_goes() -> None:
    sys.stdin.read()  # returns at end of file: the parent closed the pipe or is gone
    os._exit(0)


def main() -> None:
    """The helper process: read the job, read the partitions, say the outcome."""
    # The protocol owns the original stdout; anything else printing goes to stderr (DEVNULL).
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)

    def say(what: JsonObject) -> None:
        out.write(json.dumps(what) + "\n")
        out.flush()

    try:
        job = json.loads(sys.stdin.readline())
        threading.Thread(target=_end_when_parent_goes, name="parent-watch", daemon=True).start()
        reader = LogReader.share(
            KafkaConfig(job["bootstrap_servers"], job["properties"], job["timeout_s"]),
            [ReadState.from_json(data) for data in job["states"]],
            Isolation(job["isolation"]),
            deadline_s=job["deadline_s"],
            deadline_at=job["deadline_at"],
            progress=(lambda done, _total: say({"covered": done})) if job["progress"] else None,
        )
        reader.run()
        say({"states": [state.as_json() for state in reader.states]})
    except RecoveryError as exc:
        say({"error": {"type": type(exc).__name__, "message": str(exc)}})
    except BaseException as exc:  # said to the parent, which raises it as a KafkaError
        failed = f"read-to-end helper: {type(exc).__name__}: {exc}"
        say({"error": {"type": "KafkaError", "message": failed}})


if __name__ == "__main__":
    main()
