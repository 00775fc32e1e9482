"""Issue 29, finding 1: a Redis whose ``maxmemory-policy`` evicts (an operator's mistake) removes
rocketredis's small bookkeeping keys — the topics hash, queue metas, group offsets — while the streams
still hold the messages. Clients must say so (not "topic does not exist"), ``create_topic`` must bring
a queue back with its offsets, ``mq doctor`` must find what was evicted, ``Admin.recover_topics`` /
``mq topic recover`` must rebuild it without lowering an offset, and the broker service must notice a
policy that changes while it runs. Evictions are made by deleting the keys Redis would evict (each test
its own key), and once for real: an ``allkeys-lru`` store filled past ``maxmemory``."""

from __future__ import annotations

import logging
import time
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mq import (
    Admin,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    MQError,
    Producer,
    PullConsumer,
    SimpleConsumer,
    StoreEvictedError,
    TopicNotFoundError,
    aio,
)
from mq.cli.main import main
from mq.keys import Keys
from mq.operator.doctor import FAIL, OK, check
from mq.store import Store
from mq.store.connection import Connection
from mq.store.groups import PullRequest
from scheduler import BrokerConfig, BrokerService
from scheduler.metrics import serve_metrics
from scheduler.storewatch import NodeReading, StoreWatch
from tests.helpers import raw_client
from tests.servers import RedisClusterProcs, RedisServer, free_port, wait_until

#: What every eviction error starts with (the issue's wording).
EVICTED = "Redis evicted rocketredis's keys: set maxmemory-policy noeviction"


def _evicted_findings(url: str, namespace: str) -> list[Any]:
    return [f for f in check(url, namespace) if f.check == "evicted keys"]


def _fill(url: str, namespace: str, topic: str, queues: int = 4, messages: int = 40) -> list[Any]:
    with Admin(url, namespace) as admin:
        admin.create_topic(topic, read_queues=queues, write_queues=queues)
    with Producer("pg", url, namespace=namespace) as producer:
        return [producer.send(Message(topic, b"m%d" % i)) for i in range(messages)]


def _consume_all(url: str, namespace: str, group: str, topic: str, expected: int, timeout_s: float = 30.0) -> list[Any]:
    """Every message a new group starting at FIRST_OFFSET reads of ``topic``, until ``expected`` came
    (or ``timeout_s`` passed: the caller's assertion then shows what is missing)."""
    got: list[Any] = []
    consumer = PullConsumer(group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    with consumer:
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(timeout_s=0.5)
    return got


# -- clients say what happened ------------------------------------------------------------------


def test_a_send_to_a_queue_whose_meta_was_evicted_says_what_to_do(backend_url: str, namespace: str) -> None:
    """Was: TopicNotFoundError "topic 'E' has no queue 2" (and a default send went silently to another queue)."""
    _fill(backend_url, namespace, "E")
    raw_client(backend_url).delete(Keys(namespace).queue("E", 2).meta)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        with pytest.raises(StoreEvictedError, match=EVICTED) as info:
            producer.send(Message("E", b"x"), queue=MessageQueue("E", "broker-a", 2))
        assert "mq topic recover E" in str(info.value) and "queue 2 of topic 'E'" in str(info.value)
        # a round-robin producer meets it too, instead of skipping the queue without a word
        with pytest.raises(StoreEvictedError, match=EVICTED):
            for i in range(8):
                producer.send(Message("E", b"y%d" % i))
        futures = [producer.send_async(Message("E", b"z%d" % i)) for i in range(8)]  # pipelined sends as well
        errors = [f.exception(timeout=30) for f in futures]
        assert [type(e) for e in errors].count(StoreEvictedError) == 2, errors  # queue 2's, not resent elsewhere
        assert all(e is None or EVICTED in str(e) for e in errors)


@pytest.mark.anyio
async def test_asyncio_admin_recovers_and_asyncio_producer_says_what_to_do(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    _fill(url, namespace, "A", queues=2, messages=4)
    raw_client(url).hdel(Keys(namespace).topics, "A")
    async with aio.Producer("pg", url, namespace=namespace) as producer:
        with pytest.raises(StoreEvictedError, match=EVICTED):
            await producer.send(Message("A", b"x"))
    async with aio.Admin(url, namespace) as admin:
        (done,) = await admin.recover_topics()
        assert (done.topic, done.config_rebuilt) == ("A", True)
        assert (await admin.topic_config("A")).write_queues == 2


def test_a_send_to_a_topic_whose_config_was_evicted_says_what_to_do(backend_url: str, namespace: str) -> None:
    """Was: TopicNotFoundError "topic 'F' does not exist"; a topic that never existed still says that."""
    _fill(backend_url, namespace, "F")
    raw_client(backend_url).hdel(Keys(namespace).topics, "F")
    with Producer("pg", backend_url, namespace=namespace) as producer:
        with pytest.raises(StoreEvictedError, match=EVICTED) as info:
            producer.send(Message("F", b"x"))
        assert "topic 'F' has stored queues but no config" in str(info.value)
        with pytest.raises(TopicNotFoundError, match="does not exist"):
            producer.send(Message("never-created", b"x"))
        with pytest.raises(StoreEvictedError, match=EVICTED):  # a delayed send's path as well
            producer.send(Message("F", b"later", delay_level=1))


def test_consumers_of_evicted_keys_say_what_to_do(backend_url: str, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """A pull of a queue without meta was read as an empty queue at offset 0 (a consumer moved back
    there); a simple consumer said "topic does not exist"; a push or pull consumer logged it at INFO."""
    _fill(backend_url, namespace, "C")
    raw = raw_client(backend_url)
    raw.delete(Keys(namespace).queue("C", 1).meta)
    conn = Connection(backend_url, namespace)
    try:
        store = Store(conn)
        (result,) = store.pull_many([PullRequest("C", 1, offset=5, max_messages=4, max_scan=4, group="g", commit=5)])
        for fifo in (False, True):  # a simple consumer's receive: was read as empty, a new group's cursor set to 0
            with pytest.raises(StoreEvictedError, match=EVICTED):
                store.receive_simple(
                    "sg", MessageQueue("C", "broker-a", 1), now_ms=int(time.time() * 1000), invisible_ms=30_000,
                    max_messages=4, max_attempts=16, filter_type="", filter_data="", max_scan=16, fifo=fifo,
                )  # fmt: skip
    finally:
        conn.close()
    assert isinstance(result, StoreEvictedError) and EVICTED in str(result)
    assert raw.hgetall(Keys(namespace).queue("C", 1).offsets) == {}  # nothing committed, no cursor set

    raw.hdel(Keys(namespace).topics, "C")
    simple = SimpleConsumer("sg", backend_url, namespace=namespace, subscriptions={"C": "*"})
    try:
        with pytest.raises(StoreEvictedError, match=EVICTED):
            simple.start()
    finally:
        simple.shutdown()
    consumer = PullConsumer("pcg", backend_url, namespace=namespace)
    consumer.subscribe("C", "*")
    with caplog.at_level(logging.INFO, logger="mq"), consumer:
        consumer.poll(timeout_s=0.2)
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "'C'" in r.getMessage()]
    assert len(errors) == 1 and EVICTED in errors[0]


def test_create_topic_again_brings_an_evicted_queue_back_with_its_offsets(backend_url: str, namespace: str) -> None:
    """Was: the queue's meta came back without its seq, every send to it failed ("corrupt queue") and
    the producer's fault tolerance skipped it from then on."""
    _fill(backend_url, namespace, "G", queues=4, messages=40)  # 10 a queue
    raw = raw_client(backend_url)
    raw.delete(Keys(namespace).queue("G", 2).meta)
    with Admin(backend_url, namespace) as admin:
        admin.create_topic("G", read_queues=4, write_queues=4)
        with Producer("pg", backend_url, namespace=namespace) as producer:
            pinned = producer.send(Message("G", b"again"), queue=MessageQueue("G", "broker-a", 2))
            assert pinned.queue_offset == 10  # offsets 0-9 are stored: none reused
            after = [producer.send(Message("G", b"after %d" % i)) for i in range(40)]
        assert {r.message_queue.queue_id for r in after} == {0, 1, 2, 3}
        assert admin.topic_status("G")[MessageQueue("G", "broker-a", 2)].max_offset == 21
    assert len(_consume_all(backend_url, namespace, "cg", "G", 81)) == 81


# -- doctor and recovery ------------------------------------------------------------------------


def test_doctor_finds_and_recover_rebuilds_evicted_configs_metas_and_offsets(backend_url: str, namespace: str) -> None:
    keys = Keys(namespace)
    raw = raw_client(backend_url)
    _fill(backend_url, namespace, "R", queues=4, messages=40)
    _fill(backend_url, namespace, "S", queues=2, messages=10)
    _fill(backend_url, namespace, "O", queues=2, messages=4)
    assert [f.level for f in _evicted_findings(backend_url, namespace)] == [OK]

    raw.hdel(keys.topics, "R")  # topic R: config gone, queue 3's meta too, queue 1's log trimmed empty
    raw.delete(keys.queue("R", 3).meta)
    raw.xtrim(keys.queue("R", 1).log, maxlen=0)
    raw.delete(keys.queue("R", 1).meta)
    raw.delete(keys.queue("S", 0).meta)  # topic S: one meta, its log gone too, a group's offset left
    raw.delete(keys.queue("S", 0).log)
    raw.hset(keys.queue("S", 0).offsets, "late", 7)
    raw.hset(keys.queue("S", 1).meta, "seq", 50)  # a seq above the log's: never lowered
    raw.hdel(keys.topics, "O")  # topic O: config and logs gone, the offsets of a group left
    for q in range(2):
        raw.delete(keys.queue("O", q).meta, keys.queue("O", q).log, keys.queue("O", q).ids)
        raw.hset(keys.queue("O", q).offsets, "g", 2)

    found = {f.text for f in _evicted_findings(backend_url, namespace)}
    assert all(f.startswith("Redis evicted rocketredis's keys: topic ") for f in found), found
    assert any("'R': queue streams without a topic config (queues 0-3); run `mq topic recover R`" in f for f in found)
    assert any("'O': group offsets of a topic without a config (queues 0-1)" in f for f in found)
    assert [f.level for f in _evicted_findings(backend_url, namespace)] == [FAIL] * len(found)
    assert main(["doctor", "--url", backend_url, "--namespace", namespace]) == 1

    with Admin(backend_url, namespace) as admin:
        with pytest.raises(TopicNotFoundError, match="nothing to recover"):
            admin.recover_topics(["no-such-topic"])
        done = {r.topic: r for r in admin.recover_topics()}
        assert (done["R"].config_rebuilt, done["R"].queues_restored) == (True, (1, 3))
        assert (done["S"].config_rebuilt, done["S"].queues_restored) == (False, (0,))
        assert (done["O"].config_rebuilt, done["O"].queues_restored) == (True, (0, 1))
        assert [f.level for f in _evicted_findings(backend_url, namespace)] == [OK]
        assert (admin.topic_config("R").read_queues, admin.topic_config("O").write_queues) == (4, 2)
        again = admin.recover_topics(["R", "S"])  # safe to run again: nothing left to do
        assert [(r.config_rebuilt, r.queues_restored) for r in again] == [(False, ()), (False, ())]

        with Producer("pg", backend_url, namespace=namespace) as producer:
            assert producer.send(Message("R", b"x"), queue=MessageQueue("R", "broker-a", 1)).queue_offset == 10
            assert producer.send(Message("R", b"x"), queue=MessageQueue("R", "broker-a", 3)).queue_offset == 10
            assert producer.send(Message("S", b"x"), queue=MessageQueue("S", "broker-a", 0)).queue_offset == 7
            assert producer.send(Message("S", b"x"), queue=MessageQueue("S", "broker-a", 1)).queue_offset == 50
            assert producer.send(Message("O", b"x"), queue=MessageQueue("O", "broker-a", 0)).queue_offset == 2
    # every message R's streams still hold (queue 1 was trimmed) and the new ones are read again
    assert len(_consume_all(backend_url, namespace, "rg", "R", 32)) == 32


def test_mq_topic_recover_prints_what_it_did(
    redis_server: RedisServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = redis_server.url
    _fill(url, namespace, "P", queues=2, messages=6)
    raw_client(url).hdel(Keys(namespace).topics, "P")
    raw_client(url).delete(Keys(namespace).queue("P", 1).meta)
    capsys.readouterr()
    assert main(["topic", "recover", "P", "--url", url, "--namespace", namespace]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[0].split() == ["TOPIC", "CONFIG", "QUEUES_RESTORED"] and lines[1].split() == ["P", "rebuilt", "1"]


@pytest.mark.parametrize("topology", ["standalone", pytest.param("cluster", marks=pytest.mark.cluster)])
def test_an_allkeys_lru_store_filled_past_maxmemory_is_found_and_recovered(topology: str, namespace: str) -> None:
    """The issue's run: Redis evicts bookkeeping keys while the messages' streams stay; doctor reports
    it, and after the operator sets noeviction, recover makes every message a stream still holds
    readable by a consumer, and new sends never reuse an offset."""
    if topology == "standalone":
        with RedisServer() as server:
            _evict_and_recover(server.url, namespace, [server.client()])
    else:
        with RedisClusterProcs() as cluster:
            _evict_and_recover(cluster.url, namespace, [n.client() for n in cluster.nodes])


def _evict_and_recover(url: str, namespace: str, nodes: list[Any]) -> None:
    keys = Keys(namespace)
    raw = raw_client(url)
    with Admin(url, namespace) as admin:
        admin.create_topic("orders", read_queues=8, write_queues=8)
        for node in nodes:  # room for a few MB of messages above what the server uses already
            used = int(node.info("memory")["used_memory"])
            node.config_set("maxmemory", used + 3 * 1024 * 1024)
            node.config_set("maxmemory-policy", "allkeys-lru")
        sent: set[str] = set()
        refused: list[str] = []
        body = b"o" * 1024
        deadline = time.monotonic() + 60
        with Producer("pg", url, namespace=namespace) as producer:
            while time.monotonic() < deadline:
                try:
                    sent.add(producer.send(Message("orders", body)).msg_id)
                except MQError as e:
                    refused.append(str(e))
                evicted = sum(int(n.info("stats")["evicted_keys"]) for n in nodes)
                metas = [raw.exists(keys.queue("orders", q).meta) for q in range(8)]
                if evicted and (not raw.hexists(keys.topics, "orders") or not all(metas)) and len(sent) >= 500:
                    break
        assert evicted, "the store never evicted"
        assert not raw.hexists(keys.topics, "orders") or not all(metas), "no bookkeeping key was evicted"
        assert all(EVICTED in e for e in refused[-1:]), refused[-1:]  # a send that met it said so

        findings = check(url, namespace)
        assert any(f.level == FAIL and f.check.startswith("maxmemory-policy") for f in findings)
        assert any(f.level == FAIL and f.check == "evicted keys" and "'orders'" in f.text for f in findings)

        for node in nodes:  # the operator's fix, then the recovery
            node.config_set("maxmemory-policy", "noeviction")
            node.config_set("maxmemory", 0)
        stored: dict[int, dict[str, int]] = {}  # queue -> msg id -> offset, as the streams hold them
        for q in range(8):
            entries = raw.xrange(keys.queue("orders", q).log)
            stored[q] = {fields[b"i"].decode(): int(eid.decode().partition("-")[2]) - 1 for eid, fields in entries}
        held = {m for q in stored.values() for m in q}
        assert held and held <= sent  # only SEND_OK messages are stored
        admin.recover_topics()
        assert [f.level for f in check(url, namespace) if f.check == "evicted keys"] == [OK]

    got = _consume_all(url, namespace, "after-recovery", "orders", len(held))
    assert sorted(m.msg_id for m in got) == sorted(held)
    with Producer("pg2", url, namespace=namespace) as producer:
        for q in range(8):
            offset = producer.send(Message("orders", b"new"), queue=MessageQueue("orders", "broker-a", q)).queue_offset
            assert offset > max(stored[q].values(), default=-1)


# -- the broker service notices ------------------------------------------------------------------


def test_store_watch_logs_once_per_state_change() -> None:
    watch = StoreWatch()

    def reading(policy: str | None, evicted: int = 0, used: int = 10) -> list[NodeReading]:
        return [NodeReading("n:1", policy, used, 100, evicted)]

    assert watch.observe(reading("noeviction")) == []
    (bad,) = watch.observe(reading("allkeys-lru"))
    assert bad[0] == logging.ERROR and "maxmemory-policy is allkeys-lru" in bad[1]
    assert watch.observe(reading("allkeys-lru")) == []  # not again while it stays
    (evicting,) = watch.observe(reading("allkeys-lru", evicted=5))
    assert evicting[0] == logging.ERROR and "evicted 5 keys" in evicting[1]
    assert watch.observe(reading("allkeys-lru", evicted=9)) == []
    assert [level for level, _ in watch.observe(reading("allkeys-lru", evicted=9))] == [logging.WARNING]
    (good,) = watch.observe(reading("noeviction", evicted=9))
    assert good[0] == logging.WARNING and "noeviction again" in good[1]
    (full,) = watch.observe(reading("noeviction", evicted=9, used=95))
    assert full[0] == logging.WARNING and "95%" in full[1] and "writes are refused" in full[1]
    assert watch.observe(reading("noeviction", evicted=9, used=96)) == []
    assert [level for level, _ in watch.observe(reading(None, evicted=9))] == [logging.WARNING, logging.INFO]
    assert watch.observe(reading(None, evicted=9)) == []


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_broker_service_rechecks_the_policy_while_it_runs(namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """Was: the policy was checked at start only; a CONFIG SET afterwards went unnoticed."""
    with RedisServer() as server, caplog.at_level(logging.INFO, logger="scheduler"):
        node = f"127.0.0.1:{server.port}"
        config = BrokerConfig(store_check_interval_s=0.2)
        with BrokerService(server.url, namespace, config) as service:
            port = free_port()
            with serve_metrics(port, server.url, namespace, watch=service.store_watch):
                misconfigured = ("rocketredis_store_misconfigured", (("node", node),))
                assert _scrape(port)[misconfigured] == 0
                server.client().config_set("maxmemory-policy", "allkeys-lru")

                def errors() -> list[str]:
                    return [
                        r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "allkeys-lru" in r.getMessage()
                    ]

                wait_until(lambda: bool(errors()), 10, "the broker's ERROR about the policy")
                wait_until(lambda: _scrape(port)[misconfigured] == 1, 10, "the misconfigured gauge")
                _runs(service)  # counting from here
                wait_until(lambda: _runs(service) >= 3, 10, "3 more checks")
                assert len(errors()) == 1, errors()  # once per change, not at every check
                assert "set maxmemory-policy noeviction" in errors()[0]
                server.client().config_set("maxmemory-policy", "noeviction")
                wait_until(lambda: _scrape(port)[misconfigured] == 0, 10, "the gauge back at 0")
                assert any("noeviction again" in r.getMessage() for r in caplog.records)
                assert ("rocketredis_store_evicted_keys_total", (("node", node),)) in _scrape(port)


def test_a_misconfigured_policy_at_start_is_one_error_not_two(namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """Was: the start's store checks (``mq doctor``'s) and the store watch's first reading both logged
    the policy at ERROR. The watch says it, once, with what to do."""
    with RedisServer() as server, caplog.at_level(logging.INFO, logger="scheduler"):
        server.client().config_set("maxmemory-policy", "allkeys-lru")
        with BrokerService(server.url, namespace, BrokerConfig()):
            pass
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "allkeys-lru" in r.getMessage()]
    assert len(errors) == 1, errors
    assert "set maxmemory-policy noeviction" in errors[0]


def _runs(service: BrokerService) -> int:
    """Checks the service made since this was first asked (counted by wrapping its watch)."""
    watch = service.store_watch
    if not hasattr(watch, "_test_runs"):
        original = watch.observe

        def counting(readings: list[NodeReading]) -> list[tuple[int, str]]:
            watch._test_runs += 1  # type: ignore[attr-defined]
            return original(readings)

        watch._test_runs = 0  # type: ignore[attr-defined]
        watch.observe = counting  # type: ignore[method-assign]
    return int(watch._test_runs)  # type: ignore[attr-defined]
