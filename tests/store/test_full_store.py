"""A store at ``maxmemory`` with ``noeviction`` (full): what still works, and the error producers get."""

from __future__ import annotations

import logging

import pytest

from mq import Message, Producer
from mq.errors import MQBrokerError
from tests.servers import RedisServer
from tests.written_around import close_opened, open_store  # noqa: F401 - close_opened: autouse


def test_a_full_store_still_lets_the_retry_topic_step_pass_and_names_oom_to_producers(
    namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Creating a group's retry topic (a write, done when a consumer starts) is tolerated on a full
    store; producers get an MQBrokerError naming OOM, at once (no futile retries)."""
    from mq.consumer.retry import SendBack

    with RedisServer(extra_args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]) as server:
        url = server.url
        store = open_store(url, namespace)
        client = server.client()
        with pytest.raises(Exception, match="maxmemory"):
            for i in range(10_000):
                client.set(f"filler:{i}", b"x" * 65536)
        with caplog.at_level(logging.WARNING, logger="mq.consumer"):
            assert SendBack(store, "g", max_reconsume_times=1).ensure_retry_topic() == "%RETRY%g"
        assert "OOM" in caplog.text and store.topic("%RETRY%g") is None
        with Producer("p", url, namespace=namespace) as producer, pytest.raises(MQBrokerError, match="OOM") as info:
            producer.send(Message("h", b"x"))
        assert "maxmemory" in str(info.value) and "after 1 attempt(s)" in str(info.value)
        client.close()
