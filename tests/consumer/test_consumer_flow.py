"""How a push consumer shares pulled messages among its workers and how flow control bounds what it
caches (issue 19: worker tasks sized by the queue's share of the workers, a flow-control flag)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue, Producer, PushConsumer
from mq.consumer import puller, push
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.push import DEFAULT_PULL_BATCH_SIZE
from mq.model.message import MessageExt
from tests.helpers import admin_once
from tests.procs import wait_for


def _fill(url: str, namespace: str, topic: str, n: int) -> None:
    with Producer("p", url, namespace=namespace) as producer:
        for low in range(0, n, 256):
            batch = [Message(topic, b"%d" % i) for i in range(low, min(n, low + 256))]
            producer.send_batch(batch, queue=MessageQueue(topic, "broker-a", 0))


def test_a_pull_of_one_queue_is_shared_by_several_workers(redis_server: Any, namespace: str) -> None:
    """One queue, 4 workers, a listener that takes a while: the messages of one pull run on several
    threads at once (a single task for the whole pull would run them one after the other)."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("W", read_queues=1, write_queues=1)
    _fill(url, namespace, "W", 8)
    lock = threading.Lock()
    running, most, threads, bodies = [0], [0], set(), []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            threads.add(threading.current_thread().name)
        time.sleep(0.2)
        with lock:
            running[0] -= 1
            bodies.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("w", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, consume_thread_max=4)
    consumer.subscribe("W")
    consumer.register_message_listener(listener)
    with consumer:
        wait_for(lambda: len(bodies) == 8, 15, "every message consumed")
    assert sorted(bodies) == sorted(b"%d" % i for i in range(8))
    assert most[0] >= 2 and len(threads) >= 2, f"at most {most[0]} listener call(s) at once on {threads}"


def test_flow_control_bounds_the_cache_and_consuming_resumes_pulling(
    redis_server: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the listener held, a queue caches at most the threshold plus one pull; once the listener
    is let go, consuming frees room, the puller resumes and every message is consumed once."""
    monkeypatch.setattr(puller, "PULL_THRESHOLD_FOR_QUEUE", 64)
    url = redis_server.url
    admin_once(url, namespace).create_topic("F", read_queues=1, write_queues=1)
    total = 600
    _fill(url, namespace, "F", total)
    gate = threading.Event()
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        gate.wait(30)
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("f", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, consume_thread_max=2)
    consumer.subscribe("F")
    consumer.register_message_listener(listener)
    with consumer:
        core = consumer._core
        assert core is not None
        wait_for(lambda: any(pq.count for pq in core.process_queues.values()), 10, "a first pull")
        cached = []
        for _ in range(15):  # 1.5 s: the puller would have pulled all 600 without the bound
            cached.append(sum(pq.count for pq in core.process_queues.values()))
            time.sleep(0.1)
        pq = next(pq for queue, pq in core.process_queues.items() if queue.topic == "F")
        assert pq.flow_paused, "the puller left the queue out for flow control"
        gate.set()
        wait_for(lambda: len(got) == total, 20, "every message consumed after the listener was let go")
    assert max(cached) <= 64 + DEFAULT_PULL_BATCH_SIZE, f"cached up to {max(cached)} messages"
    assert max(cached) > 64, "the cache filled up to the threshold"
    assert sorted(got) == sorted(b"%d" % i for i in range(total))


def test_a_failure_forgetting_consumed_messages_consumes_them_again_never_leaves_them_stuck(
    redis_server: Any, namespace: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The process queue forgets a task's consumed messages at the end of the task; when that fails,
    the messages are consumed again (as for a failure handling a listener's answer), so the queue's
    offset moves on."""
    monkeypatch.setattr(push, "LOCAL_RECONSUME_DELAY_S", 0.2)
    original = ProcessQueue.remove
    failures = [1]

    def remove_failing_once(self: ProcessQueue, msgs: list[MessageExt]) -> int:
        if failures[0] and self.queue.topic == "R":
            failures[0] -= 1
            raise RuntimeError("injected")
        return original(self, msgs)

    monkeypatch.setattr(ProcessQueue, "remove", remove_failing_once)
    url = redis_server.url
    admin_once(url, namespace).create_topic("R", read_queues=1, write_queues=1)
    _fill(url, namespace, "R", 3)
    got: list[bytes] = []
    consumer = PushConsumer("r", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("R")
    consumer.register_message_listener(
        lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    with caplog.at_level(logging.ERROR, logger="mq.consumer"), consumer:
        core = consumer._core
        assert core is not None
        wait_for(lambda: len(got) > 3, 10, "the messages consumed again")
        pq = next(pq for queue, pq in core.process_queues.items() if queue.topic == "R")
        wait_for(lambda: pq.count == 0 and pq.commit_offset() == 3, 10, "the queue's offset past every message")
    assert set(got) == {b"0", b"1", b"2"} and failures == [0]
    assert any("forgetting the consumed" in r.getMessage() and "consumed again" in r.getMessage() for r in caplog.records)
