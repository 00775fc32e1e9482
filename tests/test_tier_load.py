"""Issue 28's acceptance run, scaled to this machine: a topic fed with 10x the Redis ``maxmemory`` of
1 KiB messages while a broker service with a tier and ``hot_retention_bytes`` runs. Redis memory stays
under its bound (sampled all along), and every SEND_OK message is read back exactly once from offset 0,
byte for byte, by a PullConsumer and by a new push group with FIRST_OFFSET."""

from __future__ import annotations

import pathlib
import threading
import time
from collections import Counter

import pytest

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue, Producer, PushConsumer
from mq.errors import MQBrokerError
from mq.keys import Keys
from mq.message import MessageExt
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, stays_quiet
from tests.servers import RedisServer
from tests.tier_helpers import read_from_first

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MAXMEMORY = 8 * 1024 * 1024
TOPIC = "big"
QUEUES = 2
BATCH = 32


def _body(n: int) -> bytes:
    """1 KiB that says which message it is (checked byte for byte on the way back)."""
    return n.to_bytes(8, "big") * 128


def test_ten_times_maxmemory_through_a_tier_reads_back_exactly_once(tmp_path: pathlib.Path) -> None:
    with RedisServer(extra_args=["--maxmemory", str(MAXMEMORY), "--maxmemory-policy", "noeviction"]) as server:
        url, ns = server.url, "load"
        admin_once(url, ns).create_topic(TOPIC, read_queues=QUEUES, write_queues=QUEUES)
        config = BrokerConfig(
            tier_url=f"file://{tmp_path}/tier",
            hot_retention_bytes=1024 * 1024,  # per queue: 2 MiB of logs under an 8 MiB server
            tier_interval_s=0.2,
            tier_segment_messages=4000,
            tier_segment_age_s=1.0,
        )
        peak, logs_peak, stop = [0], [0], threading.Event()
        logs = [Keys(ns).queue(TOPIC, q).log for q in range(QUEUES)]

        def sample() -> None:
            client = server.client()
            while not stop.is_set():
                peak[0] = max(peak[0], int(client.info("memory")["used_memory"]))
                logs_peak[0] = max(logs_peak[0], sum(int(client.memory_usage(k, samples=0) or 0) for k in logs))
                time.sleep(0.05)
            client.close()

        sampler = threading.Thread(target=sample)
        sent: dict[tuple[int, int], int] = {}  # (queue, offset) -> message number, SEND_OK only
        refused = 0
        with BrokerService(url, ns, config):
            sampler.start()
            with Producer("load", url, namespace=ns) as producer:
                n = 0
                while n * 1024 < 10 * MAXMEMORY:
                    qid = (n // BATCH) % QUEUES
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
        print(f"sent {len(sent)} messages ({len(sent) * 1024 / MAXMEMORY:.1f}x maxmemory), {refused} batches refused, "
              f"peak used_memory {peak[0]} of {MAXMEMORY}, logs' peak {logs_peak[0]}")  # fmt: skip
    assert len(sent) * 1024 >= 9 * MAXMEMORY  # the uploader kept up with a producer at full speed: few refusals
    # Redis refuses a write once used_memory is over maxmemory, so the last write admitted just under it
    # (a 32 KiB batch and its index entries) and the connections' reply buffers (a 256-message read of
    # the uploader: 256 KiB) can take it over by that much, never more: the bound is maxmemory + 1 MiB.
    assert peak[0] <= MAXMEMORY + 1024 * 1024
    for got in (pulled, pushed):
        where = Counter((m.queue_id, m.queue_offset) for m in got)
        assert set(where) == set(sent) and max(where.values()) == 1  # every SEND_OK message, once
        assert all(m.body == _body(sent[(m.queue_id, m.queue_offset)]) for m in got)  # byte for byte
