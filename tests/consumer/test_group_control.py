"""What an operator does to a running group reaches its members (push, pull and simple consumers):
pause and resume, offset resets, group configs checked before any write, the runtime status members
publish. Standalone and cluster."""

from __future__ import annotations

import threading
import time

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from mq.errors import MQClientError
from tests.consumer.test_robustness import _fill
from tests.leaks import owned
from tests.procs import wait_for


def test_group_pause_and_resume_reach_push_pull_and_simple_consumers(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("G", read_queues=2, write_queues=2)
    for group in ("g-push", "g-pull", "g-simple"):
        admin.create_group(group, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pushed: list[bytes] = []
    push = PushConsumer("g-push", backend_url, namespace=namespace)
    push.subscribe("G")
    ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    push.register_message_listener(lambda msgs, ctx: pushed.extend(m.body for m in msgs) or ok)
    pull = PullConsumer("g-pull", backend_url, namespace=namespace)
    pull.subscribe("G")
    simple = SimpleConsumer("g-simple", backend_url, namespace=namespace, subscriptions={"G": "*"}, await_duration_s=0.5)
    pulled: list[bytes] = []
    received: list[bytes] = []

    def drain_pull_and_simple() -> None:
        pulled.extend(m.body for m in pull.poll(timeout_s=0.2))
        for v in simple.receive(max_messages=16):
            received.append(v.body)
            simple.ack(v)

    with push, pull, simple, Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("G", b"before"))
        wait_for(
            lambda: (drain_pull_and_simple(), b"before" in pushed and b"before" in pulled and b"before" in received)[1],
            15,
            "the first message everywhere",
        )
        for group in ("g-push", "g-pull", "g-simple"):
            admin.update_group(group, consume_enable=False)
        assert push._core is not None and pull._core is not None
        wait_for(  # each member sees the pause at its next heartbeat (1 s; the simple consumer's, in a receive)
            lambda: (
                drain_pull_and_simple(),
                not push._core.active()  # type: ignore[union-attr]
                and not pull._core.active()  # type: ignore[union-attr]
                and simple.group_config is not None
                and not simple.group_config.consume_enable,
            )[1],
            15,
            "every member to see its group paused",
        )
        producer.send(Message("G", b"paused"))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            drain_pull_and_simple()
        assert b"paused" not in pushed + pulled + received
        for group in ("g-push", "g-pull", "g-simple"):
            admin.update_group(group, consume_enable=True)
        wait_for(
            lambda: (drain_pull_and_simple(), b"paused" in pushed and b"paused" in pulled and b"paused" in received)[1],
            15,
            "the paused message after resume",
        )


def test_bad_group_configs_are_refused_before_anything_is_written(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers import snapshot

    url = redis_server.url
    admin = owned(Admin(url, namespace))
    before = snapshot(url, namespace)
    bad = [
        {"consume_enable": "yes"},
        {"retry_max_times": -1},
        {"retry_max_times": 1000},
        {"retry_max_times": True},
        {"consume_from_where": "SOMEWHERE"},
        {"fifo": 1},
    ]
    for kwargs in bad:
        with pytest.raises(MQClientError):
            admin.create_group("cfg", **kwargs)
    with pytest.raises(MQClientError):
        admin.create_group("bad group name!")
    with pytest.raises(MQClientError, match="no config"):
        admin.update_group("cfg", consume_enable=False)
    assert snapshot(url, namespace) == before
    admin.create_group("cfg", retry_max_times=3, fifo=True)
    with pytest.raises(MQClientError, match="unknown group setting"):
        admin.update_group("cfg", colour="blue")
    with pytest.raises(MQClientError):
        admin.update_group("cfg", retry_max_times="3")
    config = admin.group_config("cfg")
    assert (config.retry_max_times, config.fifo, config.consume_enable) == (3, True, True)
    assert "cfg" in admin.groups()
    assert admin.delete_group("cfg") is True
    assert admin.delete_group("cfg") is False
    with pytest.raises(MQClientError):
        admin.group_config("cfg")


def test_reset_offset_reaches_running_members_and_refuses_unknown_groups(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("R", read_queues=2, write_queues=2)
    _fill(backend_url, namespace, "R", 20, queue=0)
    _fill(backend_url, namespace, "R", 20, queue=1)
    got: list[tuple[int, int]] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            got.extend((m.queue_id, m.queue_offset) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("rg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("R")
    consumer.register_message_listener(listener)
    with consumer:
        wait_for(lambda: len(got) >= 40, 15, "everything consumed once")
        wait_for(lambda: all(p.consumer_offset == 20 for p in admin.consumer_progress("rg", "R")), 15, "offsets at 20")
        with lock:
            got.clear()
        admin.reset_offset_by_time("rg", "R", 0)  # back to the start of both queues, while running
        wait_for(lambda: len(got) >= 40, 15, "the running member to consume again from the reset offsets")
        assert sorted(set(got)) == [(q, o) for q in (0, 1) for o in range(20)]
        with lock:
            got.clear()
        q1 = MessageQueue("R", "broker-a", 1)
        assert admin.reset_offset("rg", q1, 15) == 15
        wait_for(lambda: len(got) >= 5, 15, "the tail of queue 1 again")
        assert sorted(set(got)) == [(1, o) for o in range(15, 20)]
        wait_for(lambda: all(p.consumer_offset == 20 for p in admin.consumer_progress("rg", "R")), 15, "committed again")
    with pytest.raises(MQClientError, match="unknown group"):
        admin.reset_offset_by_time("rg-typo", "R", 0)
    assert "rg-typo" not in admin.groups()
    assert admin.reset_offset_by_time("rg-typo", "R", 0, force=True)


def test_members_publish_their_runtime_status(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("ST", read_queues=2, write_queues=2)
    _fill(backend_url, namespace, "ST", 10)
    consumer = PushConsumer("stg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("ST")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        assert consumer._core is not None
        wait_for(lambda: admin.consumer_progress("stg", "ST")[0].consumer_offset == 10, 15, "queue 0 consumed")
        # the committing thread takes its reply in just after the store has it
        pq0 = next(pq for mq, pq in consumer._core.process_queues.items() if (mq.topic, mq.queue_id) == ("ST", 0))
        wait_for(lambda: pq0.stored_offset == 10, 5, "the commit taken in")
        consumer._core.publish_status()  # the 10 s job, now
        wait_for(lambda: bool(admin.consumer_connections("stg")[0].status), 5, "the status with a heartbeat")
        status = admin.consumer_connections("stg")[0].status
    assert set(status["queues"]) == {"ST:0", "ST:1", "%RETRY%stg:0"}
    q0 = status["queues"]["ST:0"]
    assert (q0["cached"], q0["next_offset"], q0["committed"]) == (0, 10, 10)
    assert q0["last_pull_ms"] > 0 and status["paused"] is False and status["consume_tps"] >= 0
