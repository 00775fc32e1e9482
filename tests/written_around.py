"""A store opened on one topic, a raw client, and messages encoded for the put script by hand: for tests
that write around the library (a careless or hostile client) and check what the store refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin, Message
from mq.store import Store, codec
from mq.store.connection import Connection
from tests.helpers import raw_client
from tests.leaks import owned

_OPENED: list[Any] = []


@pytest.fixture(autouse=True)
def close_opened() -> Iterator[None]:
    """Close every store and raw client a test opened (the suite turns unclosed sockets into errors).
    Autouse in each module that imports it."""
    yield
    while _OPENED:
        _OPENED.pop().close()


def open_store(url: str, ns: str, topic: str = "h", queues: int = 1) -> Store:
    """A store on ``ns`` with ``topic`` created (``queues`` queues), closed when the test ends."""
    with Admin(url, ns) as admin:
        admin.create_topic(topic, read_queues=queues, write_queues=queues)
    store = owned(Store(Connection(url, ns)))
    _OPENED.append(store.conn)
    return store


def raw(url: str) -> Any:
    """A plain redis-py client, closed when the test ends."""
    client = raw_client(url)
    _OPENED.append(client)
    return client


def encoded(body: bytes = b"x", **fields: Any) -> list[Any]:
    """A put-script message, bypassing the producer's checks (a careless or hostile client)."""
    return codec.encode(Message("h", body), fields.pop("msg_id", "id-" + body.decode(errors="replace")), 1)


def with_keys(n: int) -> list[Any]:
    """A put-script message with ``n`` keys (the producer refuses more than ``MAX_KEYS``)."""
    items = ["i", f"id-{n}", "b", b"x", "bt", 1, "k", "\x1f".join(f"key{i}" for i in range(n))]
    return [len(items), *items]
