"""The long-poll waiter's commits (D55): paced by :class:`CommitPacer` instead of one round trip before
every wait, and a queue that goes quiet has its offset stored soon after its last message."""

from __future__ import annotations

import threading
import time

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue, Producer, PushConsumer
from mq.consumer import puller, steps
from mq.consumer.long_poll import CLOSE_WAIT_S, LONG_POLL_BLOCK_MS, WAIT_COMMIT_LOOKS, CommitPacer, LongPoller
from mq.consumer.process_queue import ProcessQueue
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import admin_once, blocked_readers
from tests.leaks import open_sockets, owned
from tests.procs import wait_for
from tests.servers import RedisServer

# delays and times exact in binary floating point
DELAY_S, DELAY_MS = 0.25, 250


def test_nothing_delivered_past_the_stored_offset_blocks_the_whole_long_poll() -> None:
    pacer = CommitPacer(16, DELAY_S)
    assert pacer.next(None, 10, 10, 100.0) == (False, LONG_POLL_BLOCK_MS)
    assert pacer.next(None, -1, 10, 100.0) == (False, LONG_POLL_BLOCK_MS)  # nothing known to commit over


def test_an_unknown_stored_offset_is_committed_at_once() -> None:
    assert CommitPacer(16, DELAY_S).next(5, -1, 6, 100.0) == (True, DELAY_MS)


def test_a_small_lag_waits_for_the_delay_and_the_wait_is_shortened_to_it() -> None:
    pacer = CommitPacer(16, DELAY_S)
    assert pacer.next(11, 10, 12, 100.0) == (False, DELAY_MS)
    assert pacer.next(12, 10, 13, 100.125) == (False, DELAY_MS // 2)  # counted from when it first was due
    assert pacer.next(13, 10, 14, 100.25) == (True, DELAY_MS)  # due for the delay: committed; 13 still consumed
    assert pacer.next(14, 13, 15, 100.375)[0] is False  # at most one commit per delay


def test_a_lag_of_half_a_batch_is_committed_at_once() -> None:
    pacer = CommitPacer(16, DELAY_S)
    assert pacer.next(25, 10, 26, 100.0)[0] is False
    assert pacer.next(26, 10, 27, 100.001)[0] is True


def test_a_commit_of_everything_delivered_goes_back_to_the_long_block() -> None:
    pacer = CommitPacer(16, DELAY_S)
    pacer.next(11, 10, 12, 100.0)
    assert pacer.next(12, 10, 12, 100.25) == (True, LONG_POLL_BLOCK_MS)
    assert pacer.next(None, 12, 12, 100.5) == (False, LONG_POLL_BLOCK_MS)


def test_a_message_still_consumed_is_looked_for_a_bounded_number_of_times() -> None:
    pacer = CommitPacer(16, DELAY_S)
    assert pacer.next(None, 10, 11, 100.0) == (False, DELAY_MS)  # woken by offset 10, still consumed
    now = 100.0
    for _ in range(WAIT_COMMIT_LOOKS - 1):  # nothing consumed yet: the waiter looks every DELAY_S
        now += DELAY_S
        assert pacer.next(None, 10, 11, now) == (False, DELAY_MS)
    now += DELAY_S
    assert pacer.next(None, 10, 11, now) == (False, LONG_POLL_BLOCK_MS)  # left to the periodic commit
    assert pacer.next(None, 10, 11, now + DELAY_S) == (False, LONG_POLL_BLOCK_MS)
    assert pacer.next(11, 10, 11, now + 0.5) == (False, DELAY_MS)  # consumed at last: paced again
    assert pacer.next(11, 10, 11, now + 0.75) == (True, LONG_POLL_BLOCK_MS)


def test_an_idle_queues_offset_is_stored_soon_after_its_last_message_is_consumed(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before D55 the waiter committed before each wait, while the message it had just delivered was
    still being consumed: the store stayed one message behind until the 5 s commit."""
    monkeypatch.setattr(steps, "PERSIST_INTERVAL_S", 60.0)  # only the waiter commits in this test
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("IQ", read_queues=1, write_queues=1)
    consumed = threading.Event()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        time.sleep(0.2)  # slow on purpose: still running when the waiter goes back to Redis
        consumed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("iq", url, namespace=namespace)
    consumer.subscribe("IQ")
    consumer.register_message_listener(listener)
    with consumer, Producer("p", url, namespace=namespace) as producer:
        wait_for(lambda: blocked_readers(url) >= 2, 10, "IQ's waiter (and the retry topic's) blocked in XREAD")
        producer.send(Message("IQ", b"one"))
        assert consumed.wait(10)
        wait_for(lambda: admin.consumer_progress("iq", "IQ")[0].consumer_offset == 1, 2, "offset 1 stored")
    admin.close()


def test_a_held_connection_keeps_one_pooled_connection_for_its_thread_and_gives_it_back(
    redis_server: RedisServer, namespace: str
) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    held = conn.held()
    assert held is not conn and held.client is not conn.client
    assert held.client.connection is not None and held.client.connection_pool is conn.client.connection_pool
    admin_once(redis_server.url, namespace).create_topic("HC", read_queues=1, write_queues=1)
    queue = MessageQueue("HC", "broker-a", 0)
    assert Store(held).wait_for_messages(queue, 0, 1, 1, group="g") == (None, None)  # nothing there: the block ran out
    held.release_held()
    assert held.client.connection is None
    conn.close()
    memory = owned(Connection("memory://held", namespace))
    assert memory.held() is memory  # cluster and memory clients are shared as they are


def test_a_waiter_connects_only_when_its_queue_is_caught_up(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer starting on a backlog connects no waiter of a queue that still has messages to pull
    (before: every waiter connected when it started, ~1.5 ms of GIL-holding connection set-up each,
    which delayed a drain's first message by ~25 ms); a queue that catches up gets its connection."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("BL", read_queues=4, write_queues=4)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(40):
            producer.send(Message("BL", b"%d" % i))
    held_for: list[str] = []
    original = Connection.held

    def counting(self: Connection) -> Connection:
        held_for.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(Connection, "held", counting)
    monkeypatch.setattr(puller, "PULL_THRESHOLD_FOR_QUEUE", 4)  # flow control keeps each queue behind its log's end
    release, consumed = threading.Event(), threading.Event()
    seen: list[bytes] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        release.wait(10)  # held: the cache fills, flow control stops the pulls, no queue of BL catches up
        seen.extend(m.body for m in msgs)
        if len(seen) >= 40:
            consumed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "bl", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=1, consume_thread_max=1
    )
    consumer.subscribe("BL")
    consumer.register_message_listener(listener)
    with consumer:
        core = consumer._core
        assert core is not None
        # claimed, the caches filled while the listener is held: every queue of BL left out by flow control
        wait_for(
            lambda: len([pq for q, pq in list(core.process_queues.items()) if q.topic == "BL" and pq.flow_paused]) == 4,
            10,
            "the four queues paused by flow control",
        )
        assert not [name for name in held_for if name.startswith("mq-poll-BL")]  # only the retry topic's waiter
        release.set()
        assert consumed.wait(20)
        wait_for(
            lambda: len([n for n in held_for if n.startswith("mq-poll-BL")]) == 4, 5, "the caught-up queues' waiters connected"
        )


def test_a_waiter_that_passed_its_stop_check_leaves_no_connection_open_after_close(
    redis_server: RedisServer, namespace: str
) -> None:
    """A waiter past its ``stopped`` check when the consumer stops sends its next wait after
    ``close()``; redis-py connects the closed connection again for it. Before, ``close()`` did not wait
    for the waiters, and that socket was given back to the pool open and stayed open for good (the
    leak check found it after quick start/stop cycles, e.g. ``tests/aio/test_aio_admin.py``)."""
    with Admin(redis_server.url, namespace) as admin:
        admin.create_topic("LC", read_queues=1, write_queues=1)
    in_check, go_on, stopped = threading.Event(), threading.Event(), threading.Event()

    def may_wait(pq: ProcessQueue) -> bool:
        in_check.set()
        go_on.wait(10)  # the waiter is past its stop check while the consumer stops
        return True

    poller = LongPoller(
        redis_server.url,
        namespace,
        group="g",
        on_news=lambda *news: None,
        on_rewind=lambda *rewound: None,
        commits=None,
        before_wait=lambda pq: None,
        may_wait=may_wait,
        batch=4,
        stopped=stopped,
    )
    pq = ProcessQueue(MessageQueue("LC", "broker-a", 0), 0)
    pq.idle.set()
    poller.watch(pq)
    assert in_check.wait(10)
    closed_once, close_connection = threading.Event(), poller._conn.close

    def close_and_tell() -> None:
        close_connection()
        closed_once.set()

    poller._conn.close = close_and_tell  # type: ignore[method-assign]
    stopped.set()
    closing = threading.Thread(target=poller.close)
    closing.start()
    assert closed_once.wait(5)  # the connection closed while the waiter is past its stop check
    go_on.set()
    closing.join(CLOSE_WAIT_S + 5)
    waiters = [t for t in threading.enumerate() if t.name == "mq-poll-LC-0"]
    wait_for(lambda: not any(t.is_alive() for t in waiters), 3, "the waiter to end")
    assert open_sockets(poller._conn) == 0


def stop_and_count_waiters_left(consumer: PushConsumer, topic: str, caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """Shut ``consumer`` down once its queues of ``topic`` are caught up (their waiters block in the
    store): see :func:`stopped_and_waiters_left`."""
    core = consumer._core
    assert core is not None
    caught_up = [pq for mq, pq in core.process_queues.items() if mq.topic == topic]
    wait_for(lambda: len(caught_up) == 4 and all(pq.idle.is_set() for pq in caught_up), 10, "4 caught-up queues")
    time.sleep(0.3)  # not a synchronisation: the waiters enter their block right after, and stay in it
    return stopped_and_waiters_left(consumer, topic, caplog)


def stopped_and_waiters_left(consumer: PushConsumer, topic: str, caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    """Shut ``consumer`` down; returns the "still running" warnings and the waiters of ``topic`` alive after it."""
    caplog.clear()
    with caplog.at_level("WARNING", logger="mq.consumer"):
        consumer.shutdown()
    warnings = len([r for r in caplog.records if "still running" in r.getMessage()])
    return warnings, len([t for t in threading.enumerate() if t.name.startswith(f"mq-poll-{topic}-") and t.is_alive()])


def test_the_waiters_of_a_consumer_on_the_embedded_store_end_when_it_stops(
    namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedded store's blocked read waits in-process and no close reaches it: its waiters blocked
    ``LONG_POLL_BLOCK_MS`` (10 s) and outlived every shutdown ("N long-poll waiter(s) still running
    2.0 s after the consumer stopped", several times per ``make demo``). They block in short steps
    there now (``Connection.max_block_ms``), so they end within ``CLOSE_WAIT_S`` of the stop."""
    url = f"memory://waiters-{namespace}"
    with Admin(url, namespace) as admin:
        admin.create_topic("MW", read_queues=4, write_queues=4)
    consumer = PushConsumer("g", url, namespace=namespace)
    consumer.subscribe("MW")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    consumer.start()
    assert stop_and_count_waiters_left(consumer, "MW", caplog) == (0, 0)


def test_the_waiters_of_a_consumer_on_redis_end_when_it_stops(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Closing the pool under blocked waiters (``disconnect()`` of connections in use, from the
    closing thread) raced them: redis-py's retry reconnected a failed wait and sent it again, so a
    waiter blocked anew for up to 10 s — about every other shutdown left one running (the warning,
    also in ``bench.consumer``), most often after a drain. Now the waiters' connections stop retrying
    and their sockets are shut until every waiter has ended; eight drain-and-stop cycles leave none
    running."""
    admin_once(redis_server.url, namespace).create_topic("RW", read_queues=8, write_queues=8)
    for cycle in range(8):
        with Producer("p", redis_server.url, namespace=namespace) as producer:
            for i in range(1000):
                producer.send(Message("RW", b"%d" % i))
        consumed: list[int] = []
        consumer = PushConsumer(
            f"g{cycle}", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
        )
        consumer.subscribe("RW")
        consumer.register_message_listener(
            lambda msgs, ctx, consumed=consumed: consumed.append(len(msgs)) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )
        consumer.start()
        wait_for(lambda: sum(consumed) >= 1000 * (cycle + 1), 20, "the messages consumed")  # noqa: B023 (waited for here)
        # at once, the waiters still busy: none left running once shutdown returned (its close waits for
        # them up to CLOSE_WAIT_S; the "still running" warning is not counted: on a loaded machine a waiter
        # that ends may be scheduled late)
        warnings, left = stopped_and_waiters_left(consumer, "RW", caplog)
        assert left == 0, f"cycle {cycle}: {left} waiter(s) left, {warnings} warning(s)"
