"""On a sync cluster client the store sends a script straight to the kept connection of the node its
slot map names for the script's first key (D141), and leaves to redis-py's cluster client what that node
refuses for its slot or loses with its connection: the client follows the redirect, reads its slot map
again and retries, as before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin, Message, MessageQueue, Producer, SendStatus
from mq.store import Store, lane, redispy
from mq.store.connection import Connection
from tests.helpers import raw_client
from tests.leaks import owned
from tests.servers import RedisClusterProcs

pytestmark = pytest.mark.cluster


def _stored(url: str, namespace: str, topic: str) -> int:
    with Admin(url, namespace) as admin:
        return sum(s.max_offset for s in admin.topic_status(topic).values())


class _Counted:
    """Counts the calls of a cluster client's own command path and pipelines (wrapped on the instance)."""

    def __init__(self, client: Any) -> None:
        self.commands: list[Any] = []
        self.pipelines = 0
        execute, pipeline = client.execute_command, client.pipeline

        def counted_execute(*args: Any, **kwargs: Any) -> Any:
            self.commands.append(args[0])
            return execute(*args, **kwargs)

        def counted_pipeline(*args: Any, **kwargs: Any) -> Any:
            self.pipelines += 1
            return pipeline(*args, **kwargs)

        client.execute_command, client.pipeline = counted_execute, counted_pipeline


@pytest.fixture
def producer(redis_cluster: RedisClusterProcs, namespace: str) -> Iterator[Producer]:
    with Admin(redis_cluster.url, namespace) as admin:
        admin.create_topic("direct", read_queues=6, write_queues=6)
        admin.create_topic("one", read_queues=1, write_queues=1)
    with Producer("pd", redis_cluster.url, namespace=namespace) as p:
        for _ in range(6):  # the route, and the script loaded on every node
            assert p.send(Message("direct", b"warm")).status is SendStatus.SEND_OK
        assert p.send(Message("one", b"warm")).status is SendStatus.SEND_OK
        yield p


def _send_both_ways(producer: Producer, topic: str, count: int) -> None:
    for i in range(count):
        assert producer.send(Message(topic, b"s%d" % i)).status is SendStatus.SEND_OK
    futures = [producer.send_async(Message(topic, b"a%d" % i)) for i in range(count)]
    assert all(f.result(10).status is SendStatus.SEND_OK for f in futures)


def test_sends_take_neither_redis_pys_command_path_nor_its_pipelines(
    producer: Producer, redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    counted = _Counted(producer._conn.client)
    _send_both_ways(producer, "direct", 30)
    assert (counted.commands, counted.pipelines) == ([], 0)
    assert _stored(redis_cluster.url, namespace, "direct") == 66


def test_a_stale_slot_map_is_fixed_by_redis_pys_redirect(
    producer: Producer, redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    """A slot map naming the wrong node (as after a failover or a resharding): the node answers MOVED,
    the command did not run, and redis-py's own path runs it on the right node and fixes the map."""
    client = producer._conn.client
    key = owned(Connection(redis_cluster.url, namespace)).keys.queue("one", 0).log
    slot = client.keyslot(key)
    right = client.nodes_manager.slots_cache[slot][0]
    wrong = next(n for n in client.get_primaries() if n.name != right.name)
    for send in ("sync", "async"):
        client.nodes_manager.slots_cache[slot] = [wrong]
        counted = _Counted(client)
        if send == "sync":
            assert producer.send(Message("one", b"x")).status is SendStatus.SEND_OK
        else:
            assert producer.send_async(Message("one", b"x")).result(10).status is SendStatus.SEND_OK
        assert counted.commands == ["EVALSHA"]  # the one command the wrong node refused, run again by redis-py
        assert client.nodes_manager.slots_cache[slot][0].name == right.name
        del client.execute_command, client.pipeline
    assert _stored(redis_cluster.url, namespace, "one") == 3


def test_killed_node_connections_are_replaced_and_nothing_runs_twice(
    producer: Producer, redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    _send_both_ways(producer, "direct", 5)
    _kill_normal_clients(redis_cluster)  # every kept connection closed by its server
    _send_both_ways(producer, "direct", 5)
    _send_both_ways(producer, "direct", 5)
    assert _stored(redis_cluster.url, namespace, "direct") == 36


def test_a_node_whose_kept_connection_is_busy_gets_its_round_through_redis_pys_pipeline(
    producer: Producer, redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    client = producer._conn.client
    key = owned(Connection(redis_cluster.url, namespace)).keys.queue("one", 0).log
    kept = lane.lane_of(redispy.node_client(client, key))
    assert kept is not None and kept.hold()  # another thread's round on that node
    try:
        counted = _Counted(client)
        futures = [producer.send_async(Message("one", b"b%d" % i)) for i in range(10)]
        assert all(f.result(10).status is SendStatus.SEND_OK for f in futures)
        assert counted.pipelines >= 1
    finally:
        kept.unhold()
    assert _stored(redis_cluster.url, namespace, "one") == 11


class _Seen:
    """A waiter's reconnect callback (a bound method: kept as a weak reference)."""

    def __init__(self) -> None:
        self.count = 0

    def seen(self, _conn: Any) -> None:
        self.count += 1


def _kill_normal_clients(redis_cluster: RedisClusterProcs) -> None:
    for port in redis_cluster.ports:
        node = raw_client(f"redis://127.0.0.1:{port}")
        try:
            assert node.client_kill_filter(_type="normal", skipme=True) >= 1
        finally:
            node.close()


def test_a_cluster_waiter_is_told_when_a_node_connection_is_replaced_or_the_slot_map_changes(
    producer: Producer, redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    """A long-poll waiter checks its position after a reconnect only if it hears of it (D70); on a
    cluster the store tells it of every node connection made again and every slot-map change (D145),
    and of nothing while its connections stay up, so its waits need no check each."""
    conn = owned(Connection(redis_cluster.url, namespace, socket_timeout_s=5)).held()
    seen = _Seen()
    assert conn.on_reconnect(seen.seen) is True
    store = Store(conn)
    queue = MessageQueue("one", "broker-0", 0)

    def wait() -> None:
        _, news = store.wait_for_messages(queue, 0, 8, 10, group="g", check=False)
        assert news is not None and news[0][0].body == b"warm"

    wait()  # the first connections
    seen.count = 0
    counted = _Counted(conn.client)
    for _ in range(5):
        wait()
    assert seen.count == 0  # connections kept: nothing to tell
    assert (counted.commands, counted.pipelines) == ([], 0)  # the unchecked XREAD straight to the node too
    del conn.client.execute_command, conn.client.pipeline
    _kill_normal_clients(redis_cluster)
    wait()  # redis-py / the kept lease reconnect silently: the wait itself succeeds
    assert seen.count >= 1
    seen.count = 0
    client = conn.client
    slot = client.keyslot(conn.keys.queue("one", 0).log)
    right = client.nodes_manager.slots_cache[slot][0]
    client.nodes_manager.slots_cache[slot] = [next(n for n in client.get_primaries() if n.name != right.name)]
    wait()  # MOVED from the wrong node: redis-py patches the map
    assert seen.count >= 1
    assert client.nodes_manager.slots_cache[slot][0].name == right.name


def test_a_cluster_reconnect_callback_is_held_weakly_and_told_of_a_slot_map_read_again(
    redis_cluster: RedisClusterProcs, namespace: str
) -> None:
    conn = owned(Connection(redis_cluster.url, namespace))
    kept, dropped = _Seen(), _Seen()
    ref = weakref.ref(dropped)
    assert conn.on_reconnect(kept.seen) is True
    assert conn.on_reconnect(dropped.seen) is True
    del dropped
    gc.collect()
    assert ref() is None  # not kept alive by the store
    conn.client.nodes_manager.initialize()  # as redis-py and the store do after a failed node
    assert kept.count >= 1
