"""URLs, namespaces, the embedded store, AUTH, and secrets kept out of repr and errors."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from mq import Admin, Message, Producer
from mq.errors import MQBrokerError, MQClientError
from mq.store.connection import Connection, mask_url, resolve_url
from tests.helpers import admin_once
from tests.leaks import owned
from tests.procs import ROOT
from tests.servers import RedisServer


def test_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MQ_URL", raising=False)
    assert resolve_url(None) == "memory://"
    monkeypatch.setenv("MQ_URL", "redis://h:1/0")
    assert resolve_url(None) == "redis://h:1/0"
    assert resolve_url("memory://x") == "memory://x"


def test_mask_url_hides_passwords() -> None:
    assert mask_url("redis://user:s3cret@h:6379/0") == "redis://user:***@h:6379/0"
    assert mask_url("rediss://:s3cret@h:6379") == "rediss://:***@h:6379"
    assert mask_url("redis+cluster://u:p4ss@a:1,b:2") == "redis+cluster://u:***@a:1,b:2"
    assert mask_url("redis://h:6379/0") == "redis://h:6379/0"


@pytest.mark.parametrize("url", ["http://h:1", "mysql://x"])
def test_unknown_scheme_is_refused(url: str) -> None:
    with pytest.raises(MQClientError, match="scheme"):
        Connection(url)


@pytest.mark.parametrize("path", ["/abc", "/0x", "/1/2", "/-1"])
def test_a_database_that_is_not_a_number_is_refused(path: str) -> None:
    """redis-py reads ``/abc`` as database 0: a typo would have read and written another database."""
    with pytest.raises(MQClientError, match=f"names database '{path}': use a number"):
        Connection(f"redis://:s3cret@127.0.0.1:1{path}")  # refused before connecting (nothing listens on port 1)


@pytest.mark.parametrize("ns", ["", "a{b", "a b", "a:b"])
def test_bad_namespace_is_refused(ns: str) -> None:
    with pytest.raises(MQClientError, match="namespace"):
        Connection("memory://ns-test", ns)


def test_memory_stores_are_shared_by_name() -> None:
    admin_once("memory://shared-a").create_topic("t1", read_queues=1, write_queues=1)
    assert [t.name for t in admin_once("memory://shared-a").topics()] == ["t1"]
    assert admin_once("memory://shared-b").topics() == []


def test_namespaces_are_independent(redis_server, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("same", read_queues=1, write_queues=1)
    assert admin_once(redis_server.url, namespace + "x").topics() == []


def test_password_url_works_and_never_leaks(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    secret = "pa55-word-xyz"
    with RedisServer(password=secret) as server:
        url = server.url
        assert secret in url
        admin = owned(Admin(url, "auth"))
        admin.create_topic("t", read_queues=1, write_queues=1)
        caplog.set_level(logging.DEBUG)
        with Producer("pg", url, namespace="auth") as producer:
            assert producer.send(Message("t", b"x")).queue_offset == 0
            texts = [repr(admin), repr(producer), repr(producer._conn)]
        wrong = url.replace(secret, "wrong-password")
        with pytest.raises(MQBrokerError) as info:
            admin_once(wrong, "auth").topics()
        texts += [str(info.value), caplog.text]
        server.stop()
        with Producer("pg", url, namespace="auth") as producer, pytest.raises(MQBrokerError) as down:
            producer.send(Message("t", b"x"))
        texts.append(str(down.value))
    for text in texts:
        assert secret not in text and "wrong-password" not in text
    assert "***" in repr(admin)


def test_aclose_disconnects_a_cluster_client_flagged_for_reinitialisation(redis_cluster: object) -> None:
    """``RedisCluster.aclose`` does nothing while redis-py has the client flagged for re-initialisation
    (as after a failed one under load); ``Connection.aclose`` still disconnects every node, so nothing is
    left for the collector to find open once the event loop is gone ("Unclosed ClusterNode")."""
    import asyncio

    async def scenario() -> list[bool]:
        conn = Connection(redis_cluster.url, "t")  # type: ignore[attr-defined]
        client = conn.async_client
        await client.ping()
        nodes = [*client.nodes_manager.nodes_cache.values(), *client.nodes_manager.startup_nodes.values()]
        assert any(c.is_connected for n in nodes for c in n._connections)
        client._initialize = True  # what a failed re-initialisation leaves
        await conn.aclose()
        return [c.is_connected for n in nodes for c in n._connections]

    assert not any(asyncio.run(scenario()))


@pytest.mark.parametrize("password", ["pa/ss", "pa#ss", "pa?ss", "a/b#c?d"])
def test_a_password_with_reserved_characters_is_masked_and_refused(password: str, redis_server: RedisServer) -> None:
    url = f"redis://user:{password}@127.0.0.1:{redis_server.port}/0"
    assert password not in mask_url(url) and "pa" not in mask_url(url).partition("@")[0].partition(":")[2]
    with pytest.raises(MQClientError, match="percent-encode") as info:
        Admin(url).close()
    assert password not in str(info.value)
    r = subprocess.run(
        [sys.executable, "-m", "mq", "topic", "list", "--url", url], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert r.returncode == 1 and "percent-encode" in r.stderr and password not in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "query", ["socket_timeout=abc", "socket_timeout=-1", "socket_connect_timeout=nan", "health_check_interval=zz"]
)
def test_bad_url_parameters_raise_mq_client_error(query: str, redis_server: RedisServer) -> None:
    with pytest.raises(MQClientError):
        Admin(f"redis://:s3cret@127.0.0.1:{redis_server.port}/0?{query}").close()
    with pytest.raises(MQClientError):
        Admin("redis://127.0.0.1:notaport/0").close()
