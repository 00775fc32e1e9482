"""The batching task behind ``mq.aio.Producer``: sends awaited at the same time (by any number of
tasks) go out in one pipeline (one round trip per node), as the sync producer's background sender
does for ``send_async`` — with the same preparing, planning and result code
(:meth:`mq.producer.core.SendCore.prepare_at_once`, :func:`~mq.producer.core.plan_puts`,
:func:`~mq.producer.core.outcomes`).

Sends gathered while rounds are in flight go in the next round, so under load each round carries
what arrived meanwhile (at most ``MAX_ROUND`` sends; up to ``ROUNDS_IN_FLIGHT`` rounds at once). A
plain ``await send()`` is prepared (checked, encoded, its queue chosen) by its round, so that one
round is prepared while the ones before it are in the store (:meth:`PipelineSender.submit_message`),
and its caller holds a :class:`SendFuture`: no task or coroutine a send (D59).

Where the store has a :class:`~mq.store.store.PutPipeline` (a plain ``redis.asyncio`` client over a
pool, standalone or Sentinel, no replicas to wait for, no redis-py observability), the task keeps
one connection of the pool (:class:`~mq.store.lane.AioPipeLane`) and writes the next round before it
reads the last one's replies, in this one task (D57's sync sender, on asyncio): no pool checkout,
task or reply coroutine per round or command. Only this task reads and writes that connection, so a
caller's cancellation never cuts a round; cancelling the task (shutdown, after its grace period)
drops the connection if it is mid-write or mid-read, and the sends of rounds not read fail with
:class:`~mq.errors.MQClientError` (they may have been stored). Elsewhere (cluster, embedded store,
replicas) each round is a ``put_many`` pipeline in a task of its own, as before.

A send that fails in the pipeline (a lost connection fails every round written and not read) is
retried through :meth:`SendCore.send` — the normal path, a pool connection — (one task per failed
round, one send at a time) within its time budget; oneway sends are not retried. A ``NOSCRIPT``
reply is run again after loading the script. The task never dies of an error: an unexpected one
fails the round's sends and is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from mq.aio.tasks import cancel_and_wait
from mq.errors import MQBrokerError, MQClientError
from mq.message import Message, SendResult
from mq.producer.core import (
    MAX_PIPELINE,
    AsyncSendCore,
    PutCall,
    oneway_failed,
    outcomes,
    plan_puts,
    puts_of,
    round_failed,
)
from mq.producer.request import Selector, SendRequest
from mq.queue import MessageQueue
from mq.store.aio import AsyncStore
from mq.store.store import PutPipeline

log = logging.getLogger("mq.producer")

#: Most sends one round (one pipeline) carries: twice the sync sender's ``MAX_PIPELINE``. The round's
#: sends to a queue go in one put call (:func:`~mq.producer.core.plan_puts`), so a bigger round makes
#: fewer, bigger calls (less client and server time a message), but the last round of a burst is
#: waited for with nothing else to do. Measured with waves of 1 000 sends (D56): 512 left the loop idle
#: 5.5 ms a wave against 3.3 ms; 128 with 3 rounds in flight about as fast as 256 with 2, with ~1 µs
#: more client CPU a message. Rounds are only as big as what arrived meanwhile.
MAX_ROUND = 2 * MAX_PIPELINE
#: Pipelines in flight at once (written and not read on the sender's own connection; elsewhere each
#: on a connection of the client's pool): while one waits for its replies the next is packed and
#: sent. Concurrent sends have no order among them; one task's
#: sends, each awaited, keep theirs.
ROUNDS_IN_FLIGHT = 2
#: One pending send prepared by its caller: the request, its queue, and the future its caller awaits
#: (None: oneway).
Pending = tuple[SendRequest, MessageQueue, "asyncio.Future[Any] | None"]
#: One pending send its round prepares (:meth:`PipelineSender.submit_message`): the message, where it
#: goes (queue, selector, arg), its time budget in seconds, and the future its caller awaits. Flat:
#: one object less a send in flight for the garbage collector.
Unprepared = tuple[Message, MessageQueue | None, Selector | None, Any, float, "SendFuture"]
#: The future of each of a round's requests, by the request's ``id`` (None: oneway).
Futures = dict[int, "asyncio.Future[Any] | None"]


#: What a send still under way when the producer's shutdown ended it fails with.
SHUT_DOWN_MID_SEND = (
    "the producer shut down before this send completed (it may have been stored): send it again with a started "
    "producer if it must go out (a consumer sees a duplicate at worst), or shut down with a longer timeout_s"
)


class SendFuture(asyncio.Future[SendResult]):
    """What :meth:`mq.aio.Producer.send` returns: the future of one send — awaiting it gives the
    :class:`SendResult` or raises the send's error — that is also a coroutine object.

    A future, so ``asyncio.gather``, ``asyncio.wait`` and ``asyncio.ensure_future`` take it as it is:
    1 000 concurrent sends make no task and no coroutine each (they were ~4 µs of ~20 µs of client CPU
    a send, D59). A coroutine too (``send``/``throw``/``close``, delegated to the future's own
    iterator, which keeps no state), so ``asyncio.create_task``, ``TaskGroup.create_task`` and
    ``asyncio.run`` accept it as they accept what an ``async def`` returns.

    Unlike a coroutine, the send is under way as soon as :meth:`~mq.aio.Producer.send` returns, awaited
    or not. Cancelling the future (or the task awaiting it) before the sender's round takes the send
    withdraws it; after that the message is stored whole or not at all.
    """

    __slots__ = ()

    def send(self, value: None) -> Any:
        """One step of awaiting the future (the coroutine protocol: what a task calls)."""
        return self.__await__().send(value)

    def throw(self, *exc: Any) -> Any:
        """Raise ``exc`` in the awaiting (the coroutine protocol: a task's cancellation comes here)."""
        return self.__await__().throw(*exc)

    def close(self) -> None:
        """Nothing to close: the send goes on (cancel the future to withdraw it)."""


def _settle_from(future: SendFuture, task: asyncio.Task[SendResult]) -> None:
    """Complete ``future`` as ``task`` ended (its exception retrieved even when its caller gave up).

    A task cancelled while its future is still pending was not cancelled by the future's caller
    (that cancels the future first, see :func:`_cancel_task`) but by :meth:`PipelineSender.stop`: the
    caller gets the documented :class:`MQClientError`, never a ``CancelledError`` that is not its own
    (a web handler awaiting the send would count as cancelled, D98)."""
    if task.cancelled():
        if not future.done():
            future.set_exception(MQClientError(SHUT_DOWN_MID_SEND))
        return
    error = task.exception()
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(task.result())


def _cancel_task(task: asyncio.Task[SendResult], future: SendFuture) -> None:
    if future.cancelled():
        task.cancel()


#: A send's path when its round cannot prepare it: a coroutine that sends ``(msg, queue, selector,
#: arg, timeout_s)`` itself (reads a route, a delay level's own script call, a span or the trace).
SlowSend = Callable[[Message, "MessageQueue | None", "Selector | None", Any, float], Coroutine[Any, Any, SendResult]]


class PipelineSender:
    """Gathers pending sends and runs them in pipelines from one task.

    Args:
        store, core: the producer's store and send core.
        slow: how a send its round cannot prepare (a delay level, a route to read) is sent instead.
    """

    def __init__(self, store: AsyncStore, core: AsyncSendCore, slow: SlowSend) -> None:
        self._store = store
        self._core = core
        self._slow = slow
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[Pending | Unprepared] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        #: sends retried or sent on their own path, each a task (waited for by :meth:`stop`)
        self._retries: set[asyncio.Task[Any]] = set()
        #: pipelines sent so far (each one ``put_many`` call or one round on the pipeline's connection)
        self.rounds = 0
        #: the pipeline over a connection of the sender's own, while the task runs with one
        self.pipeline: PutPipeline | None = None

    def start(self) -> None:
        """Start the task (on the running loop)."""
        loop = self._loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="mq-aio-sender")

    def submit(self, request: SendRequest, queue: MessageQueue) -> asyncio.Future[Any] | None:
        """Queue a prepared send to ``queue``; the future its caller awaits (None for a oneway send),
        which resolves to a :class:`SendResult`.

        Cancelling the future does not withdraw a send already handed over: it is stored or not, whole.
        """
        self._check_open()
        future = None if request.oneway else asyncio.get_running_loop().create_future()
        self._queue((request, queue, future))
        return future

    def submit_message(
        self, msg: Message, queue: MessageQueue | None, selector: Selector | None, arg: Any, timeout_s: float
    ) -> SendFuture:
        """Queue ``msg`` to be prepared (checked, encoded, its queue chosen: :meth:`SendCore.prepare_at_once`)
        by the round that sends it, not by its caller: the callers of many concurrent sends then only
        queue them, and each round is prepared while the rounds before it are in the store — a single
        thread's way to do what the sync producer's caller and sender threads do side by side.

        The future resolves to the :class:`SendResult` or raises the send's error (bad input among
        them). A send the round cannot prepare without the store (a delay level, a route not cached) is
        sent by the ``slow`` path in a task of its own, into the same future. A send whose caller gave up
        before its round took it is dropped; once taken, it is stored whole or not at all.
        """
        if self._closing:
            self._check_open()
        future = SendFuture(loop=self._loop)
        pending = self._pending
        if not pending:  # as _queue does, inline: this runs once a send
            self._wake.set()
        pending.append((msg, queue, selector, arg, timeout_s, future))
        return future

    def chain(self, send: Coroutine[Any, Any, SendResult], future: SendFuture | None = None) -> SendFuture:
        """Run ``send`` in a task of its own (waited for by :meth:`stop`), completing ``future`` (a new
        one by default) as it ends; cancelling the future cancels the task."""
        if future is None:  # a producer's send (one of a round's comes with its future)
            self._check_open()
            future = SendFuture(loop=self._loop)
        assert self._loop is not None  # started
        task = self._loop.create_task(send)
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)
        task.add_done_callback(partial(_settle_from, future))
        future.add_done_callback(partial(_cancel_task, task))
        return future

    def _check_open(self) -> None:
        if self._closing:
            raise MQClientError("the producer is shutting down: no new sends")

    def _queue(self, item: Pending | Unprepared) -> None:
        """Add a pending send; the first one the task finds waiting wakes it (while sends are pending
        the task is not waiting for its event: it takes them all before it waits again)."""
        if not self._pending:
            self._wake.set()
        self._pending.append(item)

    async def stop(self, timeout_s: float) -> None:
        """Send what is pending (``timeout_s`` at most, seconds), then stop; sends still pending after
        that fail with :class:`MQClientError`."""
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.wait([task, *self._retries], timeout=timeout_s)
            await cancel_and_wait([task, *self._retries])  # those done are not cancelled
        error = MQClientError("the producer shut down before this send went out")
        for item in self._pending:
            _fail(item, error)
        self._pending.clear()

    async def _run(self) -> None:
        try:
            pipeline = self._store.put_pipeline()
        except Exception as e:  # the task never dies: one pipeline at a time then
            log.error("asyncio sender: no pipeline of its own (%r); sending through the pool", e)
            pipeline = None
        self.pipeline = pipeline
        if pipeline is None:
            await self._run_rounds()
        else:
            await self._run_lane(pipeline)

    async def _run_lane(self, pipeline: PutPipeline) -> None:
        """Rounds over the pipeline's own connection, written ahead: up to ``ROUNDS_IN_FLIGHT`` rounds
        written and not read; the oldest is read when that many are out or nothing is pending. This
        task alone uses the connection, so a caller's cancellation never interrupts a write or a read;
        cancelling this task (shutdown) drops the connection if a read or write is under way, and fails
        the sends of every round not read with :class:`MQClientError` (they may have been stored)."""
        written: list[_Round] = []
        try:
            while True:
                if self._pending and len(written) < ROUNDS_IN_FLIGHT:
                    items, self._pending = self._pending[:MAX_ROUND], self._pending[MAX_ROUND:]
                    await self._write(items, pipeline, written)
                elif written:
                    sent = written[0]
                    await self._read(sent, pipeline)
                    del written[0]
                elif self._closing:
                    return
                else:
                    self._wake.clear()  # nothing pending: the next send sets it again
                    await self._wake.wait()
        except BaseException:
            error = MQClientError("the producer shut down before this send's reply was read (it may have been stored)")
            for sent in written:
                for r in sent.requests:
                    self._settle(r, sent.futures[id(r)], error)
            raise
        finally:
            try:
                await pipeline.close()
            except Exception as e:
                log.warning("asyncio sender: closing its pipeline connection failed: %r", e)

    async def _write(self, items: list[Pending | Unprepared], pipeline: PutPipeline, written: list[_Round]) -> None:
        """Prepare and write one round; it joins ``written`` (to be read later) unless it was settled
        already (nothing to send, or the connection failed: retried through the normal path)."""
        chosen: list[tuple[SendRequest, MessageQueue]] = []
        futures: Futures = {}
        try:
            chosen, futures = self._prepared(items)
            if not chosen:
                return
            calls = plan_puts(chosen)
            puts = puts_of(calls)
            sent = _Round([r for r, _ in chosen], calls, futures)
            written.append(sent)  # before the write: a cancelled write fails its sends too
            self.rounds += 1
            try:
                sent.handle = await pipeline.send(puts)
            except MQBrokerError as e:  # the connection failed: retried through the normal path
                written.remove(sent)
                self._settle_round(calls, futures, [e] * len(puts))
        except Exception as e:
            if written and written[-1].futures is futures:
                written.pop()
            self._failed(items, [r for r, _ in chosen], futures, e)

    async def _read(self, sent: _Round, pipeline: PutPipeline) -> None:
        """Read one written round's replies and settle its sends."""
        results: list[Any]
        try:
            try:
                results = await pipeline.read(sent.handle)
            except MQBrokerError as e:  # lost with the connection: retried through the normal path
                results = [e] * len(sent.calls)
            self._settle_round(sent.calls, sent.futures, results)
        except Exception as e:
            self._failed([], sent.requests, sent.futures, e)

    async def _run_rounds(self) -> None:
        """Rounds through the store's ``put_many`` (a pool connection each), each in a task of its own:
        the clients without a pipeline of their own (cluster, embedded store, replicas to wait for)."""
        rounds: set[asyncio.Task[None]] = set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                if len(rounds) >= ROUNDS_IN_FLIGHT:
                    _, rounds = await asyncio.wait(rounds, return_when=asyncio.FIRST_COMPLETED)
                    continue
                items, self._pending = self._pending[:MAX_ROUND], self._pending[MAX_ROUND:]
                rounds.add(asyncio.get_running_loop().create_task(self._send_guarded(items)))
            if self._closing:
                if rounds:
                    await asyncio.wait(rounds)
                return
            rounds = {t for t in rounds if not t.done()}

    async def _send_guarded(self, items: list[Pending | Unprepared]) -> None:
        chosen: list[tuple[SendRequest, MessageQueue]] = []
        futures: Futures = {}
        try:
            chosen, futures = self._prepared(items)
            await self._send(chosen, futures)
        except Exception as e:
            self._failed(items, [r for r, _ in chosen], futures, e)

    def _failed(self, items: list[Pending | Unprepared], requests: list[SendRequest], futures: Futures, e: Exception) -> None:
        """A round failed unexpectedly (a bug): its unfinished sends fail with ``e``, and are logged."""
        unfinished = [r for r in requests if (f := futures[id(r)]) is None or not f.done()]
        round_failed(requests, unfinished, e)
        for r in unfinished:
            self._settle(r, futures[id(r)], e)
        for item in items:  # those not prepared yet
            if len(item) == 6 or id(item[0]) not in futures:
                _fail(item, e)

    def _prepared(self, items: list[Pending | Unprepared]) -> tuple[list[tuple[SendRequest, MessageQueue]], Futures]:
        """The round's sends, each prepared, with its queue, and the future of each request (by its
        ``id``). Those of :meth:`submit_message` are prepared here: a bad one fails its own future, one
        that needs the store is sent by the ``slow`` path."""
        chosen: list[tuple[SendRequest, MessageQueue]] = []
        futures: Futures = {}
        prepare = self._core.prepare_at_once
        for item in items:
            if len(item) == 3:
                request, pipelined, future = item
            else:
                msg, queue, selector, arg, timeout_s, unprepared = item
                if unprepared.done():
                    continue  # its caller gave up before the round took it: not sent
                try:
                    prepared = prepare(msg, (queue, selector, arg), timeout_s, False, None)
                except Exception as e:  # bad input, or a selector's error: that send's own
                    unprepared.set_exception(e)
                    continue
                if prepared is None or prepared[1] is None:  # a delay level or a route to read
                    self.chain(self._slow(msg, queue, selector, arg, timeout_s), unprepared)
                    continue
                future = unprepared
                request, pipelined = prepared[0], prepared[1]
            chosen.append((request, pipelined))
            futures[id(request)] = future
        return chosen, futures

    async def _send(self, chosen: list[tuple[SendRequest, MessageQueue]], futures: Futures) -> None:
        if not chosen:
            return
        calls = plan_puts(chosen)
        puts = puts_of(calls)
        results: list[Any]
        try:
            self.rounds += 1
            results = await self._store.put_many(puts)
        except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
            results = [e] * len(puts)
        self._settle_round(calls, futures, results)

    def _settle_round(self, calls: list[PutCall], futures: Futures, results: list[Any]) -> None:
        """Settle a round's sends from its results; those to retry go to one task (one send at a time,
        as the sync sender's thread does)."""
        retries: list[tuple[SendRequest, asyncio.Future[Any] | None]] = []
        settle = self._settle
        for r, outcome in outcomes(calls, results):
            future = futures[id(r)]
            if outcome is None:
                retries.append((r, future))
            elif type(outcome) is SendResult and future is not None:  # the common case, inline
                if not future.done():
                    future.set_result(outcome)
            else:
                settle(r, future, outcome)
        if retries:
            task = asyncio.get_running_loop().create_task(self._retry(retries))
            self._retries.add(task)
            task.add_done_callback(self._retries.discard)

    async def _retry(self, retries: list[tuple[SendRequest, asyncio.Future[Any] | None]]) -> None:
        try:
            for request, future in retries:
                if future is not None and future.done():
                    continue  # its caller gave up
                try:
                    result: SendResult | BaseException = await self._core.send(request)
                except Exception as e:
                    result = e
                self._settle(request, future, result)
        finally:  # cancelled by stop(): the sends not retried yet fail as documented, none waits forever
            error = MQClientError(SHUT_DOWN_MID_SEND)
            for request, future in retries:
                if future is not None and not future.done():
                    self._settle(request, future, error)

    @staticmethod
    def _settle(request: SendRequest, future: asyncio.Future[Any] | None, outcome: SendResult | BaseException) -> None:
        """Complete ``future`` unless its caller gave up meanwhile; log a failed oneway send."""
        if future is None:
            if isinstance(outcome, BaseException):
                oneway_failed(request, outcome)
        elif not future.done():
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


class _Round:
    """A round written on the pipeline's connection and not read yet."""

    __slots__ = ("calls", "futures", "handle", "requests")

    def __init__(self, requests: list[SendRequest], calls: list[PutCall], futures: Futures) -> None:
        self.requests = requests
        self.calls = calls
        self.futures = futures
        self.handle: Any = None


def _fail(item: Pending | Unprepared, error: BaseException) -> None:
    """Fail a pending send with ``error`` (unless its caller gave up; a oneway one is logged)."""
    if len(item) == 3:
        request, _, future = item
        PipelineSender._settle(request, future, error)
    elif not item[5].done():
        item[5].set_exception(error)
