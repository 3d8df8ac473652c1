"""A real Kafka cluster of several nodes (KRaft: each node broker and controller, a static quorum of
all of them), for the broker-failure tests: replication factor 3, and a node killed (and started
again) at will.

    with LocalKafkaCluster(3) as cluster:
        cluster.bootstrap_servers          # every node, comma-separated
        cluster.kill(cluster.leader_of("orders", 0))
        cluster.restart(node)              # on its own data, as a crashed machine comes back

The nodes are started together (a controller quorum needs a majority before any node serves), then
each is waited for, as ``LocalKafkaBroker`` waits for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType

from recovery.local.broker import LocalKafkaBroker, Quorum, free_port, kafka_uuid

# Internal topics spread over every node, as a production cluster has them.
REPLICATED = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # A killed node is fenced (its partitions get new leaders) once this passes without its heartbeat.
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
}


class LocalKafkaCluster:
    def __init__(self, nodes: int = 3, config: Mapping[str, str] | None = None) -> None:
        """``config``: broker settings on top of :data:`REPLICATED`, for every node."""
        ports = {i: (free_port(), free_port()) for i in range(1, nodes + 1)}
        quorum = Quorum(kafka_uuid(), ports)
        settings = {**REPLICATED, **(config or {})}
        self.nodes = {
            i: LocalKafkaBroker(quorum=quorum, node_id=i, config=settings, heap="384m") for i in ports
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def start(self) -> LocalKafkaCluster:
        try:
            for node in self.nodes.values():
                node.launch()
            for node in self.nodes.values():
                node.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # The data is thrown away: every node is killed at once. Stopped politely one by one, the
        # last nodes waited out their controlled shutdown (20 s) for a quorum already gone.
        for node in self.nodes.values():
            node.kill()
        for node in self.nodes.values():
            node.stop()

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def restart(self, node_id: int) -> None:
        self.nodes[node_id].restart()

    def leader_of(self, topic: str, partition: int) -> int:
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(topic, timeout=10)
        return int(metadata.topics[topic].partitions[partition].leader)

    def __enter__(self) -> LocalKafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
