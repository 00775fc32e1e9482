"""High availability: Sentinel URLs, replicated clusters, failover, and sends confirmed by replicas."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from mq.errors import MQBrokerError, MQClientError
from mq.model.topic import TopicConfig
from mq.producer.producer import DEFAULT_SEND_TIMEOUT_S
from mq.store import Store, codec
from mq.store.aio import AsyncStore
from mq.store.connection import Connection, mask_url, parse_sentinel_url
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisClusterProcs, SentinelProcs

pytestmark = [pytest.mark.ha, pytest.mark.slow]


# -- URL parsing (no server) ------------------------------------------------------------------------


def test_sentinel_url_parts_and_masking() -> None:
    url = "redis+sentinel://app:s3cret@10.0.0.1:26379,10.0.0.2:26380/orders/3?socket_timeout=2"
    parsed = parse_sentinel_url(url)
    assert parsed.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26380)]
    assert (parsed.master_name, parsed.db, parsed.username, parsed.password, parsed.tls) == ("orders", 3, "app", "s3cret", False)
    assert "s3cret" not in repr(parsed) and "s3cret" not in mask_url(url)
    assert parse_sentinel_url("rediss+sentinel://h:1/m").tls and parse_sentinel_url("redis+sentinel://h:1/m").db == 0


@pytest.mark.parametrize(
    "url, says",
    [
        ("redis+sentinel:///mymaster", "no sentinel address"),
        ("redis+sentinel://h:notaport/mymaster", "bad sentinel address"),
        ("redis+sentinel://h:26379", "names no master"),
        ("redis+sentinel://h:26379/m/x", "bad db"),
        ("redis+sentinel://u:pw@h:26379/m/x", "bad db"),
    ],
)
def test_bad_sentinel_urls_are_refused_before_connecting(url: str, says: str) -> None:
    with pytest.raises(MQClientError, match=says) as e:
        Connection(url)
    assert "pw@" not in str(e.value)


@pytest.mark.parametrize("replicas, timeout_ms", [(-1, 1000), (1, 0), (1, -5), ("1", 1000), (True, 1000)])
def test_bad_sync_replicas_are_refused(replicas: object, timeout_ms: int) -> None:
    with pytest.raises(MQClientError, match="sync_replicas"):
        Producer("p", "memory://", sync_replicas=replicas, sync_replicas_timeout_ms=timeout_ms)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match="sync_replicas"):
        BrokerConfig(sync_replicas=replicas, sync_replicas_timeout_ms=timeout_ms)  # type: ignore[arg-type]


def test_memory_store_has_no_replicas_to_confirm(namespace: str) -> None:
    admin_once("memory://ha", namespace).create_topic("t")
    with Producer("p", "memory://ha", namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=50) as p:
        r = p.send(Message("t", b"x"))
    assert r.status is SendStatus.FLUSH_SLAVE_TIMEOUT and r.queue_offset == 0  # stored, not confirmed


# -- Sentinel ---------------------------------------------------------------------------------------


def _collecting_consumer(url: str, ns: str, topic: str, seen: list[bytes]) -> PushConsumer:
    consumer = PushConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic, "*")

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    return consumer


def test_round_trip_through_sentinel_with_broker(sentinel: SentinelProcs, namespace: str) -> None:
    url = sentinel.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("t", read_queues=2, write_queues=2)
    seen: list[bytes] = []
    config = BrokerConfig(sync_replicas=1, message_delay_level="100ms 200ms")
    with (
        BrokerService(url, namespace, config),
        _collecting_consumer(url, namespace, "t", seen),
        Producer("p", url, namespace=namespace, sync_replicas=1) as producer,
    ):
        assert producer.send(Message("t", b"now")).status is SendStatus.SEND_OK
        assert producer.send(Message("t", b"later", delay_level=1)).status is SendStatus.SEND_OK
        wait_for(lambda: sorted(seen) == [b"later", b"now"], 15, "both messages consumed")
    assert sum(s.max_offset for s in admin.topic_status("t").values()) == 2
    # the writes are on the replica too (sync_replicas=1 confirmed them)
    replica = sentinel.replicas[0]
    with replica.client() as c:
        assert sum(c.xlen(owned(Store(Connection(url, namespace))).queue_keys("t", q).log) for q in range(2)) == 2
    admin.close()


def test_sync_replicas_with_the_replica_stopped_returns_flush_slave_timeout(sentinel: SentinelProcs, namespace: str) -> None:
    url = sentinel.url
    admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=300) as producer:
        assert producer.send(Message("t", b"a")).status is SendStatus.SEND_OK
        sentinel.replicas[0].stop()
        waits_before = _wait_calls(sentinel)
        started = time.monotonic()
        result = producer.send(Message("t", b"b"))
        took = time.monotonic() - started
        assert result.status is SendStatus.FLUSH_SLAVE_TIMEOUT and result.queue_offset == 1
        assert took >= 0.3, took  # it waited for the replica as long as its timeout said
        # no speed bound: only a WAIT that ignored its 300 ms (blocked until the send's 3 s budget ran out) fails this
        assert took < DEFAULT_SEND_TIMEOUT_S, took
        assert _wait_calls(sentinel) == waits_before + 1  # one WAIT: the send did not retry
        future = producer.send_async(Message("t", b"c"))
        assert future.result(5).status is SendStatus.FLUSH_SLAVE_TIMEOUT
        stored = owned(Store(Connection(url, namespace))).read("t", 0, 0, 10)
        assert [m.body for m in stored] == [b"a", b"b", b"c"]  # stored once each on the master
    with Producer("p0", url, namespace=namespace) as plain:  # sync_replicas=0 does not wait
        assert plain.send(Message("t", b"d")).status is SendStatus.SEND_OK


def test_transaction_half_not_confirmed_is_rolled_back(sentinel: SentinelProcs, namespace: str) -> None:
    url = sentinel.url
    admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    ran: list[bool] = []

    def executor(msg, arg):  # type: ignore[no-untyped-def]
        ran.append(True)
        return LocalTransactionState.COMMIT_MESSAGE

    with TransactionProducer(
        "tp",
        url,
        namespace=namespace,
        checker=lambda m: LocalTransactionState.COMMIT_MESSAGE,
        sync_replicas=1,
        sync_replicas_timeout_ms=200,
    ) as tp:
        ok = tp.send_message_in_transaction(Message("t", b"ok"), executor)
        assert ok.status is SendStatus.SEND_OK and ok.queue_offset == 0 and ran == [True]
        sentinel.replicas[0].stop()
        bad = tp.send_message_in_transaction(Message("t", b"unconfirmed"), executor)
    assert bad.status is SendStatus.FLUSH_SLAVE_TIMEOUT
    assert bad.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE and ran == [True]
    assert [m.body for m in owned(Store(Connection(url, namespace))).read("t", 0, 0, 10)] == [b"ok"]


def _wait_calls(sentinel: SentinelProcs) -> int:
    """How many ``WAIT`` commands the master has run (``INFO commandstats``)."""
    client = sentinel.master.client()
    try:
        return int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
    finally:
        client.close()


def _send_through(producer: Producer, topic: str, seconds: float, on_result: Callable[[str, float], None]) -> None:
    """Send for ``seconds``, reporting each outcome (``ok``/``error``) and how long the call took."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            producer.send(Message(topic, b"m%d" % i))
            on_result("ok", time.monotonic() - started)
        except MQBrokerError:
            on_result("error", time.monotonic() - started)
            time.sleep(0.05)  # paces the retries while no master answers
        i += 1


def _fail_over_under_load(
    producer: Producer, topic: str, fail_over: Callable[[], object]
) -> tuple[list[tuple[str, float, float]], float]:
    """Send from a thread for 8 s while ``fail_over()`` kills a master and waits for its successor;
    returns each send's ``(outcome, seconds it took, when it ended)`` and when the kill began."""
    outcomes: list[tuple[str, float, float]] = []
    sender = threading.Thread(
        target=_send_through, args=(producer, topic, 8.0, lambda what, took: outcomes.append((what, took, time.monotonic())))
    )
    sender.start()
    wait_for(lambda: any(what == "ok" for what, _, _ in outcomes), 10, "the sender's first send")
    killed_at = time.monotonic()
    fail_over()
    sender.join(30)
    assert not sender.is_alive()
    # no speed bound: the send budget (3 s) plus a margin for a loaded machine; a send that hung fails it
    assert max(took for _, took, _ in outcomes) < DEFAULT_SEND_TIMEOUT_S + 3.0
    return outcomes, killed_at


def test_sentinel_failover_sends_never_hang_and_everything_works_after(sentinel: SentinelProcs, namespace: str) -> None:
    url = sentinel.url
    admin_once(url, namespace).create_topic("t", read_queues=2, write_queues=2)
    seen: list[bytes] = []
    with _collecting_consumer(url, namespace, "t", seen), Producer("p", url, namespace=namespace) as producer:
        producer.send(Message("t", b"before"))
        wait_for(lambda: b"before" in seen, 15, "the first message consumed")
        old = sentinel.master.port
        outcomes, killed_at = _fail_over_under_load(producer, "t", lambda: (sentinel.kill_master(), sentinel.wait_failover(old)))
        # the failover was felt: no master answers for at least down-after (1 s), so a send failed or
        # waited for the promotion within its budget (D77)
        assert any(what == "error" or took >= 1.0 for what, took, at in outcomes if at > killed_at)
        first_ok = min(at for what, _, at in outcomes if what == "ok" and at > killed_at)
        assert first_ok - killed_at < 15
        # after the failover, without a restart: send and consume
        producer.send(Message("t", b"after"))
        wait_for(lambda: b"after" in seen, 20, "a message sent after the failover consumed")


# -- replicated cluster -----------------------------------------------------------------------------


def _queues_by_node(url: str, ns: str, topic: str, queues: int) -> dict[str, list[int]]:
    conn = owned(Connection(url, ns))
    store = Store(conn)
    out: dict[str, list[int]] = {}
    for q in range(queues):
        out.setdefault(conn.node_of(store.queue_keys(topic, q).meta), []).append(q)
    conn.close()
    return out


@pytest.mark.cluster
@pytest.mark.parametrize("replicas", [1, "all"])
def test_cluster_wait_reaches_the_node_that_served_the_write(
    replicated_cluster: RedisClusterProcs, namespace: str, replicas: int | str
) -> None:
    """Each node's writes wait for that node's replicas ("all": counted per node, D73)."""
    cluster = replicated_cluster
    url = cluster.url
    admin_once(url, namespace).create_topic("t", read_queues=12, write_queues=12)
    by_node = _queues_by_node(url, namespace, "t", 12)
    assert len(by_node) == 3

    with Producer("p", url, namespace=namespace, sync_replicas=replicas, sync_replicas_timeout_ms=300) as producer:  # type: ignore[arg-type]
        for qids in by_node.values():
            r = producer.send(Message("t", b"x"), queue=MessageQueue("t", "broker-a", qids[0]))
            assert r.status is SendStatus.SEND_OK
        # stop the replica of one master: only sends to that master go unconfirmed
        victim_name = sorted(by_node)[0]
        victim = next(i for i, n in enumerate(cluster.nodes) if f"127.0.0.1:{n.port}" == victim_name)
        cluster.nodes[cluster.replica_of(victim)].stop()
        for name, qids in by_node.items():
            statuses = {producer.send(Message("t", b"y"), queue=MessageQueue("t", "broker-a", q)).status for q in qids}
            want = SendStatus.FLUSH_SLAVE_TIMEOUT if name == victim_name else SendStatus.SEND_OK
            assert statuses == {want}, name
        # async sends go out in one pipeline per node, each with its own WAIT
        futures = {q: producer.send_async(Message("t", b"z"), queue=MessageQueue("t", "broker-a", q)) for q in range(12)}
        for q, f in futures.items():
            want = SendStatus.FLUSH_SLAVE_TIMEOUT if q in by_node[victim_name] else SendStatus.SEND_OK
            assert f.result(10).status is want, q


@pytest.mark.cluster
def test_cluster_all_still_counts_the_lost_replica_after_a_failover(
    replicated_cluster: RedisClusterProcs, namespace: str
) -> None:
    """ "all" on a Cluster: after the master of a queue crashes and its replica takes over, the promoted
    node has no replica, yet what was counted for those slots still counts (as at a promoted Sentinel
    master, D73): a send waits its timeout and says FLUSH_SLAVE_TIMEOUT, not SEND_OK with no copy."""
    cluster = replicated_cluster
    url = cluster.url
    admin_once(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    victim_name = next(iter(_queues_by_node(url, namespace, "t", 1)))
    victim = next(i for i, n in enumerate(cluster.nodes) if f"127.0.0.1:{n.port}" == victim_name)
    queue = MessageQueue("t", "broker-a", 0)
    with Producer("p", url, namespace=namespace, sync_replicas="all", sync_replicas_timeout_ms=300) as producer:
        assert producer.send(Message("t", b"a"), queue=queue).status is SendStatus.SEND_OK  # 1 replica counted
        cluster.wait_promoted(cluster.kill_master(victim))
        statuses: list[SendStatus] = []

        def sent() -> bool:
            try:
                statuses.append(producer.send(Message("t", b"b"), queue=queue).status)
            except MQBrokerError:  # the crashed master's address, until the producer reads the slot map again
                return False
            return True

        wait_for(sent, 30, "a send to the promoted master")
        assert statuses == [SendStatus.FLUSH_SLAVE_TIMEOUT]  # 0 of 1 replica: reported, not SEND_OK


@pytest.mark.cluster
def test_round_trip_through_replicated_cluster_with_broker(replicated_cluster: RedisClusterProcs, namespace: str) -> None:
    url = replicated_cluster.url
    admin_once(url, namespace).create_topic("t", read_queues=6, write_queues=6)
    seen: list[bytes] = []
    config = BrokerConfig(sync_replicas=1, message_delay_level="100ms 200ms")
    checker = lambda m: LocalTransactionState.COMMIT_MESSAGE  # noqa: E731
    with (
        BrokerService(url, namespace, config),
        _collecting_consumer(url, namespace, "t", seen),
        Producer("p", url, namespace=namespace, sync_replicas=1) as producer,
        TransactionProducer("tp", url, namespace=namespace, checker=checker, sync_replicas=1) as tp,
    ):
        statuses = {producer.send(Message("t", b"now%d" % q), queue=MessageQueue("t", "broker-a", q)).status for q in range(6)}
        assert statuses == {SendStatus.SEND_OK}
        assert producer.send(Message("t", b"later", delay_level=1)).status is SendStatus.SEND_OK
        assert (
            tp.send_message_in_transaction(Message("t", b"tx"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE).status
            is SendStatus.SEND_OK
        )
        wanted = {b"now%d" % q for q in range(6)} | {b"later", b"tx"}
        wait_for(lambda: wanted <= set(seen), 20, "every message consumed")


@pytest.mark.cluster
@pytest.mark.fault
def test_cluster_failover_is_followed_without_restart(replicated_cluster: RedisClusterProcs, namespace: str) -> None:
    cluster = replicated_cluster
    url = cluster.url
    admin_once(url, namespace).create_topic("t", read_queues=6, write_queues=6)
    seen: list[bytes] = []
    with (
        _collecting_consumer(url, namespace, "t", seen),
        Producer("p", url, namespace=namespace, sync_replicas=1) as synced,
        Producer("p0", url, namespace=namespace) as plain,
    ):
        synced.send(Message("t", b"before"))
        wait_for(lambda: b"before" in seen, 20, "the first message consumed")
        _fail_over_under_load(plain, "t", lambda: cluster.wait_promoted(cluster.kill_master(cluster.masters - 1)))
        # every queue takes sends again, on the plain and the synced producer (the promoted master has no
        # replica now: synced sends to it are stored but not confirmed)
        # A client that was idle meets the dead node once: that call fails fast (MQBrokerError) and
        # re-reads the topology; from then on it serves from the promoted replica.
        failures = {"plain": 0, "synced": 0}
        for q in range(6):
            for name, producer, body in (("plain", plain, b"after%d" % q), ("synced", synced, b"synced%d" % q)):
                for _ in range(2):
                    try:
                        status = producer.send(Message("t", body), queue=MessageQueue("t", "broker-a", q)).status
                    except MQBrokerError:
                        failures[name] += 1
                        continue
                    assert status in (SendStatus.SEND_OK, SendStatus.FLUSH_SLAVE_TIMEOUT)
                    break
        assert failures["plain"] <= 1 and failures["synced"] <= 1, failures
        wait_for(lambda: {b"after%d" % q for q in range(6)} <= set(seen), 30, "messages sent after the promotion consumed")


def test_compose_profile_ha_has_a_master_a_replica_and_three_sentinels() -> None:
    import pathlib

    import yaml

    root = pathlib.Path(__file__).resolve().parents[2] / "docker"
    services = yaml.safe_load((root / "docker-compose.yml").read_text())["services"]
    ha = {name: s for name, s in services.items() if s.get("profiles") == ["ha"]}
    replica = ha["redis-ha-replica"]["command"]
    assert "--replicaof" in replica and replica[replica.index("--replicaof") + 1] == "redis-ha-master"
    sentinels = [n for n, s in ha.items() if s["command"] == ["sh", "/usr/local/bin/sentinel.sh"]]
    assert len(sentinels) == 3
    script = (root / "sentinel.sh").read_text()
    assert "sentinel monitor mymaster ${SENTINEL_MASTER_HOST:-redis-ha-master} 6379 2" in script and "--sentinel" in script
    broker = ha["broker-ha"]["command"]
    assert broker[2].startswith("redis+sentinel://") and broker[2].endswith("/mymaster/0")
    assert broker[broker.index("--sync-replicas") + 1] == "1"
    parse_sentinel_url(broker[2])  # a valid URL


def test_orderly_lock_through_the_store_is_trusted_only_when_a_replica_has_it(sentinel: SentinelProcs, namespace: str) -> None:
    """The store-level option orderly locks use (D36): lock-queue with WAIT 1 in the same pipeline."""
    from mq.errors import ReplicaAckTimeout
    from mq.store.replication import SyncReplicas

    store = owned(Store(Connection(sentinel.url, namespace)))
    lock = store.queue_keys("t", 0).lock("g")
    call = ("lock-queue", [lock], ["client-a", 12_000])
    sync = SyncReplicas(1, 200)
    assert store.write_scripts([call], sync=sync) == [1]  # held and on the replica
    with sentinel.replicas[0].client() as replica:
        assert replica.get(lock) == b"client-a" and 0 < replica.pttl(lock) <= 12_000
    sentinel.replicas[0].stop()
    [renewed] = store.write_scripts([call], sync=sync)
    assert isinstance(renewed, ReplicaAckTimeout) and renewed.result == 1  # renewed on the master, not trusted
    assert store.write_scripts([call]) == [1]  # the store's own setting (0): no WAIT
    # the consumer's entry point: lock_queues(…, sync=…) counts an unconfirmed lock as not held
    queue = MessageQueue("t", "broker-a", 1)
    assert store.lock_queues("g", "client-a", [queue], 12_000, sync=sync) == [False]
    assert store.lock_queues("g", "client-a", [queue], 12_000) == [True]  # taken on the master all the same
    assert store.lock_queues("g", "client-b", [queue], 12_000, sync=sync) == [False]
    sentinel.replicas[0].start()
    wait_for(lambda: store.lock_queues("g", "client-a", [queue], 12_000, sync=sync) == [True], 15, "a confirmed renewal")
    store.conn.close()


def test_sync_send_is_one_round_trip(sentinel: SentinelProcs, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import redis.connection

    admin_once(sentinel.url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer("p", sentinel.url, namespace=namespace, sync_replicas=1) as producer:
        producer.send(Message("t", b"warm-up"))  # loads the script, opens the connection
        writes: list[bytes] = []
        original = redis.connection.AbstractConnection.send_packed_command

        def counting(self, command, check_health=True):  # type: ignore[no-untyped-def]
            writes.append(b"".join(command) if isinstance(command, list) else command)
            return original(self, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
        assert producer.send(Message("t", b"x")).status is SendStatus.SEND_OK
    monkeypatch.undo()
    assert len(writes) == 1, writes  # EVALSHA and WAIT went out together
    assert b"EVALSHA" in writes[0] and b"WAIT" in writes[0]


def test_unconfirmed_send_counts_as_a_fault_of_its_node(sentinel: SentinelProcs, namespace: str) -> None:
    admin_once(sentinel.url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer(
        "p", sentinel.url, namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=100, send_latency_fault_enable=True
    ) as producer:
        assert producer.send(Message("t", b"a")).status is SendStatus.SEND_OK
        node = producer._conn.node_of(producer._store.queue_keys("t", 0).meta)
        assert producer._fault.is_available(node)
        sentinel.replicas[0].stop()
        assert producer.send(Message("t", b"b")).status is SendStatus.FLUSH_SLAVE_TIMEOUT
        assert not producer._fault.is_available(node)  # not counted as a good send


def test_mq_command_takes_a_sentinel_url(sentinel: SentinelProcs, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mq.cli.main import main

    assert main(["topic", "create", "cli", "--url", sentinel.url, "--namespace", namespace]) == 0
    assert main(["send", "cli", "hello", "--keys", "k1", "--url", sentinel.url, "--namespace", namespace]) == 0
    assert main(["query", "cli", "--key", "k1", "--url", sentinel.url, "--namespace", namespace]) == 0
    assert "hello" in capsys.readouterr().out


def test_an_orderly_consumer_with_sync_replicas_trusts_only_confirmed_locks(sentinel: SentinelProcs, namespace: str) -> None:
    """sync_replicas=1 on an orderly consumer: with its replica it consumes; without one no lock is
    confirmed, so it never starts a batch (a lock a failover could lose is never trusted, D36)."""
    from mq import ConsumeOrderlyStatus, PushConsumer
    from tests.procs import wait_for

    url = sentinel.url
    admin_once(url, namespace).create_topic("o", read_queues=2, write_queues=2)
    got: list[bytes] = []

    def consumer(group: str) -> PushConsumer:
        c = PushConsumer(group, url, namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=200)
        c.subscribe("o")
        c.register_orderly_listener(lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeOrderlyStatus.SUCCESS)
        return c

    with consumer("og") as first, Producer("p", url, namespace=namespace) as producer:
        wait_for(lambda: len([q for q in first.assigned_queues() if q.topic == "o"]) == 2, 15, "both queues assigned")
        producer.send(Message("o", b"confirmed"))
        wait_for(lambda: got == [b"confirmed"], 15, "consumption under confirmed locks")
    sentinel.replicas[0].stop()
    with consumer("og2"), Producer("p", url, namespace=namespace) as producer:
        producer.send(Message("o", b"unconfirmed"))
        # three seconds of lock rounds from the start (an orderly queue is taken on once its lock is
        # confirmed, so there is no "assigned" to wait for): none is confirmed, so no batch starts
        stays_quiet(lambda: len(got), "the deliveries", quiet_s=3.0)
    assert got == [b"confirmed"]  # no confirmed lock, no batch


@pytest.mark.cluster
@pytest.mark.fault
@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_wait_on_a_queues_node_follows_a_cluster_failover(
    replicated_cluster: RedisClusterProcs, namespace: str, driver: str
) -> None:
    """A long-poll wait and a commit-and-wait run as a pipeline on the node serving the queue; after
    its master handed the slot to its replica (and stayed up as a replica, answering MOVED), the next
    call goes to the promoted node instead of failing on the old one for good."""
    cluster = replicated_cluster
    q = MessageQueue("t", "b", 0)
    setup = owned(Store(Connection(cluster.url, namespace)))
    setup.save_topic(TopicConfig("t", 1, 1))
    setup.put("t", 0, [codec.encode(Message("t", b"m%d" % i), f"id{i}", 1) for i in range(3)])
    setup.claim_queues("g", "c1", ["c1"], [q])
    log = setup.queue_keys("t", 0).log
    port = setup.conn.client.get_node_from_key(log).port
    master = next(i for i, node in enumerate(cluster.nodes) if node.port == port)

    def fail_over() -> None:
        successor = cluster.replica_of(master)
        with cluster.nodes[master].probe() as c:
            written = int(c.info("replication")["master_repl_offset"])

        def caught_up() -> bool:
            with cluster.nodes[successor].probe() as c:
                return int(c.info("replication").get("slave_repl_offset", -1)) >= written

        wait_for(caught_up, 10, "the replica has the queue's messages")
        with cluster.nodes[successor].probe() as c:
            # the replica takes the slots at once; the old master stays up and turns replica (MOVED)
            c.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        cluster.wait_promoted(successor)
        assert cluster.role(master) == "slave"

    def check(waited: Any, committed: Any) -> None:
        rewound, news = waited
        assert rewound is None and news is not None and [m.body for m in news[0]] == [b"m1", b"m2"]
        held, rewound, news = committed
        assert held is True and rewound is None and news is not None and news[1] == 3

    if driver == "sync":
        store = owned(Store(Connection(cluster.url, namespace)))
        check(
            store.wait_for_messages(q, 1, 5, 10, group="g"),
            store.commit_and_wait("g", q, 1, 1, 5, 10, guard="owner", client_id="c1"),
        )
        fail_over()
        check(
            store.wait_for_messages(q, 1, 5, 10, group="g"),
            store.commit_and_wait("g", q, 1, 1, 5, 10, guard="owner", client_id="c1"),
        )
        store.conn.close()
    else:

        async def run() -> None:
            conn = owned(Connection(cluster.url, namespace))
            store = AsyncStore(conn)

            async def both() -> None:
                waited = await store.wait_for_messages(q, 1, 5, 10, group="g")
                check(waited, await store.commit_and_wait("g", q, 1, 1, 5, 10, guard="owner", client_id="c1"))

            try:
                await both()
                await asyncio.to_thread(fail_over)
                await both()
            finally:
                await conn.aclose()

        asyncio.run(run())
    setup.conn.close()
