"""The dead-broker probe of the ListOffsets retries and the controller wait
(recovery.kafka.admin._refuses), on real sockets: only a port nothing listens on counts as refused
(librdkafka busy-loops on those alone)."""

from __future__ import annotations

import socket

from recovery.kafka._retry import Deadline
from recovery.kafka.admin import _refuses


def test_a_listening_port_is_not_refused_and_a_closed_one_is() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert not _refuses("127.0.0.1", port, Deadline(1.0))
    assert _refuses("127.0.0.1", port, Deadline(1.0))  # closed now: nothing listens


def test_a_name_that_does_not_resolve_is_not_a_refusal() -> None:
    assert not _refuses("no-such-broker.invalid", 9092, Deadline(1.0))
