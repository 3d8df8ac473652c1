"""The embedded broker starts, serves, stops cleanly, and never outlives the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient

from recovery.local.broker import LocalKafkaBroker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child that nobody reaped yet is a zombie: dead for our purposes.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def _wait_dead(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_broker_serves_metadata_then_stops_without_leftovers() -> None:
    broker = LocalKafkaBroker().start()
    pid, workdir = broker.pid, broker.log_path.parent
    assert pid is not None
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [broker.port]

    broker.stop()

    assert _wait_dead(pid)
    assert not workdir.exists()


def test_broker_dies_with_a_killed_parent() -> None:
    """SIGKILL on the Python process (a crashed test run) must not leave an orphan broker."""
    code = (
        "from recovery.local.broker import LocalKafkaBroker\n"
        "import time\n"
        "broker = LocalKafkaBroker().start()\n"
        "print(broker.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        broker_pid = int(parent.stdout.readline())
        assert _alive(broker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_dead(broker_pid), f"broker {broker_pid} outlived its parent"
    finally:
        parent.kill()
