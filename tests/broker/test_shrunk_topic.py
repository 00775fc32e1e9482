"""The broker service's timer retention and timer sweep cover the queues a shrunk topic no longer
lists (messages stay on them until read or trimmed)."""

from __future__ import annotations

import time

from mq import Admin, Message, MessageQueue, Producer
from mq.store import Store
from mq.store.connection import Connection
from tests.consumer.test_robustness import _fill
from tests.helpers import raw_client
from tests.leaks import owned


def test_timer_retention_and_sweep_cover_queues_of_a_shrunk_topic(backend_url: str, namespace: str, admin: Admin) -> None:
    from scheduler.retention import apply_retention

    admin.create_topic("S", read_queues=4, write_queues=4)
    _fill(backend_url, namespace, "S", 3, queue=3)
    admin.update_topic("S", read_queues=2, write_queues=2)
    store = owned(Store(Connection(backend_url, namespace)))
    time.sleep(0.01)  # the clock moves on: the messages are older than a zero retention
    assert apply_retention(store, reserved_time_h=0) == 3  # the messages on queue 3 are trimmed too


def test_the_timer_sweep_reindexes_queues_of_a_shrunk_topic(backend_url: str, namespace: str, admin: Admin) -> None:
    from scheduler.index import QueueIndex

    admin.create_topic("SW", read_queues=4, write_queues=4)
    with Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("SW", b"later", delay_level=5), queue=MessageQueue("SW", "broker-a", 3))
    admin.update_topic("SW", read_queues=2, write_queues=2)
    store = owned(Store(Connection(backend_url, namespace)))
    client = raw_client(backend_url)
    client.delete(store.keys.timers)  # the index write was lost (a producer crashed between its writes)
    QueueIndex(store, store.keys.timers, lambda keys: keys.timer).sweep()
    assert [m.decode() for m in client.zrange(store.keys.timers, 0, -1)] == ["SW\x1f3"]
    client.close()
