"""Data for the Spark tests: topics filled through the public producer, offsets, and dead letters."""

from __future__ import annotations

from dataclasses import dataclass, field

from mq import Admin, Message, MessageQueue, Producer
from mq.consumer.retry import SendBack
from mq.store import Store
from mq.store.connection import Connection

#: Tags the filled messages cycle through.
TAGS = ("created", "paid", "shipped")


def body_of(i: int) -> bytes:
    """A body that is not text: every byte value occurs, lengths 1..64."""
    return bytes((i * 31 + j * 7) % 256 for j in range(i % 64 + 1))


@dataclass
class Filled:
    """What :func:`fill` sent: ``sent[msg_id] = (queue_id, offset, body, amount)``."""

    url: str
    namespace: str
    topic: str
    sent: dict[str, tuple[int, int, bytes, int]] = field(default_factory=dict)

    def options(self, **extra: str) -> dict[str, str]:
        """Source options for this topic."""
        return {"url": self.url, "namespace": self.namespace, "topic": self.topic, **extra}

    def queue_counts(self) -> dict[int, int]:
        """Messages stored per queue, from ``Admin.topic_status``."""
        with Admin(self.url, self.namespace) as admin:
            return {mq.queue_id: s.max_offset - s.min_offset for mq, s in admin.topic_status(self.topic).items()}


def fill(url: str, namespace: str, topic: str, n: int, queues: int, *, create: bool = True, start: int = 0) -> Filled:
    """Send ``n`` messages (async, pipelined) with bodies :func:`body_of`, an ``amount`` property,
    a tag and a key; create the topic with ``queues`` queues first when ``create``."""
    if create:
        with Admin(url, namespace) as admin:
            admin.create_topic(topic, read_queues=queues, write_queues=queues)
    out = Filled(url, namespace, topic)
    with Producer("spark-test", url, namespace=namespace) as producer:
        for low in range(start, start + n, 5000):
            batch = range(low, min(low + 5000, start + n))
            futures = [
                (
                    i,
                    producer.send_async(
                        Message(
                            topic, body_of(i), tags=TAGS[i % 3], keys=[f"user-{i % 97}"], properties={"amount": str(i % 1000)}
                        )
                    ),
                )
                for i in batch
            ]
            for i, f in futures:
                r = f.result(timeout=30)
                out.sent[r.msg_id] = (r.message_queue.queue_id, r.queue_offset, body_of(i), i % 1000)
    return out


def put_dead_letters(url: str, namespace: str, group: str, origin: str, reasons: list[str]) -> None:
    """Dead-letter one message of topic ``origin`` per entry of ``reasons`` into ``%DLQ%<group>``,
    the way a consumer does past its last retry (``SendBack`` with ``max_reconsume_times`` 0)."""
    fill(url, namespace, origin, len(reasons), 1)
    conn = Connection(url, namespace)
    try:
        store = Store(conn)
        send_back = SendBack(store, group, max_reconsume_times=0)
        for msg, reason in zip(store.read(origin, 0, 0, len(reasons)), reasons, strict=True):
            send_back.send_back(msg, reason=reason)
    finally:
        conn.close()


def commit(url: str, namespace: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``group``'s offsets on queues of ``topic`` (as a consumer's persist does)."""

    conn = Connection(url, namespace)
    try:
        Store(conn).commit_offsets(group, {MessageQueue(topic, "broker-a", q): o for q, o in offsets.items()})
    finally:
        conn.close()
