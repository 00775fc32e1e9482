"""The consumer's decisions (:mod:`mq.consumer.machine`) with scripted inputs and no Redis: flow
control, the commit policy, rebalance and release, listener batches, acknowledgement and send-back,
orderly hand-over — and that the module stays free of threads, asyncio and the store."""

from __future__ import annotations

import ast
import pathlib

import pytest

from mq.consumer import machine
from mq.consumer.machine import (
    LONG_POLL_BLOCK_MS,
    RELEASE_WAIT_S,
    SUSPEND_MAX_MS,
    SUSPEND_MIN_MS,
    Call,
    CommitPacer,
    CommitPolicy,
    Concurrent,
    ConsumeTask,
    DeadLetter,
    FlowControl,
    Listen,
    Orderly,
    PullPlan,
    QueueState,
    Reconsume,
    Stop,
    consume_task,
    plan_rebalance,
)
from mq.consumer.types import ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus
from mq.model.message import MessageExt
from mq.model.properties import RETRY_TOPIC
from mq.model.queue import MessageQueue

QUEUE = MessageQueue("T", "broker-a", 0)
OTHER = MessageQueue("T", "broker-a", 1)
NEW = MessageQueue("T", "broker-a", 2)


def fp(m: MessageExt) -> str:
    return f"fp-{m.queue_offset}"


def msg(offset: int, *, body: bytes = b"x", topic: str = "T", reconsume_times: int = 0, **props: str) -> MessageExt:
    return MessageExt(
        topic,
        body,
        msg_id=f"id-{offset}",
        queue_id=0,
        queue_offset=offset,
        born_timestamp_ms=1,
        store_timestamp_ms=2,
        reconsume_times=reconsume_times,
        system_properties=props,
    )


def held(queue: MessageQueue = QUEUE, start: int = 0, offsets: range = range(0)) -> QueueState:
    q = QueueState(queue, start, fp)
    if offsets:
        q.add([msg(o) for o in offsets], offsets[-1] + 1, now_s=1.0)
    return q


# -- the held queue's state ---------------------------------------------------------------------


def test_position_follows_the_last_entry_handed_over() -> None:
    q = held(start=5)
    q.add([msg(5), msg(6)], 7)
    assert q.position() == (7, "fp-6")
    q.add([], 7)  # nothing new: the fingerprint known before stays
    assert q.position() == (7, "fp-6")
    q.add([msg(7)], 9)  # a filter skipped offset 8: its entry is not known
    assert q.position() == (9, "")


def test_commit_offset_is_the_smallest_in_flight() -> None:
    q = held(offsets=range(3, 8))
    assert q.commit_offset() == 3
    assert q.remove([msg(4), msg(5)]) == 3
    assert q.remove([msg(3)]) == 6
    assert q.remove([msg(6), msg(7)]) == 8  # everything consumed: the next offset to pull
    assert q.consumed_total == 5


def test_a_rewound_offset_holding_another_message_is_not_forgotten() -> None:
    q = held(offsets=range(2))
    other = MessageExt("T", b"y", msg_id="new", queue_id=0, queue_offset=1, born_timestamp_ms=1, store_timestamp_ms=3)
    q.reset(1)
    q.add([other], 2)
    assert q.remove([msg(1)]) == 1  # the old message at offset 1: the new one is still to consume
    assert q.count == 1


def test_overdue_calls() -> None:
    q = held(offsets=range(3))
    q.consuming = {0: 10.0, 1: 50.0}
    assert [m.queue_offset for m in q.overdue_at(30.0, 60.0)] == [0]


# -- flow control -------------------------------------------------------------------------------


def test_flow_control_counts_bytes_and_span() -> None:
    flow = FlowControl(max_span=10, max_count=4, max_bytes=100)
    assert not flow.limited(held(offsets=range(4)))
    assert flow.limited(held(offsets=range(5)))  # more than 4 messages
    big = held()
    big.add([msg(0, body=b"x" * 101)], 1)
    assert flow.limited(big)  # more than 100 bytes
    wide = held()
    wide.add([msg(0), msg(20)], 21)
    assert flow.limited(wide)  # span 20 > 10
    assert not FlowControl(max_span=None, max_count=4, max_bytes=100).limited(wide)  # orderly: no span limit


def test_paused_is_recorded_for_the_consumer_to_wake_the_puller() -> None:
    flow = FlowControl(max_span=None, max_count=1)
    q = held(offsets=range(2))
    assert flow.paused(q) and q.flow_paused
    q.remove([msg(0)])
    assert not flow.paused(q) and not q.flow_paused


# -- commits ------------------------------------------------------------------------------------


def policy(*, in_store: bool = True, may: bool = True) -> CommitPolicy[QueueState]:
    return CommitPolicy(in_store=in_store, offset=lambda q: q.commit_offset(), may_consume=lambda q: may)


def test_commit_due_only_when_moved_and_ours() -> None:
    q = held(offsets=range(5))
    q.remove([msg(0), msg(1)])
    assert policy().due(q) == 2
    assert policy().with_pull(q) == 2
    q.stored_offset = 2
    assert policy().due(q) is None  # the store holds it already
    q.remove([msg(2)])
    assert policy(may=False).due(q) is None  # a lost orderly lock: the offset is the new holder's
    q.dropped = True
    assert policy().due(q) is None


def test_file_offsets_never_ride_along_with_pulls_or_waits() -> None:
    q = held(offsets=range(2))
    q.remove([msg(0)])
    files = policy(in_store=False)
    assert files.due(q) == 1
    assert files.with_pull(q) is None and files.before_wait(q) is None
    assert files.periodic([q]) == {QUEUE: 1}  # the periodic job writes the file


def test_periodic_commits_every_moved_queue() -> None:
    moved, still = held(QUEUE, offsets=range(2)), held(OTHER, start=7)
    moved.remove([msg(0)])
    still.stored_offset = 7
    assert policy().periodic([moved, still]) == {QUEUE: 1}


def test_a_refused_commit_loses_the_queue_unless_it_is_being_released() -> None:
    q = held(start=3)
    assert not CommitPolicy.committed(q, 3, held=True) and q.stored_offset == 3
    assert CommitPolicy.committed(q, 4, held=False) and q.stored_offset == 3
    q.releasing = True
    assert not CommitPolicy.committed(q, 4, held=False)


def test_pacer_commits_at_half_a_batch_of_lag_or_after_the_delay() -> None:
    pacer = CommitPacer(16, 0.05)
    assert pacer.next(12, 10, 20, 100.0) == (False, 50)  # 2 behind: wait up to 50 ms for more
    assert pacer.next(26, 10, 30, 100.01) == (True, 50)  # 16 behind: now (and look again for the rest)
    assert pacer.next(27, 26, 30, 100.02)[0] is False
    assert pacer.next(27, 26, 30, 100.07)[0] is True  # waited the delay
    assert CommitPacer(16, 0.05).next(None, 10, 10, 1.0) == (False, LONG_POLL_BLOCK_MS)  # nothing pending


def test_one_paced_rule_for_both_waiters() -> None:
    q = held(offsets=range(40))
    q.remove([msg(o) for o in range(2)])
    pacer = CommitPacer(16, 0.05)
    assert policy().paced(q, pacer, 40, 100.0) == (2, 50)  # nothing known stored: commit at once
    q.stored_offset = 2
    q.remove([msg(2)])
    assert policy().paced(q, pacer, 40, 100.01) == (None, 40)  # 1 behind: wait out the delay
    assert policy().paced(q, pacer, 40, 100.06) == (3, 50)  # the delay passed: commit, look again
    assert policy(in_store=False).paced(q, CommitPacer(16), 40, 100.0) == (None, LONG_POLL_BLOCK_MS)  # a file: never


# -- rebalance and release ----------------------------------------------------------------------


def test_rebalance_claims_new_queues_and_releases_the_unwanted() -> None:
    queues = {QUEUE: held(QUEUE), OTHER: held(OTHER)}
    plan = plan_rebalance(queues, {QUEUE, NEW}, drains_on_release=True, now_s=100.0)
    assert (plan.claim, plan.release, plan.resumed, plan.unsettled) == ([NEW], [OTHER], [], False)
    assert queues[OTHER].releasing and not queues[QUEUE].releasing


def test_a_concurrent_queue_drains_before_it_is_released() -> None:
    queues = {QUEUE: held(QUEUE, offsets=range(3))}
    plan = plan_rebalance(queues, set(), drains_on_release=True, now_s=100.0)
    assert plan.release == [] and plan.unsettled and queues[QUEUE].releasing_since == 100.0
    again = plan_rebalance(queues, set(), drains_on_release=True, now_s=100.0 + RELEASE_WAIT_S / 2)
    assert again.release == [] and queues[QUEUE].releasing_since == 100.0  # the wait is not restarted
    late = plan_rebalance(queues, set(), drains_on_release=True, now_s=100.0 + RELEASE_WAIT_S)
    assert late.release == [QUEUE]  # waited long enough: the rest is redelivered to the new owner
    queues[QUEUE].remove([msg(o) for o in range(3)])
    assert plan_rebalance(queues, set(), drains_on_release=True, now_s=100.1).release == [QUEUE]


def test_an_orderly_queue_is_released_at_once_and_a_queue_handed_back_goes_on() -> None:
    queues = {QUEUE: held(QUEUE, offsets=range(3))}
    assert plan_rebalance(queues, set(), drains_on_release=False, now_s=1.0).release == [QUEUE]
    plan = plan_rebalance(queues, {QUEUE}, drains_on_release=False, now_s=2.0)  # wanted again before it went
    assert plan.resumed == [QUEUE] and plan.release == [] and not queues[QUEUE].releasing


# -- concurrent: batches, acknowledgement, send-back --------------------------------------------


def test_listener_calls_are_shared_by_the_queue_s_share_of_workers() -> None:
    q = held()
    msgs = [msg(o) for o in range(10)]
    tasks = Concurrent.tasks(q, msgs, 3, workers=4, queues=2)
    assert [[[m.queue_offset for m in call] for call in t] for t in tasks] == [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9]]]
    assert len(Concurrent.tasks(q, msgs, 3, workers=4, queues=8)) == 1  # at least one task


def test_a_retry_topic_s_messages_show_the_topic_they_were_sent_to() -> None:
    q = held(MessageQueue("%RETRY%G", "broker-a", 0))
    (task,) = Concurrent.tasks(q, [msg(0, topic="%RETRY%G", **{RETRY_TOPIC: "T"})], 1, workers=1, queues=1)
    assert [m.topic for call in task for m in call] == ["T"]


def test_ack_index_splits_acknowledged_from_sent_back() -> None:
    msgs = [msg(o) for o in range(4)]
    ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    later = ConsumeConcurrentlyStatus.RECONSUME_LATER
    assert Concurrent.answered(msgs, ok, 3, broadcasting=False) == (msgs, [])
    assert Concurrent.answered(msgs, ok, 1, broadcasting=False) == (msgs[:2], msgs[2:])
    assert Concurrent.answered(msgs, ok, -5, broadcasting=False) == ([], msgs)
    assert Concurrent.answered(msgs, later, 3, broadcasting=False) == ([], msgs)
    assert Concurrent.answered(msgs, later, 3, broadcasting=True) == (msgs, [])  # broadcasting never retries


def next_step(task: ConsumeTask, status: ConsumeConcurrentlyStatus | None) -> Listen | Reconsume | None:
    """What a driver does: send the task its answer, take the next command (None: the task is done)."""
    try:
        return task.send(status)
    except StopIteration:
        return None


def test_a_consume_task_calls_the_listener_per_batch_and_sends_back_what_it_did_not_acknowledge() -> None:
    q = held(offsets=range(5))
    msgs = [msg(o) for o in range(5)]
    consumed: list[MessageExt] = []
    task = consume_task(q, [msgs[:2], msgs[2:4], msgs[4:]], consumed, broadcasting=False)
    first = next(task)
    assert isinstance(first, Listen) and first.msgs == msgs[:2] and first.ctx.message_queue == QUEUE
    second = next_step(task, ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    assert isinstance(second, Listen) and second.msgs == msgs[2:4]
    second.ctx.ack_index, second.ctx.delay_level_when_next_consume = 0, 3  # the listener's own answer
    back = next_step(task, ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    assert back == Reconsume([msgs[3]], 3)
    third = next_step(task, None)
    assert isinstance(third, Listen) and third.msgs == msgs[4:]
    assert next_step(task, None) is None  # the driver's handling of the last call failed: not acknowledged here
    assert consumed == msgs[:3]


def test_a_consume_task_stops_at_a_dropped_queue_keeping_what_it_consumed() -> None:
    q = held(offsets=range(2))
    consumed: list[MessageExt] = []
    task = consume_task(q, [[msg(0)], [msg(1)]], consumed, broadcasting=True)
    assert isinstance(next(task), Listen)
    q.dropped = True  # taken over meanwhile: the new owner consumes the rest
    assert next_step(task, ConsumeConcurrentlyStatus.RECONSUME_LATER) is None
    assert [m.queue_offset for m in consumed] == [0]  # broadcasting never sends back


# -- orderly: batches in order, suspension, dead letters, hand-over -----------------------------


def orderly(max_reconsume_times: int = 2) -> Orderly:
    return Orderly(batch_size=2, max_reconsume_times=max_reconsume_times, suspend_ms=1000)


def test_orderly_takes_batches_from_the_head_while_it_may_consume() -> None:
    q = held(offsets=range(3))
    step = orderly().next(q, may_consume=True, running_s=0.0)
    assert isinstance(step, Call) and [m.queue_offset for m in step.msgs] == [0, 1]
    assert orderly().next(q, may_consume=False, running_s=0.0) == Stop(machine.LOCK_RETRY_S)
    assert orderly().next(q, may_consume=True, running_s=machine.MAX_TIME_CONSUME_CONTINUOUSLY_S + 1) == Stop(0.01)
    assert orderly().next(held(), may_consume=True, running_s=0.0) == Stop(None)  # nothing cached


def test_orderly_hands_over_between_batches() -> None:
    q = held(offsets=range(3))
    policy = orderly()
    step = policy.next(q, may_consume=True, running_s=0.0)
    assert isinstance(step, Call)
    q.releasing = True  # rebalance takes the queue away while the batch runs
    assert policy.answered(q, step, ConsumeOrderlyStatus.SUCCESS) is None
    assert q.commit_offset() == 2  # the release commits what the batch consumed
    assert policy.next(q, may_consume=True, running_s=0.0) == Stop(None)  # no further batch here


def test_orderly_suspends_then_dead_letters_poison() -> None:
    q = held(offsets=range(2))
    policy = orderly(max_reconsume_times=1)
    suspend = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
    call = policy.next(q, may_consume=True, running_s=0.0)
    assert isinstance(call, Call)
    assert policy.answered(q, call, suspend) == Stop(1.0)
    call = policy.next(q, may_consume=True, running_s=0.0)
    assert isinstance(call, Call) and [m.reconsume_times for m in call.msgs] == [1, 1]  # retried in place
    dead = policy.answered(q, call, suspend)
    assert isinstance(dead, DeadLetter) and [m.queue_offset for m in dead.msgs] == [0, 1]
    assert Orderly.dead_lettered(q, dead, moved=False) == Stop(1.0)  # the store refused: try again later
    assert q.count == 2
    assert Orderly.dead_lettered(q, dead, moved=True) is None
    assert q.count == 0 and q.commit_offset() == 2


@pytest.mark.parametrize(("asked_ms", "paused_s"), [(1, SUSPEND_MIN_MS / 1000), (10**6, SUSPEND_MAX_MS / 1000), (250, 0.25)])
def test_orderly_suspension_is_clamped(asked_ms: int, paused_s: float) -> None:
    q = held(offsets=range(1))
    call = Call(q.head(1), ConsumeOrderlyContext(QUEUE, suspend_current_queue_time_ms=asked_ms))
    assert orderly(-1).answered(q, call, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT) == Stop(paused_s)


# -- no I/O -------------------------------------------------------------------------------------

FORBIDDEN = ("threading", "asyncio", "mq.store", "redis", "socket", "concurrent", "time")


def io_imports(source: str) -> list[str]:
    """The imports of ``source`` (module names) that would give the machine threads, tasks or I/O."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)]


def test_the_machine_imports_no_threads_asyncio_or_store() -> None:
    source = pathlib.Path(machine.__file__).read_text()
    assert io_imports(source) == []
    assert io_imports(source + "\nimport threading\n") == ["threading"]  # the check sees a planted import
    assert io_imports(source + "\nfrom mq.store.groups import fingerprint\n") == ["mq.store.groups"]
    assert io_imports("def f():\n    import asyncio\n") == ["asyncio"]  # also inside a function


# -- what to pull next ----------------------------------------------------------------------------


def test_a_pull_round_takes_the_ready_queues_in_the_plans_order() -> None:
    flow = FlowControl(max_span=None, max_count=1)
    first, caught_up, releasing, full, last = (held(MessageQueue("T", "broker-a", i)) for i in range(5))
    releasing.releasing = True
    full.add([msg(0), msg(1)], 2)
    queues = [first, caught_up, releasing, full, last]
    assert PullPlan(flow).ready(queues, busy=lambda q: q is caught_up) == [first, last]  # as held by default
    assert full.flow_paused  # left out for flow control: consuming wakes the puller
    backwards = PullPlan(flow, order=lambda ready: ready[::-1])  # e.g. higher-priority queues first
    assert backwards.ready(queues, busy=lambda q: q is caught_up) == [last, first]


def test_answered_sends_each_answer_in_with_the_next_command() -> None:
    from mq.consumer.machine import Answered

    seen: list[object] = []

    def commands():  # type: ignore[no-untyped-def]
        seen.append((yield "a"))
        seen.append((yield "b"))
        seen.append((yield "c"))

    steps: Answered[str, int] = Answered(commands())
    asked = []
    for command in steps:
        asked.append(command)
        if command != "b":  # "b" is left unanswered: None goes in
            steps.answer = len(asked)
    assert asked == ["a", "b", "c"] and seen == [1, None, 3]
