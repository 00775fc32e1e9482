"""Due times follow the store's clock, not a skewed host's: retries sent back, delayed sends, and the
delay levels producers reread."""

from __future__ import annotations

import time

import pytest

from mq import Admin, Message, Producer
from mq.store import Store
from mq.store.connection import Connection
from tests.consumer.test_robustness import _fill
from tests.helpers import raw_client
from tests.leaks import owned


def test_retry_due_times_follow_the_servers_clock_not_a_skewed_host(
    backend_url: str, namespace: str, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mq.consumer.retry import SendBack, retry_topic

    admin.create_topic("K", read_queues=1, write_queues=1)
    _fill(backend_url, namespace, "K", 1)
    store = owned(Store(Connection(backend_url, namespace)))
    msg = store.read("K", 0, 0, 1)[0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host runs an hour ahead
    SendBack(store, "kg", 16).send_back(msg, delay_level=1)  # level 1 = 1 s
    monkeypatch.undo()
    timer = store.queue_keys(retry_topic("kg"), 0).timer
    client = raw_client(backend_url)
    [(_, due)] = client.zrange(timer, 0, -1, withscores=True)
    server_ms = store.server_time_ms()
    client.close()
    assert 0 <= due - server_ms <= 1500, due - server_ms  # one second ahead of the server, not an hour


def test_producers_reread_delay_levels_and_time_delays_on_the_stores_clock(
    backend_url: str, namespace: str, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delay levels were cached forever by producers, and delayed sends were timed on the sender's clock."""
    from mq.model import timer as timer_module

    admin.create_topic("DL", read_queues=1, write_queues=1)
    store = owned(Store(Connection(backend_url, namespace)))
    timer = store.queue_keys("DL", 0).timer
    client = raw_client(backend_url)

    def last_due_ahead_ms() -> int:
        [(_, due)] = client.zrange(timer, -1, -1, withscores=True)
        now = client.time()
        seconds, micros = next(iter(now.values())) if isinstance(now, dict) else now  # a cluster answers per node
        return int(due) - (int(seconds) * 1000 + int(micros) // 1000)

    monkeypatch.setattr(timer_module, "DELAY_LEVELS_TTL_S", 0.2)
    with Producer("p", backend_url, namespace=namespace) as producer:
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host runs an hour ahead
        producer.send(Message("DL", b"a", delay_level=1))  # default level 1: 1 s
        assert 0 <= last_due_ahead_ms() <= 1500
        store.publish_settings({"message_delay_level": "7s 8s"})  # a broker service publishes new levels
        time.sleep(0.3)  # time passes: the producer's cached levels are past their 0.2 s TTL
        producer.send(Message("DL", b"b", delay_level=1))
        assert 6000 <= last_due_ahead_ms() <= 7500
    client.close()
