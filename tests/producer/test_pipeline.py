"""The pipelined sender's decisions (:mod:`mq.producer.pipeline`) with scripted replies: no Redis, no
thread, no event loop — what the ``send_async`` thread and the ``mq.aio.Producer`` task both follow."""

from __future__ import annotations

import ast
import pathlib
import time
from typing import Any

import pytest

from mq.errors import MQBrokerError, MQClientError, ReplicaAckTimeout, StoreEvictedError
from mq.model.message import SendResult, SendStatus
from mq.model.queue import MessageQueue
from mq.producer import pipeline
from mq.producer.pipeline import Pending, Round, SendPipeline, Settled, Step
from mq.producer.request import PUT_CALL_MAX_MESSAGES, SendRequest

Q0 = MessageQueue("t", "b", 0)
Q1 = MessageQueue("t", "b", 1)


def pending(i: int, queue: MessageQueue = Q0, *, oneway: bool = False) -> Pending:
    """A prepared send with a body of one byte (``future`` is a marker here: the core never touches it)."""
    fields = [6, "i", f"id{i}", "b", b"x", "bt", 0]
    request = SendRequest("t", fields, f"id{i}", time.monotonic() + 5, oneway=oneway)
    send = Pending(request, None if oneway else f"future{i}")
    send.target = queue
    return send


def test_the_core_imports_neither_threading_nor_asyncio_nor_the_store() -> None:
    tree = ast.parse(pathlib.Path(pipeline.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    io = {n for n in names if n.split(".")[0] in {"threading", "asyncio", "queue", "socket", "redis", "concurrent"}}
    assert not io and not {n for n in names if n.startswith("mq.store")}, names


@pytest.mark.parametrize(
    ("pending_", "written", "closing", "expected"),
    [
        (1, 0, False, Step.WRITE),  # something to send and room in flight
        (1, 1, False, Step.WRITE),  # the next round is written before the last one's replies are read
        (1, 2, False, Step.READ),  # two in flight: the oldest is read first
        (0, 1, False, Step.READ),  # nothing more to send: read what is out
        (0, 0, False, Step.WAIT),
        (3, 0, True, Step.WRITE),  # a shutdown still sends what was queued before it
        (0, 2, True, Step.READ),  # ... and reads what was written
        (0, 0, True, Step.STOP),
    ],
)
def test_step(pending_: int, written: int, closing: bool, expected: Step) -> None:
    assert SendPipeline(128, 2).step(pending_, written, closing) is expected


def test_take_gives_the_oldest_sends_up_to_a_round() -> None:
    core = SendPipeline(3, 2)
    assert core.take([1, 2]) == ([1, 2], [])
    assert core.take([1, 2, 3, 4, 5]) == ([1, 2, 3], [4, 5])


def test_plan_groups_by_queue_in_send_order_in_bounded_calls() -> None:
    assert SendPipeline.plan([]) is None
    sends = [pending(i, Q0 if i % 3 else Q1) for i in range(2 * PUT_CALL_MAX_MESSAGES)]
    sent = SendPipeline.plan(sends)
    assert sent is not None and sent.sends == sends
    by_queue = [(c.queue, len(c.sends)) for c in sent.calls]
    q0 = len([p for p in sends if p.target == Q0])
    assert by_queue == [(Q1, len(sends) - q0), (Q0, PUT_CALL_MAX_MESSAGES), (Q0, q0 - PUT_CALL_MAX_MESSAGES)]
    assert [p for c in sent.calls if c.queue == Q0 for p in c.sends] == [p for p in sends if p.target == Q0]
    topic, queue_id, fields = sent.puts[0]
    assert (topic, queue_id) == ("t", 1) and fields == [p.request.fields for p in sent.calls[0].sends]


def futures(settled: Settled[Pending]) -> list[object]:
    """The futures of the sends someone waits for, as a driver finds them."""
    return [p.future for p in settled.sends]


def _ok(outcome: SendResult | BaseException | None) -> SendResult:
    assert isinstance(outcome, SendResult), outcome
    return outcome


def _round(*sends: Pending) -> Round[Pending]:
    sent = SendPipeline.plan(list(sends))
    assert sent is not None
    return sent


def test_replies_give_consecutive_offsets_per_call() -> None:
    a, b, c = pending(0), pending(1), pending(2, Q1)
    settled = SendPipeline.settle(_round(a, b, c), [[7], [0]])
    done = [(future, _ok(r)) for future, r in zip(futures(settled), settled.outcomes)]
    assert [(f, r.status, r.message_queue, r.queue_offset, r.msg_id) for f, r in done] == [
        ("future0", SendStatus.SEND_OK, Q0, 7, "id0"),
        ("future1", SendStatus.SEND_OK, Q0, 8, "id1"),
        ("future2", SendStatus.SEND_OK, Q1, 0, "id2"),
    ]
    assert settled.retries == [] and settled.oneway_failed == []


def test_a_oneway_send_takes_its_offset_and_its_result_is_nobodys() -> None:
    a, b, c = pending(0), pending(1, oneway=True), pending(2)
    settled = SendPipeline.settle(_round(a, b, c), [[0]])
    assert [(f, _ok(r).queue_offset) for f, r in zip(futures(settled), settled.outcomes)] == [("future0", 0), ("future2", 2)]


def test_a_store_failure_is_retried_unless_oneway_or_evicted() -> None:
    a, b, c = pending(0), pending(1, oneway=True), pending(2, Q1)
    lost = MQBrokerError("connection lost")
    evicted = StoreEvictedError("evicted")
    settled = SendPipeline.settle(_round(a, b, c), [lost, evicted])
    assert settled.retries == [a]  # through the normal path: another queue or node
    assert settled.oneway_failed == [(b, lost)]  # oneway: never retried (RocketMQ), the driver logs it
    assert (futures(settled), settled.outcomes) == (["future2"], [evicted])  # another queue would hide it: the operator's to fix


def test_an_error_that_is_not_the_stores_is_the_sends() -> None:
    error = MQClientError("bad")
    settled = SendPipeline.settle(_round(pending(0)), [error])
    assert (futures(settled), settled.outcomes) == (["future0"], [error]) and settled.retries == []


def test_a_replica_timeout_is_stored_and_not_retried() -> None:
    timeout = ReplicaAckTimeout("1 of 2", result=[3], acked=1, wanted=2)
    settled = SendPipeline.settle(_round(pending(0), pending(1)), [timeout])
    assert [(_ok(r).status, _ok(r).queue_offset) for r in settled.outcomes] == [
        (SendStatus.FLUSH_SLAVE_TIMEOUT, 3),
        (SendStatus.FLUSH_SLAVE_TIMEOUT, 4),
    ]
    assert settled.retries == []


def test_a_lost_round_fails_each_call_so_that_its_sends_are_retried() -> None:
    a, b = pending(0), pending(1, Q1)
    sent = _round(a, b)
    error = MQBrokerError("gone")
    assert SendPipeline.lost(sent, error) == [error, error]
    assert SendPipeline.settle(sent, SendPipeline.lost(sent, error)).retries == [a, b]


def test_a_driver_following_the_steps_writes_ahead_and_sends_everything_before_it_stops() -> None:
    """A scripted driver: 300 sends queued, then a shutdown; each reply is the next free offset."""
    core = SendPipeline(128, 2)
    queued = [pending(i) for i in range(300)]
    written: list[Round[Pending]] = []
    offsets: dict[Any, int] = {}
    next_offset = 0
    steps: list[Step] = []
    while (what := core.step(len(queued), len(written), True)) is not Step.STOP:
        steps.append(what)
        if what is Step.WRITE:
            share, queued = core.take(queued)
            sent = core.plan(share)
            assert sent is not None
            sent.handle = next_offset  # what the store would answer: the first offset of the call
            next_offset += len(share)
            written.append(sent)
        else:
            assert what is Step.READ
            sent = written.pop(0)
            settled = core.settle(sent, [[sent.handle]])
            for future, result in zip(futures(settled), settled.outcomes):
                offsets[future] = _ok(result).queue_offset
    assert steps == [Step.WRITE, Step.WRITE, Step.READ, Step.WRITE, Step.READ, Step.READ]
    assert offsets == {f"future{i}": i for i in range(300)}
