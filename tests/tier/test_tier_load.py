"""Issue 28's acceptance run, scaled to this machine: a topic fed with 10x the Redis ``maxmemory`` of
1 KiB messages while a broker service with a tier and ``hot_retention_bytes`` runs — on a standalone
server and on a three-master cluster (every master bounded, each fed 10x its own bound), with the tier
on a folder and on a real S3 HTTP endpoint (moto's server). Redis memory stays under its bound on every
node (sampled all along), and every SEND_OK message is read back exactly once from offset 0, byte for
byte, by a PullConsumer and by a new push group with FIRST_OFFSET."""

from __future__ import annotations

import contextlib
import pathlib
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue, Producer, PushConsumer
from mq.errors import MQBrokerError
from mq.keys import Keys
from mq.model.message import MessageExt
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, stays_quiet
from tests.s3_server import MotoServer
from tests.servers import RedisClusterProcs, RedisServer
from tests.tier_helpers import read_from_first

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: Each master's bound (noeviction). Smaller makes the run shorter, but an empty node already uses
#: about 1 MiB and the bound must leave room for the hot heads (``HOT_BYTES`` a queue) and the
#: uploader's reads.
MAXMEMORY = 4 * 1024 * 1024
HOT_BYTES = 512 * 1024
TOPIC = "big"
BATCH = 32
BUCKET = "load-tier"
REDIS_ARGS = ["--maxmemory", str(MAXMEMORY), "--maxmemory-policy", "noeviction"]


def _body(n: int) -> bytes:
    """1 KiB that says which message it is (checked byte for byte on the way back)."""
    return n.to_bytes(8, "big") * 128


@contextlib.contextmanager
def _redis(kind: str) -> Iterator[tuple[str, list[RedisServer]]]:
    """(url, the masters): one bounded server, or a three-master cluster whose every node is bounded."""
    if kind == "standalone":
        with RedisServer(extra_args=REDIS_ARGS) as server:
            yield server.url, [server]
        return
    cluster = RedisClusterProcs()
    for node in cluster.nodes:
        node.extra_args += REDIS_ARGS
    with cluster:
        yield cluster.url, cluster.nodes


@contextlib.contextmanager
def _tier(kind: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if kind == "folder":
        yield f"file://{tmp_path}/tier"
        return
    s3 = MotoServer().start()
    try:
        for name, value in s3.env().items():
            monkeypatch.setenv(name, value)
        s3.create_bucket(BUCKET)
        yield f"s3://{BUCKET}/load"
    finally:
        s3.stop()


def _queues_by_node(nodes: list[RedisServer], ns: str, queues: int) -> dict[int, list[int]]:
    """Which queues of the topic each master holds (by index into ``nodes``): a node answers a read of a
    key it does not serve with MOVED."""
    if len(nodes) == 1:
        return {0: list(range(queues))}
    owner: dict[int, list[int]] = {}
    for q in range(queues):
        key = Keys(ns).queue(TOPIC, q).log
        for i, node in enumerate(nodes):
            with node.client() as c:
                try:
                    c.exists(key)
                except redis.exceptions.MovedError:
                    continue
            owner.setdefault(i, []).append(q)
    return owner


def _topic_queues(nodes: list[RedisServer], ns: str) -> dict[int, list[int]]:
    """The fewest queues (two at least) that put one on every master, by node."""
    for queues in range(2, 64):
        owner = _queues_by_node(nodes, ns, queues)
        if len(owner) == len(nodes):
            return owner
    raise AssertionError("no 64 queues span the masters")


@pytest.mark.parametrize("tier", ["folder", "s3"])
@pytest.mark.parametrize("kind", ["standalone", pytest.param("cluster", marks=pytest.mark.cluster)])
def test_ten_times_maxmemory_through_a_tier_reads_back_exactly_once(
    kind: str, tier: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = "load"
    with _redis(kind) as (url, nodes), _tier(tier, tmp_path, monkeypatch) as tier_url:
        by_node = _topic_queues(nodes, ns)
        queues = 1 + max(q for qs in by_node.values() for q in qs)
        admin_once(url, ns).create_topic(TOPIC, read_queues=queues, write_queues=queues)
        config = BrokerConfig(
            tier_url=tier_url,
            hot_retention_bytes=HOT_BYTES,  # per queue
            tier_interval_s=0.2,
            tier_segment_messages=4000,
            tier_segment_age_s=1.0,
        )
        peak, stop = [0] * len(nodes), threading.Event()

        def sample() -> None:
            clients = [n.client() for n in nodes]
            while not stop.is_set():
                for i, client in enumerate(clients):
                    peak[i] = max(peak[i], int(client.info("memory")["used_memory"]))
                time.sleep(0.05)
            for client in clients:
                client.close()

        sampler = threading.Thread(target=sample)
        sent: dict[tuple[int, int], int] = {}  # (queue, offset) -> message number, SEND_OK only
        fed = [0] * len(nodes)  # SEND_OK bytes per master
        turn = [0] * len(nodes)
        refused = 0
        with BrokerService(url, ns, config):
            sampler.start()
            with Producer("load", url, namespace=ns) as producer:
                n = 0
                while min(fed) < 10 * MAXMEMORY:  # every master gets 10x its bound, SEND_OK
                    node = fed.index(min(fed))
                    qid = by_node[node][turn[node] % len(by_node[node])]
                    turn[node] += 1
                    try:
                        result = producer.send_batch(
                            [Message(TOPIC, _body(i)) for i in range(n, n + BATCH)], queue=MessageQueue(TOPIC, "broker-a", qid)
                        )
                    except MQBrokerError:  # full: not SEND_OK, not expected back
                        refused += 1
                        time.sleep(0.05)  # paces the producer while the store is full
                    else:
                        for k in range(BATCH):
                            sent[(qid, result.queue_offset + k)] = n + k
                        fed[node] += BATCH * 1024
                    n += BATCH
            time.sleep(1.0)  # the sampler watches the uploader catch up for a second more
            stop.set()
            sampler.join()
            pulled = read_from_first(url, ns, "replay", TOPIC, len(sent), batch=256)
            pushed: list[MessageExt] = []
            lock, done = threading.Lock(), threading.Event()

            def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
                with lock:
                    pushed.extend(msgs)
                    if len(pushed) >= len(sent):
                        done.set()
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            consumer = PushConsumer("replay-push", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
            consumer.subscribe(TOPIC)
            consumer.register_message_listener(listener)
            with consumer:
                assert done.wait(120)
                stays_quiet(lambda: len(pushed), "the deliveries")
        print(f"{kind}/{tier}: sent {len(sent)} messages over {queues} queues, per master "
              f"{[round(f / MAXMEMORY, 1) for f in fed]}x maxmemory, {refused} batches refused, "
              f"peak used_memory per master {peak} of {MAXMEMORY}")  # fmt: skip
    assert min(fed) >= 10 * MAXMEMORY and sum(fed) == len(sent) * 1024
    # Redis refuses a write once used_memory is over maxmemory, so the last write admitted just under it
    # (a 32 KiB batch and its index entries) and the connections' reply buffers (a 256-message read of
    # the uploader: 256 KiB) can take it over by that much, never more: the bound is maxmemory + 1 MiB.
    assert all(p > 0 for p in peak) and max(peak) <= MAXMEMORY + 1024 * 1024
    for got in (pulled, pushed):
        where = Counter((m.queue_id, m.queue_offset) for m in got)
        assert set(where) == set(sent) and max(where.values()) == 1  # every SEND_OK message, once
        assert all(m.body == _body(sent[(m.queue_id, m.queue_offset)]) for m in got)  # byte for byte
