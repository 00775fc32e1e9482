"""The push and pull consumers' decisions, with no I/O [RocketMQ ``ProcessQueue``, ``RebalanceImpl``,
``ConsumeMessageConcurrentlyService`` / ``ConsumeMessageOrderlyService``]: no threads, no asyncio, no
store (a test parses this module's imports).

What lives here is what the sync consumer (threads) and the asyncio one (tasks) must decide alike:

- :class:`QueueState` — one held queue: its cached messages by offset, where the next pull starts,
  what the store holds as committed, whether it is being released. The drivers' ``ProcessQueue``
  adds the locks and the waiter's flag to it.
- :class:`FlowControl` — when pulling a queue pauses (too many messages, bytes, or too wide a span).
- :class:`PullPlan` — which queues the next pull round takes, in the order its ``order`` gives (the
  one place that decides which queue is pulled first).
- :class:`CommitPolicy` — what a queue may commit now and when (one policy for both APIs: with the
  next pull, before a long-poll waiter blocks, paced by :class:`CommitPacer`, and the periodic job).
- :func:`plan_rebalance` — which held queues go on, which are released now, which are new.
- :class:`Concurrent` and :class:`Orderly` — how messages reach the listener and what its answer
  leads to, as two policy objects the consumer is given (not flags); :func:`consume_task` — one
  concurrent worker task as commands out (:class:`Listen`, :class:`Reconsume`) and statuses in, the
  loop both push consumers run.

Time is an input (``now_s``: a monotonic clock read by the driver), so every rule can be checked by a
unit test with scripted values (``tests/consumer/test_machine.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from mq.consumer.types import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext, ConsumeOrderlyStatus
from mq.model.message import MessageExt
from mq.model.properties import RETRY_TOPIC
from mq.model.queue import MessageQueue
from mq.model.validation import RETRY_PREFIX

#: Messages cached per queue before pulling pauses [RocketMQ ``pullThresholdForQueue``].
PULL_THRESHOLD_FOR_QUEUE = 1000
#: Body bytes cached per queue before pulling pauses [RocketMQ ``pullThresholdSizeForQueue`` 100 MiB].
PULL_THRESHOLD_SIZE_FOR_QUEUE = 100 * 1024 * 1024
#: Offset span of cached messages before pulling pauses (concurrent) [RocketMQ ``consumeConcurrentlyMaxSpan``].
CONSUME_CONCURRENTLY_MAX_SPAN = 2000

#: Milliseconds a long-poll waiter blocks in Redis before it blocks again.
LONG_POLL_BLOCK_MS = 10_000
#: Seconds a commit a waiter found due may wait for a quiet moment (or half a pull batch of lag)
#: before the waiter makes it; while one waits, the waiter's ``XREAD BLOCK`` lasts no longer (D55).
WAIT_COMMIT_DELAY_S = 0.05
#: Periods of ``WAIT_COMMIT_DELAY_S`` a waiter keeps looking for messages still being consumed to
#: commit them, before it leaves them to the periodic commit (a slow listener, a pull consumer's
#: cache that the application does not poll).
WAIT_COMMIT_LOOKS = 20

#: Seconds a released queue of a concurrent consumer waits for its cached messages to be consumed
#: before it is released anyway (the rest is then redelivered to the new owner). An orderly queue
#: is released between two batches instead, however long that takes.
RELEASE_WAIT_S = 10.0

#: Seconds a queue is consumed without a break before its orderly task yields [RocketMQ ``MAX_TIME_CONSUME_CONTINUOUSLY``].
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0
#: Bounds of ``suspend_current_queue_time_ms`` [RocketMQ: 10..30000].
SUSPEND_MIN_MS, SUSPEND_MAX_MS = 10, 30_000
#: Seconds before a queue whose orderly lock is not (yet) valid is tried again.
LOCK_RETRY_S = 0.5


class QueueState:
    """In-flight messages of one held queue, by offset (no locks: the driver's ``ProcessQueue`` adds them).

    Args:
        queue: the queue.
        next_offset: where this client starts on it.
        fingerprint: what the store compares to tell the message at an offset from another one a
            failover put there (the store's rule, given by the driver: this module imports no store).

    Attributes:
        next_offset: where the next pull starts.
        last_entry: the fingerprint of the entry at ``next_offset - 1`` as this client was handed it
            ("" when not known): pulls carry it for the store to check that a failover did not give
            that offset to another message (D70; read both with :meth:`position`).
        releasing: set when rebalance takes the queue away: pulling stops, cached messages are
            still consumed, then the offset is committed and the queue released.
        dropped: the queue is gone from this consumer (released, or taken over by another member).
        flow_paused: set while the puller leaves the queue out because too much of it is cached.
        releasing_since: monotonic time the release began.
        stored_offset: the offset the store holds as committed, as far as this client knows (-1: unknown).
    """

    def __init__(self, queue: MessageQueue, next_offset: int, fingerprint: Callable[[MessageExt], str]) -> None:
        self.queue = queue
        self.start_offset = next_offset  # where this client started on the queue
        self.next_offset = next_offset
        self.last_entry = ""
        self.generation = 0  # bumped by reset(): messages pulled before a seek are stale
        self.releasing = False
        self.releasing_since = 0.0
        self.dropped = False
        #: set while the puller leaves this queue out for flow control: consuming then wakes it
        self.flow_paused = False
        self.last_pull_s = 0.0
        self.consumed_total = 0  # messages consumed (removed) since this client took the queue
        self._msgs: dict[int, MessageExt] = {}
        #: body bytes of the largest message the last pull brought (-1: none yet): the puller reads a
        #: queue of small messages without passing them through the pull script (see PullRequest.read_after)
        self.largest_body = -1
        self._bytes = 0
        self._fingerprint = fingerprint
        self.consuming: dict[int, float] = {}  # concurrent: offset -> monotonic time its listener call began
        self.stored_offset = -1
        self.lock_sent_s = 0.0  # orderly: when the last successful lock request was sent (monotonic)
        self.orderly_active = False  # orderly: a consume task for this queue is scheduled or running

    def position(self) -> tuple[int, str]:
        """Where the next pull starts and the fingerprint of the entry before it."""
        return self.next_offset, self.last_entry

    def add(self, msgs: list[MessageExt], next_offset: int, last_entry: str | None = None, *, now_s: float = 0.0) -> None:
        """Cache pulled messages; the next pull starts at ``next_offset``, after the entry whose
        fingerprint is ``last_entry`` (None: the last of ``msgs`` when it is that entry, else the
        one known before when the position did not move, else unknown)."""
        sizes = [len(m.body) for m in msgs]
        if last_entry is None:
            if msgs and msgs[-1].queue_offset == next_offset - 1:
                last_entry = self._fingerprint(msgs[-1])
            elif not msgs and next_offset == self.next_offset:
                last_entry = self.last_entry
            else:
                last_entry = ""
        cached = self._msgs
        if msgs and (not cached or next(reversed(cached)) < msgs[0].queue_offset):
            # the common case: the pull continues past everything cached (offsets rise within a pull)
            cached.update(zip([m.queue_offset for m in msgs], msgs))
            self._bytes += sum(sizes)
        else:
            for m, size in zip(msgs, sizes):
                if m.queue_offset not in cached:
                    cached[m.queue_offset] = m
                    self._bytes += size
        self.next_offset = next_offset
        self.last_entry = last_entry
        self.last_pull_s = now_s
        if sizes:
            self.largest_body = max(sizes)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit (smallest still in flight, else next).

        A message whose offset holds another message now is left alone: the queue was rewound under
        it (a lossy failover gave its offset to a new message, D70) and the new one is still to be
        consumed."""
        cached = self._msgs
        for m in msgs:
            held = cached.get(m.queue_offset)
            if held is not None and (held is m or held.msg_id == m.msg_id):
                del cached[m.queue_offset]
                self._bytes -= len(m.body)
                self.consumed_total += 1
        return self._oldest()

    def tried_again(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """Count one more try of each cached message of ``msgs`` (orderly retries in place): the cache
        holds copies with ``reconsume_times + 1``, which are returned; handed-out objects are not changed."""
        out = []
        for m in msgs:
            again = dataclasses.replace(m, reconsume_times=m.reconsume_times + 1)
            if m.queue_offset in self._msgs:
                self._msgs[m.queue_offset] = again
            out.append(again)
        return out

    def overdue_at(self, timeout_s: float, now_s: float) -> list[MessageExt]:
        """Cached messages whose listener call began more than ``timeout_s`` before ``now_s``."""
        limit = now_s - timeout_s
        return [self._msgs[o] for o, began in list(self.consuming.items()) if began < limit and o in self._msgs]

    def head(self, n: int) -> list[MessageExt]:
        """The ``n`` cached messages with the smallest offsets, in offset order (orderly batches)."""
        return list(itertools.islice(self._msgs.values(), n))

    def reset(self, next_offset: int, last_entry: str = "") -> None:
        """Drop cached messages and pull from ``next_offset`` next (a seek; ``last_entry``: the
        fingerprint of the entry before it, when known)."""
        self._msgs.clear()
        self._bytes = 0
        self.next_offset = next_offset
        self.last_entry = last_entry
        self.generation += 1

    def commit_offset(self) -> int:
        """The offset that is safe to commit now: the smallest still cached, else the next to pull."""
        return self._oldest()

    def _oldest(self) -> int:
        # Pulls add offsets in increasing order and a dict keeps insertion order, so the first key is
        # the smallest and the last the largest: O(1).
        return next(iter(self._msgs)) if self._msgs else self.next_offset

    @property
    def count(self) -> int:
        """Messages cached."""
        return len(self._msgs)

    @property
    def size_bytes(self) -> int:
        """Body bytes cached."""
        return self._bytes

    @property
    def span(self) -> int:
        """Offsets between the oldest and newest cached message."""
        return self._span()

    def _span(self) -> int:
        return next(reversed(self._msgs)) - next(iter(self._msgs)) if self._msgs else 0


# -- flow control -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowControl:
    """When pulling a queue pauses because too much of it is cached [RocketMQ ``pullThreshold*``].

    Args:
        max_span: the offset span of cached messages that pauses it (None: no span limit, orderly).
        max_count, max_bytes: messages and body bytes cached that pause it.
    """

    max_span: int | None
    max_count: int = PULL_THRESHOLD_FOR_QUEUE
    max_bytes: int = PULL_THRESHOLD_SIZE_FOR_QUEUE

    def limited(self, q: QueueState) -> bool:
        """Whether pulling ``q`` pauses now."""
        if q.count > self.max_count or q.size_bytes > self.max_bytes:
            return True
        # the span can only pass the limit when more than a few messages are cached
        return self.max_span is not None and q.count > 1 and q.span > self.max_span

    def paused(self, q: QueueState) -> bool:
        """:meth:`limited`, recorded in ``q.flow_paused`` for the consumer to wake the puller when it
        frees room (the flag goes up before the check, so room freed during it is seen)."""
        q.flow_paused = True
        q.flow_paused = paused = self.limited(q)
        return paused


#: The queue state a driver keeps (its ``ProcessQueue`` adds locks to :class:`QueueState`).
Q = TypeVar("Q", bound=QueueState)
C = TypeVar("C")
A = TypeVar("A")


# -- what to pull next ---------------------------------------------------------------------------


def held_order(ready: list[Q]) -> list[Q]:
    """The default pull order: the ready queues as held (claimed earlier first), one round trip for all."""
    return ready


class PullPlan(Generic[Q]):
    """Which held queues the puller's next round pulls, and in what order (both drivers; the asyncio
    one then deals them to its puller tasks in that order).

    ``order`` is the one place that decides which queue is pulled first: a consumer that must serve
    some queues before others (higher-priority queues first) gives its own; the default keeps the
    held order.

    Args:
        flow: the flow control that leaves a queue out while too much of it is cached.
        order: the ready queues, in the order they are pulled (a function of the list).
    """

    __slots__ = ("flow", "order")

    def __init__(self, flow: FlowControl, order: Callable[[list[Q]], list[Q]] = held_order) -> None:
        self.flow, self.order = flow, order

    def ready(self, queues: Iterable[Q], *, busy: Callable[[Q], bool]) -> list[Q]:
        """The queues to pull now, in pull order: not being released, not ``busy`` (the driver's word:
        caught up and left to its long-poll waiter, or being pulled right now), not flow-limited
        (recorded in ``flow_paused``, see :meth:`FlowControl.paused`)."""
        return self.order([q for q in queues if not (q.releasing or busy(q) or self.flow.paused(q))])


# -- commits ------------------------------------------------------------------------------------


class CommitPolicy(Generic[Q]):
    """What a held queue may commit and when, for both APIs (RocketMQ ``OffsetStore`` rules):

    - with every pull of the queue, in the pull's own script (store offsets only);
    - before its long-poll waiter blocks, when :class:`CommitPacer` says so (store offsets only);
    - by the periodic job (``PERSIST_INTERVAL_S``), for every queue whose offset moved;
    - when the queue is released, and at shutdown.

    Args:
        in_store: whether offsets live in the store (False: a local file, broadcasting), so that
            commits may ride along with pulls and waits.
        offset: what the consumer kind lets be committed for a queue now (None: nothing).
        may_consume: whether this client may still consume (and so commit) the queue: a lost
            orderly lock's offset belongs to the new holder.
    """

    __slots__ = ("_may_consume", "_offset", "in_store")

    def __init__(self, *, in_store: bool, offset: Callable[[Q], int | None], may_consume: Callable[[Q], bool]) -> None:
        self.in_store = in_store
        self._offset, self._may_consume = offset, may_consume

    def due(self, q: Q) -> int | None:
        """The committable offset of ``q`` when it differs from the stored one (and we may commit)."""
        if q.dropped or not self._may_consume(q):
            return None
        offset = self._offset(q)
        return None if offset is None or offset == q.stored_offset else offset

    def with_pull(self, q: Q) -> int | None:
        """What a pull of ``q`` commits in the same script (store offsets only)."""
        return self.due(q) if self.in_store else None

    def before_wait(self, q: Q) -> int | None:
        """What ``q``'s waiter would commit before it blocks (store offsets only), or None."""
        return self.with_pull(q)

    def paced(self, q: Q, pacer: CommitPacer, start: int, now_s: float) -> tuple[int | None, int]:
        """What ``q``'s long-poll waiter commits before it blocks (None: nothing now, as ``pacer``
        says) and how long that wait may block, ms; ``start``: where the wait reads from."""
        if not self.in_store:
            return None, LONG_POLL_BLOCK_MS
        due = self.before_wait(q)
        commit, block_ms = pacer.next(due, q.stored_offset, start, now_s)
        return (due if commit else None), block_ms

    def periodic(self, queues: Iterable[Q]) -> dict[MessageQueue, int]:
        """What the periodic job commits: every queue whose committable offset moved."""
        return {q.queue: o for q in queues if (o := self.due(q)) is not None}

    @staticmethod
    def committed(q: QueueState, offset: int, *, held: bool) -> bool:
        """Take in a commit of ``offset``: stored; or refused, the queue being another member's now.
        Returns whether ``q`` is lost (refused and not being released, which commits by itself)."""
        if held:
            q.stored_offset = offset
            return False
        return not q.releasing


class CommitPacer:
    """When the waiter of one queue commits before it blocks, and how long it blocks (one per waiter).

    A due commit is made once the stored offset lags ``lag`` offsets or more behind it, or once it has
    waited ``delay_s``; until then the wait blocks no longer than that. While messages delivered past
    the stored offset are still being consumed, the waiter looks again every ``delay_s`` (a wait that
    returns nothing), up to ``WAIT_COMMIT_LOOKS`` times, so the offset of a queue that went quiet is
    stored about ``delay_s`` after its last message was consumed — not one wake later, or at the
    5 s commit.

    Args:
        lag: offsets the store may lag behind before a due commit is made at once (at least 1).
        delay_s: longest time a due commit waits, seconds.
    """

    __slots__ = ("delay_s", "lag", "looks", "since")

    def __init__(self, lag: int, delay_s: float = WAIT_COMMIT_DELAY_S) -> None:
        self.lag, self.delay_s = max(1, lag), delay_s
        #: when the current pacing period began (monotonic seconds); None: nothing is waited for
        self.since: float | None = None
        self.looks = 0  # periods that ended with nothing to commit since the last commit

    def next(self, due: int | None, stored: int, next_offset: int, now_s: float) -> tuple[bool, int]:
        """Whether to commit before the next wait, and how long that wait may block (milliseconds).

        Args:
            due: the offset a commit would store now (None: nothing to commit).
            stored: the offset the store holds (-1: unknown).
            next_offset: where the queue's next read starts (offsets below it were delivered).
            now_s: the monotonic clock, seconds.
        """
        since = self.since
        if due is not None:
            if stored < 0 or due - stored >= self.lag or (since is not None and now_s - since >= self.delay_s):
                self.looks = 0
                self.since = now_s if due < next_offset else None  # some still consumed: look again
                return True, self._block_ms(now_s)
            if since is None:
                self.since = now_s
        elif 0 <= stored < next_offset and self.looks < WAIT_COMMIT_LOOKS:  # delivered, still consumed
            if since is None:
                self.since = now_s
            elif now_s - since >= self.delay_s:
                self.looks += 1
                self.since = now_s if self.looks < WAIT_COMMIT_LOOKS else None
        else:
            self.since = None
        return False, self._block_ms(now_s)

    def _block_ms(self, now_s: float) -> int:
        if self.since is None:
            return LONG_POLL_BLOCK_MS
        return max(1, min(LONG_POLL_BLOCK_MS, math.ceil((self.since + self.delay_s - now_s) * 1000)))


# -- rebalance ----------------------------------------------------------------------------------


@dataclass
class RebalancePlan:
    """What a rebalance does with the held queues (see :func:`plan_rebalance`)."""

    #: held queues wanted again while being released: they go on where they stopped
    resumed: list[MessageQueue]
    #: queues to commit and give up now
    release: list[MessageQueue]
    #: queues to claim (sorted)
    claim: list[MessageQueue]
    #: whether a hand-over is still pending (a queue left to drain its cache first)
    unsettled: bool


def plan_rebalance(
    held: Mapping[MessageQueue, QueueState], wanted: Iterable[MessageQueue], *, drains_on_release: bool, now_s: float
) -> RebalancePlan:
    """Which held queues go on, which are released now and which are claimed, given the ``wanted``
    queues: a queue no longer wanted starts releasing (pulling stops); a concurrent consumer's queue
    (``drains_on_release``) is released once its cache is consumed or ``RELEASE_WAIT_S`` passed, an
    orderly one at once (the driver releases it between two batches)."""
    wanted = set(wanted)
    plan = RebalancePlan([], [], sorted(wanted - set(held)), False)
    for mq, q in held.items():
        if mq in wanted:
            if q.releasing:  # handed back before it was released
                q.releasing = False
                plan.resumed.append(mq)
            continue
        if not q.releasing:
            q.releasing, q.releasing_since = True, now_s
        if drains_on_release and q.count and now_s - q.releasing_since < RELEASE_WAIT_S:
            plan.unsettled = True  # let cached messages be consumed first
            continue
        plan.release.append(mq)
    return plan


# -- how messages reach the listener ------------------------------------------------------------


def shown(q: QueueState, msgs: list[MessageExt]) -> list[MessageExt]:
    """``msgs`` as the listener sees them: messages of a retry topic show the topic they were sent to."""
    if not q.queue.topic.startswith(RETRY_PREFIX):
        return msgs
    return [dataclasses.replace(m, topic=m.system_properties.get(RETRY_TOPIC, m.topic)) for m in msgs]


class Batches:
    """The listener calls of one worker task: ``msgs`` cut into lists of ``batch_size`` as the task
    iterates them, so each list is made just before its call and freed after it (cutting them all
    when the pull arrives kept a list per call alive meanwhile, on the puller's thread)."""

    __slots__ = ("batch_size", "msgs")

    def __init__(self, msgs: list[MessageExt], batch_size: int) -> None:
        self.msgs, self.batch_size = msgs, batch_size

    def __iter__(self) -> Iterator[list[MessageExt]]:
        msgs, size = self.msgs, self.batch_size
        for i in range(0, len(msgs), size):
            yield msgs[i : i + size]


class Concurrent:
    """Concurrent consumption [RocketMQ ``ConsumeMessageConcurrentlyService``]: any worker takes any
    batch; the commit offset is the smallest still in flight; flow control also bounds the span; a
    released queue is first drained; the starting offset is stored for the group at once."""

    __slots__ = ()

    orderly = False
    drains_on_release = True
    max_span: int | None = CONSUME_CONCURRENTLY_MAX_SPAN

    @staticmethod
    def tasks(q: QueueState, msgs: list[MessageExt], batch_size: int, *, workers: int, queues: int) -> list[Batches]:
        """``msgs`` cut into listener calls of ``batch_size``, shared by at most as many tasks as this
        queue's share of the ``workers`` (``queues`` held): a task runs its listener calls in turn, as
        handing each call to a worker of its own costs more than a no-op listener, while the pulls of
        all queues still keep every worker busy."""
        msgs = shown(q, msgs)
        calls = -(-len(msgs) // batch_size)
        tasks = max(1, min(calls, workers // max(1, queues)))
        per_task = -(-calls // tasks) * batch_size
        return [Batches(msgs[i : i + per_task], batch_size) for i in range(0, len(msgs), per_task)]

    @staticmethod
    def answered(
        msgs: list[MessageExt], status: ConsumeConcurrentlyStatus, ack_index: int, *, broadcasting: bool
    ) -> tuple[list[MessageExt], list[MessageExt]]:
        """The messages the answer acknowledges and those to send back: success covers
        ``msgs[: ack_index + 1]`` [RocketMQ ``processConsumeResult``]; broadcasting never retries."""
        if broadcasting:
            return msgs, []
        success = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        if success and ack_index >= len(msgs) - 1:
            return msgs, []  # the common case
        ack = max(-1, min(ack_index, len(msgs) - 1)) if success else -1
        return msgs[: ack + 1], msgs[ack + 1 :]


class Listen(NamedTuple):
    """Command of a concurrent consume task: call the listener on ``msgs`` with ``ctx``, and send the
    task its status (None: the driver's own handling of the call failed and took care of ``msgs``)."""

    msgs: list[MessageExt]
    ctx: ConsumeConcurrentlyContext


class Reconsume(NamedTuple):
    """Command of a concurrent consume task: send ``msgs`` back for retry at ``delay_level`` (the
    retry topic, or the DLQ past ``max_reconsume_times``); nothing is sent to the task."""

    msgs: list[MessageExt]
    delay_level: int


#: A concurrent consume task as the drivers run it: commands out, listener statuses in.
ConsumeTask = Generator[Listen | Reconsume, ConsumeConcurrentlyStatus | None, None]


class Answered(Generic[C, A]):
    """A machine's commands as an iterator a driver answers: ``for command in steps: …; steps.answer =
    result`` (the answer goes in with the next command asked for, None when none was set) — the loop
    around ``generator.send`` both drivers would otherwise write out."""

    __slots__ = ("_send", "answer")

    def __init__(self, commands: Generator[C, A | None, None]) -> None:
        self._send = commands.send
        self.answer: A | None = None

    def __iter__(self) -> Answered[C, A]:
        return self

    def __next__(self) -> C:
        answer, self.answer = self.answer, None
        return self._send(answer)  # StopIteration ends the driver's loop


def consume_task(
    q: QueueState, batches: Iterable[list[MessageExt]], consumed: list[MessageExt], *, broadcasting: bool
) -> ConsumeTask:
    """One worker task of a concurrent push consumer, written once for both drivers (threads and
    asyncio tasks run it alike): one listener call per batch while ``q`` is held; what each answer
    acknowledges goes to ``consumed`` (the driver has the queue forget them together at the end, one
    flow-control check per task, also when the task stops early), the rest is sent back."""
    queue, context, success = q.queue, ConsumeConcurrentlyContext.of, ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    for msgs in batches:
        if q.dropped:
            return  # taken over after a failure: the new owner consumes the rest
        ctx = context(queue)
        status = yield Listen(msgs, ctx)
        if status is success and ctx.ack_index >= len(msgs) - 1:
            consumed += msgs  # the common case, without a call
            continue
        if status is None:
            continue
        ok, failed = Concurrent.answered(msgs, status, ctx.ack_index, broadcasting=broadcasting)
        consumed += ok
        if failed:
            yield Reconsume(failed, ctx.delay_level_when_next_consume)


@dataclass(frozen=True)
class Stop:
    """An orderly queue's consume task stops now; it runs again after ``again`` seconds (None: when messages come)."""

    again: float | None


class Call(NamedTuple):
    """Call the orderly listener on ``msgs`` (as shown to it) with ``ctx`` (a tuple: one is made per
    listener call, and a frozen dataclass costs twice as much to make)."""

    msgs: list[MessageExt]
    ctx: ConsumeOrderlyContext


@dataclass(frozen=True)
class DeadLetter:
    """Move ``msgs`` (tried too often) to the DLQ; on success they are forgotten and the queue goes
    on, else it is suspended for ``again`` seconds and tried again."""

    msgs: list[MessageExt]
    again: float


class Orderly:
    """Orderly consumption [RocketMQ ``ConsumeMessageOrderlyService``]: one batch of a queue at a time,
    from the head of its cache, while this client may consume it; a failed batch is retried in place
    after a suspension, and past ``max_reconsume_times`` moved to the DLQ. No span limit, and a
    released queue is given up between two batches (not drained).

    Args:
        batch_size: messages per listener call.
        max_reconsume_times: tries before the DLQ (-1: unlimited).
        suspend_ms: the default suspension of a queue, milliseconds.
    """

    __slots__ = ("batch_size", "max_reconsume_times", "suspend_ms")

    orderly = True
    drains_on_release = False
    max_span: int | None = None

    def __init__(self, *, batch_size: int, max_reconsume_times: int, suspend_ms: int) -> None:
        self.batch_size, self.max_reconsume_times, self.suspend_ms = batch_size, max_reconsume_times, suspend_ms

    def next(self, q: QueueState, *, may_consume: bool, running_s: float) -> Stop | Call:
        """What the task of ``q`` (running for ``running_s`` seconds) does next."""
        if q.dropped or q.releasing:
            return Stop(None)
        if not may_consume:
            return Stop(LOCK_RETRY_S)  # not (or no longer) sure of the lock: wait for its renewal
        if running_s > MAX_TIME_CONSUME_CONTINUOUSLY_S:
            return Stop(0.01)  # let other queues have the worker
        msgs = q.head(self.batch_size)
        if not msgs:
            return Stop(None)
        return Call(shown(q, msgs), ConsumeOrderlyContext(q.queue, self.suspend_ms))

    def answered(self, q: QueueState, call: Call, status: ConsumeOrderlyStatus) -> Stop | DeadLetter | None:
        """Take in the listener's answer on ``call``: None goes on with the next batch (the messages
        are forgotten, the next pull or commit stores the offset), a Stop suspends the queue, a
        DeadLetter asks the driver to move poison messages first (then :meth:`dead_lettered`)."""
        if status is ConsumeOrderlyStatus.SUCCESS:
            q.remove(call.msgs)
            return None
        again = min(max(call.ctx.suspend_current_queue_time_ms, SUSPEND_MIN_MS), SUSPEND_MAX_MS) / 1000
        dead = [m for m in q.tried_again(call.msgs) if 0 <= self.max_reconsume_times < m.reconsume_times]
        return DeadLetter(dead, again) if dead else Stop(again)

    @staticmethod
    def dead_lettered(q: QueueState, step: DeadLetter, *, moved: bool) -> Stop | None:
        """After the driver tried ``step``: go on (moved, forgotten) or suspend the queue (the store refused)."""
        if not moved:
            return Stop(step.again)
        q.remove(step.msgs)
        return None
