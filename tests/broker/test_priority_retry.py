"""A retried priority message keeps its priority through the broker's retry path (D142): the copy sent
back waits in the retry topic's queue of its level, the broker service moves it there when due, and
it is delivered again with its priority (RocketMQ's retry topic loses it, apache/rocketmq #10350)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
from mq.consumer import steps
from mq.model.message import MessageExt
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.helpers import stays_quiet
from tests.leaks import owned
from tests.procs import wait_for

#: Short delay levels so retries come back in a fraction of a second.
FAST_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms"


@pytest.fixture
def broker(backend_url: str, namespace: str) -> Iterator[BrokerService]:
    with BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)) as service:
        yield service


def test_retried_message_keeps_its_priority(
    backend_url: str, namespace: str, broker: BrokerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the retry topic gains its priority queues with the first priority message sent back: members
    # hold them from their next rebalance (every 20 s; 1 s here)
    monkeypatch.setattr(steps, "REBALANCE_INTERVAL_S", 1.0)
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("PR", read_queues=10, write_queues=10, priority_levels=10)
    seen: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            seen.extend(msgs)
        first_try = msgs[0].reconsume_times == 0
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if first_try else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("gpr", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("PR")
    consumer.register_message_listener(listener)
    with Producer("p", backend_url, namespace=namespace) as producer:
        high = producer.send(Message("PR", b"high", priority=7)).msg_id
        low = producer.send(Message("PR", b"low")).msg_id
    with consumer:
        wait_for(lambda: len(seen) >= 4, 30, "each message twice")
        stays_quiet(lambda: len(seen), "the deliveries")
    by_id = {(m.msg_id, m.reconsume_times): m for m in seen}
    assert len(seen) == 4 and set(by_id) == {(high, 0), (high, 1), (low, 0), (low, 1)}
    assert by_id[high, 1].priority == 7 and by_id[high, 1].topic == "PR"  # kept, and the original topic shown
    assert by_id[low, 1].priority == 0
    retry = admin.topic_config("%RETRY%gpr")
    assert retry.priority_levels == 10 and retry.write_queues >= 10
    # the copies wait in the retry topic's queue of their level
    store = owned(Store(Connection(backend_url, namespace)))
    assert [m.msg_id for m in store.read("%RETRY%gpr", 7, 0, 10)] == [high]
    assert [m.msg_id for m in store.read("%RETRY%gpr", 0, 0, 10)] == [low]
    assert store.read("%RETRY%gpr", 7, 0, 10)[0].system_properties["PRIORITY"] == "7"
