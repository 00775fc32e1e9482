"""The asyncio store runs the very operations of the sync store: the same calls, in the same order,
on two namespaces of one server, give the same results (issue 16's shared sans-I/O layer)."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

from mq.errors import MQBrokerError, ReplicaAckTimeout
from mq.model.message import Message
from mq.model.queue import MessageQueue
from mq.model.topic import TopicConfig
from mq.store import Store, codec
from mq.store.aio import AsyncStore
from mq.store.connection import Connection
from mq.store.groups import PullRequest
from mq.store.replication import SyncReplicas
from tests.leaks import owned


@pytest.fixture(params=["memory", "standalone", pytest.param("cluster", marks=pytest.mark.cluster)])
def any_url(request: pytest.FixtureRequest, namespace: str) -> str:
    if request.param == "memory":
        return f"memory://aio-{namespace}"
    if request.param == "standalone":
        return str(request.getfixturevalue("redis_server").url)
    return str(request.getfixturevalue("redis_cluster").url)


def _steps(ns: str) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Store calls covering scripts, pipelines, plain commands, scans and composed operations."""
    q0, q1 = MessageQueue("t", "b", 0), MessageQueue("t", "b", 1)
    encoded = [codec.encode(Message("t", b"body-%d" % i, tags="a", keys=["k%d" % i]), f"id{i}", 1) for i in range(3)]
    return [
        ("save_topic", (TopicConfig("t", 2, 2),), {}),
        ("topic", ("t",), {}),
        ("ensure_topic", (TopicConfig("u", 1, 1),), {}),
        ("topics", (), {}),
        ("put", ("t", 0, encoded), {}),
        ("put_many", ([("t", 1, encoded[:1]), ("missing", 0, encoded[:1])],), {}),
        ("read", ("t", 0, 0, 10), {}),
        ("read_at", ("t", [(0, 1), (1, 0), (1, 5)]), {}),
        ("read_each", ([("t", 0, 1), ("u", 0, 0), ("t", 1, 5)],), {}),
        ("find_ids", ("t", [0, 1], "id2"), {}),
        ("find_keys", ("t", [0, 1], "k0", 10), {}),
        ("queue_stats", ("t", [0, 1]), {}),
        ("heartbeat", ("g", "c1", "{}", 30_000), {}),
        ("claim_queues", ("g", "c1", ["c1"], [q0, q1]), {}),
        ("pull_many", ([PullRequest("t", 0, 0, 2, 32, group="g", commit=1, guard="owner", client_id="c1")],), {}),
        (
            "pull_many",
            ([PullRequest("t", 0, 1, 2, 32, group="g", commit=1, guard="owner", client_id="c1", read_after=True)],),
            {},
        ),
        ("read_offsets", ("g", [q0, q1]), {}),
        ("commit_offsets", ("g", {q0: 2, q1: 1}), {"guard": "owner", "client_id": "c2"}),
        ("seed_offsets", ("g", {q0: 0, q1: 0}), {}),
        ("save_group_config", ("g", '{"fifo": false}'), {}),
        ("group_config_json", ("g",), {}),
        ("groups", (), {}),
        ("wait_for_messages", (q0, 1, 5, 10), {"group": "g"}),
        ("commit_and_wait", ("g", q0, 3, 1, 5, 10), {"guard": "owner", "client_id": "c1"}),
        ("commit_and_wait", ("g", q1, 1, 0, 5, 10), {"guard": "owner", "client_id": "c2"}),
        ("read_offsets", ("g", [q0, q1]), {}),
        ("namespace_keys", (), {}),
        ("delete_topic", ("u",), {}),
        ("drop_namespace", (), {}),
    ]


def _comparable(value: Any, ns: str) -> Any:
    """A step's result without what differs between two runs: times, and the namespace in key names."""
    if isinstance(value, (list, tuple)):
        items = [_comparable(v, ns) for v in value]
        return sorted(items, key=repr) if isinstance(value, list) and items and isinstance(items[0], str) else items
    if isinstance(value, dict):
        return {repr(_comparable(k, ns)): _comparable(v, ns) for k, v in value.items()}
    if isinstance(value, str):  # a position's fingerprint starts with the entry's store time (D70)
        return re.sub(r"^\d{13,}:", "time:", value.replace(ns, "NS"))
    if isinstance(value, Exception):
        return type(value).__name__
    if isinstance(value, int) and value > 10**12:  # an epoch-ms time
        return "time"
    if hasattr(value, "__dataclass_fields__") or hasattr(value, "__dict__"):
        fields = {k: v for k, v in vars(value).items() if "time" not in k and "now" not in k and not k.startswith("_")}
        return (type(value).__name__, _comparable(fields, ns))
    return value


def test_the_async_store_gives_what_the_sync_store_gives(any_url: str, namespace: str) -> None:
    sync_ns, async_ns = f"{namespace}s", f"{namespace}a"
    conn = owned(Connection(any_url, sync_ns))
    store = Store(conn)
    sync_results = [_comparable(getattr(store, name)(*a, **kw), sync_ns) for name, a, kw in _steps(sync_ns)]
    conn.close()

    async def run_async() -> list[Any]:
        aconn = owned(Connection(any_url, async_ns))
        astore = AsyncStore(aconn)
        try:
            return [_comparable(await getattr(astore, name)(*a, **kw), async_ns) for name, a, kw in _steps(async_ns)]
        finally:
            await aconn.aclose()

    async_results = asyncio.run(run_async())
    for (name, _, _), s, a in zip(_steps(sync_ns), sync_results, async_results):
        assert s == a, name
    # the steps did something: a message read back, a commit refused to a non-owner, keys deleted
    reads = dict(zip([s[0] for s in _steps(sync_ns)], sync_results))
    assert len(reads["read"]) == 3 and reads["put_many"][1] == "TopicNotFoundError"
    assert reads["drop_namespace"] > 5


def test_async_writes_wait_for_replicas_on_the_node_that_served_them(any_url: str, namespace: str) -> None:
    """``WAIT`` in the asyncio pipeline: with no replica attached, one replica asked for → a
    :class:`ReplicaAckTimeout` carrying the stored result (on a cluster, per node)."""

    async def run() -> list[Any]:
        conn = owned(Connection(any_url, namespace))
        store = AsyncStore(conn, sync=SyncReplicas(replicas=1, timeout_ms=50))
        try:
            await store.save_topic(TopicConfig("t", 4, 4))
            calls = [
                ("put-messages", store.queue_keys("t", q).put(), [1, *codec.encode(Message("t", b"x"), f"i{q}", 1)])
                for q in range(4)
            ]
            return await store.write_scripts(calls)
        finally:
            await conn.aclose()

    results = asyncio.run(run())
    assert len(results) == 4
    for r in results:
        assert isinstance(r, ReplicaAckTimeout) and r.acked == 0 and r.result[0] == 0


def test_async_store_errors_are_the_library_errors(namespace: str) -> None:
    async def run() -> None:
        conn = owned(Connection("redis://127.0.0.1:1/0?socket_connect_timeout=0.2", namespace))
        try:
            await AsyncStore(conn).topic("t")
        finally:
            await conn.aclose()

    with pytest.raises(MQBrokerError, match="reading topic 't'"):
        asyncio.run(run())


def test_the_async_store_starts_no_thread(redis_server: Any, namespace: str) -> None:
    before = threading.active_count()

    async def run() -> None:
        conn = owned(Connection(redis_server.url, namespace))
        store = AsyncStore(conn)
        await store.save_topic(TopicConfig("t", 1, 1))
        await store.put("t", 0, [codec.encode(Message("t", b"x"), "i", 1)])
        assert [m.body for m in await store.read("t", 0, 0, 5)] == [b"x"]
        await store.drop_namespace()
        await conn.aclose()

    asyncio.run(run())
    assert threading.active_count() == before


def test_commit_and_wait_commits_as_the_owner_and_reads_in_one_round_trip(any_url: str, namespace: str) -> None:
    store = owned(Store(Connection(any_url, namespace)))
    q = MessageQueue("t", "b", 0)
    store.save_topic(TopicConfig("t", 1, 1))
    store.put("t", 0, [codec.encode(Message("t", b"m%d" % i), f"id{i}", 1) for i in range(3)])
    store.claim_queues("g", "c1", ["c1"], [q])
    held, rewound, news = store.commit_and_wait("g", q, 1, 1, 5, 10, guard="owner", client_id="c1")
    assert held is True and rewound is None and news is not None
    msgs, end = news
    assert [m.body for m in msgs] == [b"m1", b"m2"] and end == 3
    assert store.read_offsets("g", [q]) == {q: 1}
    # another client's commit is refused (nothing written); the wait still reads, and times out empty
    assert store.commit_and_wait("g", q, 3, 3, 5, 10, guard="owner", client_id="c2") == (False, None, None)
    assert store.read_offsets("g", [q]) == {q: 1}
    # a commit past the committer's position, or beyond the queue's end, is not written (D70)
    assert store.commit_and_wait("g", q, 3, 2, 5, 10, guard="owner", client_id="c1")[0] is True
    assert store.commit_offsets("g", {q: 4}, guard="owner", client_id="c1") == {q: True}
    assert store.read_offsets("g", [q]) == {q: 1}
    store.conn.close()
