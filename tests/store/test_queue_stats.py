"""``queue-stats`` on a queue whose newest entry was not written by rocketredis (a hostile or careless
client): a clear :class:`MQBrokerError`, never a reply cut short."""

from __future__ import annotations

import pytest

from mq import Admin, Message, Producer
from mq.errors import MQBrokerError
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import raw_client
from tests.leaks import owned
from tests.servers import RedisServer


@pytest.mark.parametrize("fields", [{"st": "abc"}, {"b": "no store time"}])
def test_a_newest_entry_without_a_numeric_store_time_is_reported(
    redis_server: RedisServer, namespace: str, fields: dict[str, str]
) -> None:
    url = redis_server.url
    with Admin(url, namespace) as admin:
        admin.create_topic("h", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        producer.send(Message("h", b"a"))
    store = owned(Store(Connection(url, namespace)))
    raw = raw_client(url)
    try:
        raw.xadd(store.queue_keys("h", 0).log, fields, id="0-2")  # offset 1, but not a message
        if "st" in fields:
            with pytest.raises(MQBrokerError, match=r"queue-stats: .* store time 'abc', not a number"):
                store.queue_stats("h", [0])
        else:  # no store time at all: an entry without one is read as 0, as an empty queue's
            assert store.queue_stats("h", [0])[0].last_store_timestamp_ms == 0
    finally:
        raw.close()
        store.conn.close()
