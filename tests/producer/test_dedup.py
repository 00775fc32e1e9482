"""Sends that never store twice (D140): a producer retry after a lost reply, even to another queue,
and ``Message.dedup_id`` within a topic's window — sync and ``mq.aio``, standalone and cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from mq import Admin, LocalTransactionState, Message, Producer, TransactionProducer, aio
from mq.errors import MessageFencedError, MQBrokerError, MQClientError
from mq.model.queue import MessageQueue
from mq.store import Store, scripts
from mq.store.connection import Connection
from mq.store.store import MessageOps, check_put_result
from tests.helpers import raw_client, snapshot
from tests.leaks import owned
from tests.procs import wait_for

QUEUES = 4


@pytest.fixture
def store(backend_url: str, namespace: str) -> Store:
    with Admin(backend_url, namespace) as admin:
        admin.create_topic("once", read_queues=QUEUES, write_queues=QUEUES)
        admin.create_topic("win", read_queues=QUEUES, write_queues=QUEUES, dedup_window_s=1)
    return owned(Store(Connection(backend_url, namespace)))


def stored(store: Store, topic: str) -> list[tuple[int, int, str, bytes]]:
    """Every message stored in ``topic``: (queue id, offset, msg id, body)."""
    out = []
    for q in range(QUEUES):
        out += [(q, m.queue_offset, m.msg_id, m.body) for m in store.read(topic, q, 0, 100)]
    return out


class LostReplies:
    """A client-side hook on the sync script calls: the first ``times`` puts are written and run by
    Redis (``run=True``) — or held back unrun, to be run later — and their caller sees the connection
    lost, as when a socket dies after the command was sent. Records every fence's queue."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, run: bool, times: int = 1) -> None:
        self.run, self.times = run, times
        self.lost: list[tuple[Any, Any, str]] = []  # (the call, the client, its queue's meta key)
        self.fences: list[str] = []
        real = self.real = scripts.Eval.do
        hook = self

        def do(call: scripts.Eval, client: Any) -> Any:
            name = call.script.name
            if name == "fence-message":
                hook.fences.append(call.keys[0])
            if name == "put-messages" and len(hook.lost) < hook.times:
                if hook.run:
                    real(call, client)
                hook.lost.append((call, client, call.keys[0]))
                raise redis.exceptions.ConnectionError("Connection closed by server.")
            return real(call, client)

        monkeypatch.setattr(scripts.Eval, "do", do)

    def queue_of(self, index: int) -> int:
        """The queue id of lost put ``index``."""
        return int(self.lost[index][2].split(":")[-2].rstrip("}"))

    def run_late(self, index: int) -> Any:
        """Run lost put ``index`` now: the first attempt reaching Redis after the retry's look."""
        call, client, _ = self.lost[index]
        return self.real(call, client)


def test_a_lost_reply_is_not_stored_again_when_the_retry_goes_to_another_queue(
    store: Store, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = LostReplies(monkeypatch, run=True)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        result = producer.send(Message("once", b"one"))
    first = hook.queue_of(0)
    assert hook.fences == [store.queue_keys("once", first).ids]  # the retry went elsewhere, looking at the first queue
    assert stored(store, "once") == [(first, 0, result.msg_id, b"one")]
    assert (result.message_queue.queue_id, result.queue_offset, result.duplicate) == (first, 0, False)


def test_a_first_attempt_arriving_after_the_retrys_look_is_refused(
    store: Store, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = LostReplies(monkeypatch, run=False)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        result = producer.send(Message("once", b"one"))
        first = hook.queue_of(0)
        assert result.message_queue.queue_id != first  # not found there: fenced, then stored elsewhere
        with pytest.raises(MQBrokerError):  # the held first attempt runs now: refused (-4), stores nothing
            check_put_result("once", first, hook.run_late(0))
    assert stored(store, "once") == [(result.message_queue.queue_id, result.queue_offset, result.msg_id, b"one")]


def test_a_fenced_put_raises_message_fenced_error(store: Store) -> None:
    assert store.fence("once", 1, "m1", 60_000) == -1
    from mq.store import codec

    with pytest.raises(MessageFencedError):
        store.put("once", 1, [codec.encode(Message("once", b"x"), "m1", 1)])
    assert store.put("once", 2, [codec.encode(Message("once", b"x"), "m1", 1)])[0] == 0  # another queue takes it
    assert store.fence("once", 2, "m1", 60_000) == 0  # a look finds it stored there


def test_a_retry_on_the_same_queue_finds_its_own_write(
    store: Store, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = LostReplies(monkeypatch, run=True, times=2)  # redis-py's own re-send is lost too
    with Producer("pg", backend_url, namespace=namespace) as producer:
        queue = MessageQueue("once", "broker-a", 3)
        with pytest.raises(MQBrokerError):  # an explicit queue: one attempt (its outcome is unknown)
            producer.send(Message("once", b"q"), queue=queue)
        result = producer.send(Message("once", b"d", dedup_id="same-queue"))  # pinned: retried in place
    assert hook.queue_of(1) == result.message_queue.queue_id and not hook.fences
    bodies = sorted(b for _, _, _, b in stored(store, "once"))
    assert bodies == [b"d", b"q"]  # each once


def test_send_async_retries_a_lost_round_without_a_second_copy(
    store: Store, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[int] = []
    real = MessageOps._put_results

    def lose(self: MessageOps, puts: Any, results: Any) -> Any:
        if not lost:  # the round ran in Redis; its replies are lost with the connection
            lost.append(len(puts))
            return [MQBrokerError("store error: Connection closed by server.")] * len(puts)
        return real(self, puts, results)

    monkeypatch.setattr(MessageOps, "_put_results", lose)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        futures = [producer.send_async(Message("once", b"%d" % i)) for i in range(20)]
        results = [f.result(timeout=30) for f in futures]
    assert lost
    rows = stored(store, "once")
    assert sorted(b for _, _, _, b in rows) == sorted(b"%d" % i for i in range(20))  # each once
    assert {(r.message_queue.queue_id, r.queue_offset, r.msg_id) for r in results} == {(q, o, i) for q, o, i, _ in rows}


def test_dedup_id_stores_once_within_the_window_and_again_after(store: Store, backend_url: str, namespace: str) -> None:
    with Producer("pg", backend_url, namespace=namespace) as producer:
        first = producer.send(Message("win", b"a", dedup_id="order-1"))
        again = producer.send(Message("win", b"b", dedup_id="order-1"))
        other = producer.send_async(Message("win", b"c", dedup_id="order-2")).result(timeout=10)
        assert not first.duplicate and again.duplicate and not other.duplicate
        assert (again.msg_id, again.message_queue, again.queue_offset) == (first.msg_id, first.message_queue, first.queue_offset)
        assert [b for _, _, _, b in stored(store, "win")].count(b"a") == 1 and b"b" not in [r[3] for r in stored(store, "win")]
        # after the window (1 s) the id stores again; sends within it store nothing, so looping is honest
        later: list[Any] = []
        wait_for(
            lambda: not later.append(producer.send(Message("win", b"later", dedup_id="order-1"))) and not later[-1].duplicate,
            10,
            "the window to pass",
        )
    bodies = [b for _, _, _, b in stored(store, "win")]
    assert sorted(bodies) == [b"a", b"c", b"later"]
    assert later[-1].message_queue == first.message_queue  # an id's queue is chosen from the id


def test_dedup_id_with_mq_aio(store: Store, backend_url: str, namespace: str) -> None:
    async def main() -> list[Any]:
        async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
            results = await asyncio.gather(*(producer.send(Message("win", b"%d" % i, dedup_id="aio-1")) for i in range(5)))
            return [*results, await producer.send(Message("win", b"x", dedup_id="aio-1"))]

    results = asyncio.run(main())
    firsts = [r for r in results if not r.duplicate]
    assert len(firsts) == 1 and len(stored(store, "win")) == 1
    assert {(r.msg_id, r.queue_offset) for r in results} == {(firsts[0].msg_id, firsts[0].queue_offset)}


def test_the_window_is_the_topics_and_update_topic_changes_it(backend_url: str, namespace: str) -> None:
    with Admin(backend_url, namespace) as admin:
        assert admin.create_topic("w2").dedup_window_s == 120
        assert admin.update_topic("w2", dedup_window_s=3600).dedup_window_s == 3600
        assert admin.topic_config("w2").dedup_window_s == 3600
        assert admin.update_topic("w2", write_queues=8).dedup_window_s == 3600  # None keeps it
    store = owned(Store(Connection(backend_url, namespace)))
    client = owned(raw_client(backend_url))
    assert [int(client.hget(store.queue_keys("w2", q).meta, "dw")) for q in range(8)] == [3_600_000] * 8


def test_remembered_ids_expire_with_the_window(store: Store, backend_url: str, namespace: str) -> None:
    with Producer("pg", backend_url, namespace=namespace) as producer:
        result = producer.send(Message("win", b"a", dedup_id="gone"))
    keys = store.queue_keys("win", result.message_queue.queue_id)
    client = owned(raw_client(backend_url))
    assert client.exists(keys.dedup, keys.dedup_expiry) == 2
    assert 0 < client.pttl(keys.dedup) <= 1000
    wait_for(lambda: client.exists(keys.dedup, keys.dedup_expiry) == 0, 10, "the window's keys to expire")


def test_a_transaction_message_with_a_dedup_id_is_refused_before_anything_is_written(
    store: Store, backend_url: str, namespace: str
) -> None:
    with TransactionProducer(
        "txg", backend_url, namespace=namespace, checker=lambda m: LocalTransactionState.COMMIT_MESSAGE
    ) as tp:
        before = snapshot(backend_url, namespace)
        with pytest.raises(MQClientError, match="dedup_id"):
            tp.send_message_in_transaction(
                Message("once", b"t", dedup_id="tx-1"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE
            )
        assert snapshot(backend_url, namespace) == before


def test_copies_under_their_own_ids_are_stored_again(store: Store) -> None:
    """Retries, dead letters and resends copy a message under its msg id into a queue that may hold
    that id already (a message dead-lettered, resent, failing again): such puts skip the lookup."""
    from mq.store import codec

    encoded = codec.encode(Message("once", b"x"), "m-copy", 1)
    assert store.put("once", 0, [encoded]) == store.put("once", 0, [encoded])  # a re-send: stored once
    again = store.put("once", 0, [encoded], copies=True)
    assert again[0] == 1 and [r[1] for r in stored(store, "once")] == [0, 1]


def test_a_window_key_of_the_wrong_type_refuses_the_put_before_any_write(store: Store, backend_url: str) -> None:
    from mq.store import codec

    client = owned(raw_client(backend_url))
    client.set(store.queue_keys("once", 2).dedup_expiry, "not a zset")
    with pytest.raises(MQBrokerError, match="not a zset"):
        store.put("once", 2, [codec.encode(Message("once", b"x", dedup_id="d"), "m-wrong", 1)])
    with pytest.raises(MQBrokerError, match="not a zset"):
        store.fence("once", 2, "m-other", 1000)
    assert stored(store, "once") == [] and client.hlen(store.queue_keys("once", 2).dedup) == 0


def test_a_dedup_id_on_a_priority_topic_stays_on_its_levels_queues(backend_url: str, namespace: str) -> None:
    """D140 with D142: the id's queue is chosen among its priority level's queues (queue q holds level
    q % levels), the send deduplicates there, and sync and ``send_async`` agree on it."""
    levels = 2
    with Admin(backend_url, namespace) as admin:
        admin.create_topic("prio", read_queues=QUEUES, write_queues=QUEUES, priority_levels=levels)
    with Producer("pp", backend_url, namespace=namespace) as producer:
        for i in range(8):
            for priority in (0, 1, 7):
                dedup_id = f"p{priority}-{i}"
                first = producer.send(Message("prio", b"x", priority=priority, dedup_id=dedup_id))
                again = producer.send_async(Message("prio", b"y", priority=priority, dedup_id=dedup_id)).result(timeout=10)
                assert first.message_queue.queue_id % levels == min(priority, levels - 1), (priority, first.message_queue)
                assert again.duplicate and (again.message_queue, again.queue_offset) == (first.message_queue, first.queue_offset)
