"""``MessageQueue``: the address of one queue of a topic."""

from __future__ import annotations

from dataclasses import dataclass

#: The broker name every queue reports. Queues are spread over Redis nodes by their hash tag, and a
#: queue keeps its name when Redis Cluster moves its slot, so the name is logical, not a node address
#: (see docs/decisions.md).
DEFAULT_BROKER_NAME = "broker-a"


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic [RocketMQ ``MessageQueue``]; frozen, hashable and sortable.

    Sorting is by ``(topic, broker_name, queue_id)``, the order RocketMQ's rebalance uses.
    """

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        # Exactly RocketMQ's MessageQueue.toString(): consistent-hash rebalance keys queues by it.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"
