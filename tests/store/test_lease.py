"""The rules of a connection kept out of the pool (``mq.store.lease``, D111): who gets one, what a
try-shared one does when busy, and how a kept connection comes back after it broke, after a fork and
after a Sentinel failover."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import redis

from mq.store import lane, redispy
from mq.store.connection import Connection
from mq.store.lease import Lease, lease_for
from tests.helpers import blocked_readers, raw_client, redis_py_observability_on
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisServer


@pytest.mark.anyio
async def test_plain_clients_over_a_pool_get_a_lease_and_no_other(
    redis_server: RedisServer, redis_cluster: Any, sentinel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = owned(Connection(redis_server.url, "lease"))
    through_sentinel = owned(Connection(sentinel.url, "lease"))
    cluster = owned(Connection(redis_cluster.url, "lease"))
    memory = owned(Connection("memory://lease-test", "lease"))
    single = redis.Redis.from_url(redis_server.url, single_connection_client=True)
    try:
        for client in (plain.client, plain.async_client, through_sentinel.client, through_sentinel.async_client):
            assert isinstance(lease_for(client), Lease), client
        for client in (cluster.client, cluster.async_client, memory.client, memory.async_client, single):
            assert lease_for(client) is None, client
        held = plain.held()
        assert held is not plain and held.client.connection is not None
        held.release_held()
        assert memory.held() is memory and cluster.held() is cluster
        redis_py_observability_on(monkeypatch)
        assert lease_for(plain.client) is None and lease_for(plain.async_client) is None
        assert plain.held() is plain  # the waiters use the pool then: redis-py's metrics count every command
    finally:
        single.close()
        for conn in (plain, through_sentinel, cluster, memory):
            await conn.aclose()


def test_a_busy_shared_lease_answers_busy_and_the_call_goes_to_the_pool(redis_server: RedisServer, namespace: str) -> None:
    client = redis.Redis.from_url(redis_server.url)
    pusher = raw_client(redis_server.url)
    key = f"{namespace}:busy"
    try:
        kept = lane.lane_of(client)
        assert kept is not None
        result: list[Any] = []
        blocked = threading.Thread(target=lambda: result.append(kept.call(("BLPOP", key, 20))))
        blocked.start()
        wait_for(lambda: blocked_readers(redis_server.url, "blpop") == 1, 10, "the lease's call blocked")
        assert kept.call(("ECHO", "x")) == (False, None)  # busy: nothing sent, no wait
        assert lane.execute(client, "ECHO", "through the pool") == b"through the pool"
        assert len(client.connection_pool._in_use_connections) == 1  # the pool's went back; the lease's is kept
        pusher.rpush(key, "wake")
        blocked.join(10)
        assert result == [(True, [key.encode(), b"wake"])]
        assert kept.call(("ECHO", "y")) == (True, b"y")
    finally:
        pusher.close()
        client.close()


def test_a_killed_connection_reconnects_and_runs_the_connect_callbacks(redis_server: RedisServer) -> None:
    store_conn = Connection(redis_server.url, "lease")  # the project's clients: one quick reconnect (their retry)
    client = store_conn.client
    killer = raw_client(redis_server.url)
    connected: list[Any] = []

    class Watcher:  # kept alive here: redis-py holds the callback weakly
        def on(self, conn: Any) -> None:
            connected.append(conn)

    watcher = Watcher()
    try:
        lease = Lease(client.connection_pool, shared=True)
        lease.on_connect(watcher.on)
        first = lease.call(("CLIENT", "ID"))[1]
        assert killer.client_kill_filter(_id=first) == 1
        second = lease.call(("CLIENT", "ID"))[1]  # the retry reconnected it, through connect()
        # registered after the take (the pool hands it over connected): the reconnect is the one seen
        assert second != first and lease.conn is not None and connected == [lease.conn]
        lease.close()
        assert lease.conn is None
    finally:
        killer.close()
        store_conn.close()


def test_a_dropped_lease_loses_what_was_written_and_reconnects_on_the_next_send(
    redis_server: RedisServer, namespace: str
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        lease = lease_for(client)
        assert lease is not None
        lease.send([("ECHO", "a")], check_health=True)
        before = lease.epoch
        lease.drop()
        assert lease.epoch != before and not redispy.is_connected(lease.conn)
        lease.send([("ECHO", "b")], check_health=True)
        assert lease.read(1) == [b"b"]  # a new connection: the dropped one's reply is gone with it
        lease.close(dirty=False)
    finally:
        client.close()


def test_a_forked_child_takes_a_connection_of_its_own(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        lease = Lease(client.connection_pool, shared=True)
        parent_id = lease.call(("CLIENT", "ID"))[1]
        parent_conn = lease.conn
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                child_id = lease.call(("CLIENT", "ID"))[1]
                code = 0 if child_id != parent_id and lease.conn is not parent_conn else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert lease.call(("CLIENT", "ID")) == (True, parent_id) and lease.conn is parent_conn
    finally:
        client.close()


def test_a_kept_connection_follows_a_sentinel_failover(sentinel: Any) -> None:
    conn = Connection(sentinel.url, "lease")
    try:
        lease = lease_for(conn.client)
        assert lease is not None
        lease.send([("ECHO", "there")], check_health=True)
        assert lease.read(1) == [b"there"]
        old = sentinel.master.port
        assert lease.conn.port == old
        sentinel.kill_master()
        sentinel.wait_failover(old)

        def moved() -> bool:
            try:
                lease.send([("ECHO", "here")], check_health=True)
                return lease.read(1) == [b"here"]
            except redis.ConnectionError:
                return False  # dropped: the next send reconnects through the sentinels

        wait_for(moved, 30, "the kept connection moved to the new master")
        assert lease.conn.port == sentinel.master.port != old
        lease.close()
    finally:
        conn.close()
