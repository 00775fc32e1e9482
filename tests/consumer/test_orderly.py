"""Ordered consumption: order per sharding key across crashes and joins, store locks, suspension."""

from __future__ import annotations

import itertools
import signal
import threading
import time

import pytest

from mq import Admin, ConsumeFromWhere, ConsumeOrderlyStatus, Message, Producer, PushConsumer, SelectMessageQueueByHash
from mq.consumer.locks import LOCK_TTL_S
from mq.consumer.registry import HEARTBEAT_TIMEOUT_S
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned
from tests.procs import ConsumerProc, first_deliveries, wait_for

pytestmark = pytest.mark.slow


def test_order_per_key_survives_a_crash_and_a_join(redis_server, namespace: str, tmp_path, procs) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("O", read_queues=8, write_queues=8, order=True)
    procs += [ConsumerProc(url, namespace, "og", "O", tmp_path / f"c{i}.log", "--orderly") for i in range(3)]
    wait_for(lambda: all(p.assigned() for p in procs), 30, "three orderly members with queues")
    keys = [f"key{k}" for k in range(60)]
    selector = SelectMessageQueueByHash()
    with Producer("p", url, namespace=namespace) as producer:
        for seq in range(40):
            for key in keys:
                producer.send(Message("O", f"{key}:{seq}".encode()), selector=selector, arg=key)
            if seq == 12:
                procs[1].kill()  # mid-stream
            if seq == 20:
                procs.append(ConsumerProc(url, namespace, "og", "O", tmp_path / "c3.log", "--orderly"))
            time.sleep(0.05)  # paces the stream: the crash and the join land while it flows
    expected = {f"{k}:{s}" for k in keys for s in range(40)}
    wait_for(lambda: expected <= {b for p in procs for b in p.consumed()}, 60, "every event consumed", poll_s=0.5)
    order = first_deliveries(procs)
    assert set(order) == set(keys)
    for key, seqs in order.items():
        assert seqs == list(range(40)), f"{key} first deliveries out of order: {seqs}"


def test_a_paused_holder_stops_before_another_takes_over(redis_server, namespace: str, tmp_path, procs) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("P", read_queues=1, write_queues=1, order=True)
    # a slow listener (30 ms a message, sends every 10 ms): the holder has messages cached when it is
    # paused, which it must not consume once resumed on a lease it has lost
    holder = ConsumerProc(
        url, namespace, "pg", "P", tmp_path / "a.log", "--orderly", "--client-id", "a-first", "--sleep-ms", "30"
    )
    procs.append(holder)
    wait_for(lambda: holder.assigned() == {0}, 30, "the first member to hold the queue")
    procs.append(ConsumerProc(url, namespace, "pg", "P", tmp_path / "b.log", "--orderly", "--client-id", "b-second"))
    wait_for(lambda: procs[1].registered_at() is not None, 30, "the second member")
    stop = threading.Event()

    def produce() -> None:
        with Producer("p", url, namespace=namespace) as producer:
            i = 0
            while not stop.is_set():
                producer.send(Message("P", b"%d" % i))
                i += 1
                time.sleep(0.01)  # paces the stream (the holder, 30 ms a message, falls behind)

    sender = threading.Thread(target=produce)
    sender.start()
    try:
        wait_for(lambda: len(holder.records()) > 20, 20, "the holder consuming")
        holder.proc.send_signal(signal.SIGSTOP)
        paused_at = time.time()
        wait_for(lambda: len(procs[1].records()) > 0, HEARTBEAT_TIMEOUT_S + LOCK_TTL_S + 10, "the take-over")
        took_over_at = procs[1].records()[0][0]
        time.sleep(max(0.0, paused_at + LOCK_TTL_S + 2 - time.time()))  # past its lease
        holder.proc.send_signal(signal.SIGCONT)
        time.sleep(3)  # the resumed holder runs: a batch on the lease it lost would show in its records now
    finally:
        stop.set()
        sender.join()
    a, b = holder.records(), procs[1].records()
    # from the take-over to the new holder's last consumption the queue is b's alone: a record of the
    # resumed holder in that span is a batch it ran on a lease it had lost. After b's last one, a may
    # have the queue back by a clean hand-back (b released it), which the checks below judge.
    b_last = max(ts for ts, *_ in b)
    during = [(ts, off) for ts, _, off, _ in a if took_over_at <= ts <= b_last]
    assert not during, f"the paused holder consumed while the new holder held the queue: {during[:5]}"
    assert took_over_at - paused_at >= LOCK_TTL_S - 4.0 - 1.0, "taken before the old lease could have run out"
    timeline = sorted([(ts, "a", off) for ts, _, off, _ in a] + [(ts, "b", off) for ts, _, off, _ in b])
    switches = sum(1 for x, y in itertools.pairwise(timeline) if x[1] != y[1])
    assert switches <= 2, f"interleaved consumption: {switches} switches"  # a→b, and b→a by a clean hand-back
    offsets_first = {}
    for ts, _, off in timeline:
        offsets_first.setdefault(off, ts)
    assert sorted(offsets_first, key=lambda o: offsets_first[o]) == sorted(offsets_first)  # never reordered


def test_suspend_blocks_only_its_queue_then_keeps_order(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("S", read_queues=4, write_queues=4)
    record: list[tuple[float, str]] = []
    suspended: list[float] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        body = msgs[0].body.decode()
        if body == "k1:3" and len(suspended) < 3:
            suspended.append(time.time())
            ctx.suspend_current_queue_time_ms = 300
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        with lock:
            record.append((time.time(), body))
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("sg", url, namespace=namespace)
    consumer.subscribe("S", "*")
    consumer.register_orderly_listener(listener)
    selector = SelectMessageQueueByHash()
    with consumer, Producer("p", url, namespace=namespace) as producer:
        wait_for(lambda: len([q for q in consumer.assigned_queues() if q.topic == "S"]) == 4, 10, "the four queues held")
        for seq in range(10):
            for key in ("k0", "k1", "k2", "k3"):
                producer.send(Message("S", f"{key}:{seq}".encode()), selector=selector, arg=key)
        for seq in range(10, 40):  # keep the other queues busy while k1 is suspended
            for key in ("k0", "k2", "k3"):
                producer.send(Message("S", f"{key}:{seq}".encode()), selector=selector, arg=key)
            time.sleep(0.01)  # paces the other keys: they keep arriving while k1 is suspended
        wait_for(lambda: len(record) >= 10 + 3 * 40, 20, "everything consumed")
        stays_quiet(lambda: len(record), "the deliveries")
    assert len(suspended) == 3
    k1 = [b for _, b in record if b.startswith("k1:")]
    assert k1 == [f"k1:{i}" for i in range(10)]  # the suspended message first, then what was behind it
    others_while_blocked = [b for ts, b in record if suspended[0] < ts < suspended[-1] and not b.startswith("k1:")]
    queues = {k: selector.select(list(range(4)), None, k) for k in ("k0", "k1", "k2", "k3")}  # type: ignore[arg-type]
    assert any(queues[b.split(":")[0]] != queues["k1"] for b in others_while_blocked), "other queues did not flow"


def test_poison_message_goes_to_the_dlq_after_max_reconsume_times(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("X", read_queues=1, write_queues=1)
    attempts: list[int] = []
    after: list[str] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        if msgs[0].body == b"poison":
            attempts.append(msgs[0].reconsume_times)
            ctx.suspend_current_queue_time_ms = 10
            raise RuntimeError("cannot handle this one")
        after.append(msgs[0].body.decode())
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("xg", url, namespace=namespace, max_reconsume_times=3)
    consumer.subscribe("X", "*")
    consumer.register_orderly_listener(listener)
    with consumer, Producer("p", url, namespace=namespace) as producer:
        wait_for(lambda: any(q.topic == "X" for q in consumer.assigned_queues()), 10, "the queue held")
        producer.send(Message("X", b"poison"))
        producer.send(Message("X", b"next"))
        wait_for(lambda: after == ["next"], 10, "the queue to move on")
        stays_quiet(lambda: (len(attempts), len(after)), "the deliveries")
    assert attempts == [0, 1, 2, 3]  # 4 attempts
    assert [m.body for m in admin.dlq_messages("xg")] == [b"poison"]


def test_crash_take_over_time_and_clean_release(redis_server, namespace: str, tmp_path, procs) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("T", read_queues=4, write_queues=4, order=True)
    procs += [ConsumerProc(url, namespace, "tg", "T", tmp_path / f"t{i}.log", "--orderly") for i in range(3)]
    wait_for(lambda: sum(len(p.assigned() or ()) for p in procs) == 4 and all(p.assigned() for p in procs), 30, "split")

    leaving = procs[2]
    leaving.stop()  # clean: unlocks at once
    wait_for(lambda: (procs[0].assigned() or set()) | (procs[1].assigned() or set()) == {0, 1, 2, 3}, 10, "clean hand-over")
    bye = leaving.bye_at()
    assert bye is not None
    clean = max(procs[0].last_assigned_at(), procs[1].last_assigned_at()) - bye
    assert clean <= 2.0, clean  # the survivors hold its queues within 2 s of its clean shutdown

    victim, survivor = procs[0], procs[1]
    victim.kill()
    began = time.monotonic()
    wait_for(lambda: survivor.assigned() == {0, 1, 2, 3}, 30, "crash take-over")
    crash = time.monotonic() - began
    print(f"orderly take-over: clean shutdown {clean:.2f} s, crash {crash:.2f} s")
    assert crash <= 15.0, crash


def _slow_first(record: list[tuple[float, str, str, int]], name: str, slow_s: float):  # type: ignore[no-untyped-def]
    """An orderly listener recording (time, member, begin/end, offset); offset 0 takes ``slow_s``."""

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        offset = msgs[0].queue_offset
        record.append((time.monotonic(), name, "begin", offset))
        if offset == 0:
            time.sleep(slow_s)
        record.append((time.monotonic(), name, "end", offset))
        return ConsumeOrderlyStatus.SUCCESS

    return listener


def test_a_queue_is_handed_over_only_after_its_running_batch(redis_server, namespace: str) -> None:
    """A member leaving cleanly while a long batch runs keeps the queue (lock and offset) until the
    batch ends: the next member starts after it, with nothing consumed twice or out of order."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("H", read_queues=1, write_queues=1)
    record: list[tuple[float, str, str, int]] = []
    a = PushConsumer("hg", url, namespace=namespace, client_id="A", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    a.subscribe("H")
    a.register_orderly_listener(_slow_first(record, "A", 3.0))
    b = PushConsumer("hg", url, namespace=namespace, client_id="B", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    b.subscribe("H")
    b.register_orderly_listener(_slow_first(record, "B", 0.0))
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(5):
            producer.send(Message("H", b"%d" % i))
        a.start()
        wait_for(lambda: any(e[1:] == ("A", "begin", 0) for e in record), 10, "A inside its slow batch")
        b.start()
        leaving = threading.Thread(target=a.shutdown)
        leaving.start()
        with b:
            wait_for(lambda: sum(e[2] == "end" for e in record) >= 5, 30, "every message consumed")
            stays_quiet(lambda: len(record), "the deliveries")
        leaving.join(30)
    ends = [(member, offset) for _, member, what, offset in sorted(record) if what == "end"]
    assert [offset for _, offset in ends] == [0, 1, 2, 3, 4]  # each once, in order
    a_done = max(t for t, member, what, _ in record if member == "A" and what == "end")
    assert all(t > a_done for t, member, _, _ in record if member == "B")  # B began after A's batch


def test_a_queue_handed_back_before_its_release_goes_on(redis_server, namespace: str) -> None:
    """Membership flapping: a queue marked for release during a batch, then wanted again before it
    was released, consumes its cached messages at once (it used to wait for a new message)."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("F", read_queues=1, write_queues=1)
    record: list[tuple[float, str, str, int]] = []
    consumer = PushConsumer("fg", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("F")
    consumer.register_orderly_listener(_slow_first(record, "C", 1.0))
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("F", b"%d" % i))
        with consumer:
            wait_for(lambda: any(e[1:] == ("C", "begin", 0) for e in record), 10, "the slow batch")
            core = consumer._core
            (queue,) = [q for q in core.process_queues if q.topic == "F"]  # not the group's retry queue
            with core._rebalance_lock:
                assert core._apply(set()) is True  # taken away: not released while the batch runs
            # the batch ends; the queue is released at the next rebalance only
            wait_for(lambda: any(e[1:] == ("C", "end", 0) for e in record), 5, "the slow batch to end")
            with core._rebalance_lock:
                assert core._apply({queue}) is False  # handed back before that
            wait_for(lambda: sum(e[2] == "end" for e in record) >= 10, 5, "the cached messages")
