"""The batching task behind ``mq.aio.Producer``: sends awaited at the same time (by any number of
tasks) go out in one pipeline (one round trip per node), as the sync producer's background sender
does for ``send_async`` — with the same preparing, planning and result code
(:meth:`mq.producer.core.SendCore.prepare_at_once`) and the same decisions
(:class:`mq.producer.pipeline.SendPipeline`: what goes in a round, how many are in flight, what each
reply means). This module is the task's I/O.

Sends gathered while rounds are in flight go in the next round, so under load each round carries
what arrived meanwhile (at most ``MAX_ROUND`` sends; up to ``ROUNDS_IN_FLIGHT`` rounds at once). A
plain ``await send()`` is prepared (checked, encoded, its queue chosen) by its round, so that one
round is prepared while the ones before it are in the store (:meth:`PipelineSender.submit_message`),
and its caller holds an :class:`~mq.aio.futures.AioSendFuture`: no task or coroutine a send (D59).

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

from mq.aio.futures import SHUT_DOWN_MID_SEND, AioSendFuture, UnpreparedSend, cancel_task, settle_from
from mq.aio.tasks import cancel_and_wait
from mq.errors import MQBrokerError, MQClientError
from mq.model.message import Message, SendResult
from mq.model.queue import MessageQueue
from mq.producer.core import AsyncSendCore, oneway_failed, round_failed
from mq.producer.pipeline import MAX_PIPELINE, Pending, Round, SendPipeline, Step
from mq.producer.request import Selector, SendRequest
from mq.store.aio import AsyncStore
from mq.store.store import PutPipeline

log = logging.getLogger("mq.producer")

#: Most sends one round carries: twice the sync sender's (fewer, bigger put calls; the last round of
#: a burst is waited for with nothing else to do; D56). Rounds are only as big as what arrived meanwhile.
MAX_ROUND = 2 * MAX_PIPELINE
#: Pipelines in flight at once (written and not read on the sender's own connection; elsewhere each
#: on a connection of the client's pool). Concurrent sends have no order among them; one task's
#: sends, each awaited, keep theirs.
ROUNDS_IN_FLIGHT = 2
PIPELINE = SendPipeline(MAX_ROUND, ROUNDS_IN_FLIGHT)

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
        self._pending: list[Pending | UnpreparedSend] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        #: sends retried or sent on their own path, each a task (waited for by :meth:`stop`)
        self._retries: set[asyncio.Task[Any]] = set()
        #: rounds sent through the pool (no pipeline of its own), each a task, while they run
        self._rounds: set[asyncio.Task[None]] = set()
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
        pending = Pending(request, future)
        pending.target = queue
        self._queue(pending)
        return future

    def submit_message(
        self, msg: Message, queue: MessageQueue | None, selector: Selector | None, arg: Any, timeout_s: float
    ) -> UnpreparedSend:
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
        future = UnpreparedSend(loop=self._loop)
        future.msg, future.queue, future.selector, future.arg, future.timeout_s = msg, queue, selector, arg, timeout_s
        pending = self._pending
        if not pending:  # as _queue does, inline: this runs once a send
            self._wake.set()
        pending.append(future)
        return future

    def chain(self, send: Coroutine[Any, Any, SendResult], future: AioSendFuture | None = None) -> AioSendFuture:
        """Run ``send`` in a task of its own (waited for by :meth:`stop`), completing ``future`` (a new
        one by default) as it ends; cancelling the future cancels the task."""
        if future is None:  # a producer's send (one of a round's comes with its future)
            self._check_open()
            future = AioSendFuture(loop=self._loop)
        task = self._spawn(send, self._retries)
        task.add_done_callback(partial(settle_from, future))
        future.add_done_callback(partial(cancel_task, task))
        return future

    def _spawn(self, coro: Coroutine[Any, Any, Any], tasks: set[asyncio.Task[Any]]) -> asyncio.Task[Any]:
        """``coro`` in a task kept in ``tasks`` while it runs (a task nobody holds may be collected)."""
        assert self._loop is not None  # started
        task = self._loop.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    def _check_open(self) -> None:
        if self._closing:
            raise MQClientError("the producer is shutting down: no new sends")

    def _queue(self, item: Pending | UnpreparedSend) -> None:
        """Add a pending send; the first one the task finds waiting wakes it (while sends are pending
        the task is not waiting for its event: it takes them all before it waits again)."""
        pending = self._pending
        if not pending:
            self._wake.set()
        pending.append(item)

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
            _settle(item, error)
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
        """Rounds over the pipeline's own connection, written ahead (:meth:`SendPipeline.step`). This
        task alone uses the connection, so a caller's cancellation never interrupts a write or a read;
        cancelling this task (shutdown) drops the connection if a read or write is under way, and fails
        the sends of every round not read with :class:`MQClientError` (they may have been stored)."""
        written: list[Round[Pending | UnpreparedSend]] = []
        step = PIPELINE.step
        try:
            while True:
                what = step(len(self._pending), len(written), self._closing)
                if what is Step.WRITE:
                    items, self._pending = PIPELINE.take(self._pending)
                    await self._write(items, pipeline, written)
                elif what is Step.READ:
                    await self._read(written[0], pipeline)
                    del written[0]
                elif what is Step.WAIT:
                    self._wake.clear()  # nothing pending: the next send sets it again
                    await self._wake.wait()
                else:
                    return
        except BaseException:
            error = MQClientError("the producer shut down before this send's reply was read (it may have been stored)")
            for sent in written:
                for p in sent.sends:
                    _settle(p, error)
            raise
        finally:
            try:
                await pipeline.close()
            except Exception as e:
                log.warning("asyncio sender: closing its pipeline connection failed: %r", e)

    async def _write(
        self, items: list[Pending | UnpreparedSend], pipeline: PutPipeline, written: list[Round[Pending | UnpreparedSend]]
    ) -> None:
        """Prepare and write one round; it joins ``written`` (to be read later) unless it was settled
        already (nothing to send, or the connection failed: retried through the normal path)."""
        sent: Round[Pending | UnpreparedSend] | None = None
        try:
            sent = PIPELINE.plan(self._prepared(items))
            if sent is None:
                return
            written.append(sent)  # before the write: a cancelled write fails its sends too
            self.rounds += 1
            try:
                sent.handle = await pipeline.send(sent.puts)
            except MQBrokerError as e:  # the connection failed: retried through the normal path
                written.remove(sent)
                self._settle_round(sent, PIPELINE.lost(sent, e))
        except Exception as e:
            if sent is not None and written and written[-1] is sent:
                written.pop()
            self._failed(items, e)

    async def _read(self, sent: Round[Pending | UnpreparedSend], pipeline: PutPipeline) -> None:
        """Read one written round's replies and settle its sends."""
        results: list[Any]
        try:
            try:
                results = await pipeline.read(sent.handle)
            except MQBrokerError as e:  # lost with the connection: retried through the normal path
                results = PIPELINE.lost(sent, e)
            self._settle_round(sent, results)
        except Exception as e:
            self._failed(sent.sends, e)

    async def _run_rounds(self) -> None:
        """Rounds through the store's ``put_many`` (a pool connection each), each in a task of its own:
        the clients without a pipeline of their own (cluster, embedded store, replicas to wait for).
        A round's end wakes this task, so that a read is a wait for the next event."""
        step = PIPELINE.step
        while True:
            what = step(len(self._pending), len(self._rounds), self._closing)
            if what is Step.WRITE:
                items, self._pending = PIPELINE.take(self._pending)
                self._spawn(self._send(items), self._rounds).add_done_callback(self._woken)
            elif what is Step.STOP:
                return
            else:  # READ or WAIT: the next send or a round's end sets it (no await since the step)
                self._wake.clear()
                await self._wake.wait()

    def _woken(self, _: asyncio.Task[None]) -> None:
        self._wake.set()

    async def _send(self, items: list[Pending | UnpreparedSend]) -> None:
        """One round through ``put_many``."""
        try:
            sent = PIPELINE.plan(self._prepared(items))
            if sent is None:
                return
            results: list[Any]
            try:
                self.rounds += 1
                results = await self._store.put_many(sent.puts)
            except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
                results = PIPELINE.lost(sent, e)
            self._settle_round(sent, results)
        except Exception as e:
            self._failed(items, e)

    def _failed(self, items: list[Pending | UnpreparedSend], e: Exception) -> None:
        """A round failed unexpectedly (a bug): its unfinished sends fail with ``e``, and are logged."""
        unfinished = [i for i in items if (f := _future_of(i)) is None or not f.done()]
        round_failed(len(items), [i.request for i in unfinished if isinstance(i, Pending)], e)
        for item in unfinished:
            _settle(item, e)

    def _prepared(self, items: list[Pending | UnpreparedSend]) -> list[Pending | UnpreparedSend]:
        """The round's sends, each prepared. Those of :meth:`submit_message` are prepared here: a bad one
        fails its own future, one that needs the store is sent by the ``slow`` path."""
        sends: list[Pending | UnpreparedSend] = []
        append, prepare = sends.append, self._core.prepare_at_once
        for item in items:
            if isinstance(item, Pending):  # prepared by its caller (a span, the trace, a oneway send)
                append(item)
                continue
            if item.done():
                continue  # its caller gave up before the round took it: not sent
            msg, queue, selector, arg = item.msg, item.queue, item.selector, item.arg
            del item.msg, item.selector, item.arg  # the future may outlive the send: it keeps none of it
            try:
                prepared = prepare(msg, (queue, selector, arg), item.timeout_s, False, None)
            except Exception as e:  # bad input, or a selector's error: that send's own
                item.set_exception(e)
                continue
            if prepared is None or prepared[1] is None:  # a delay level or a route to read
                self.chain(self._slow(msg, queue, selector, arg, item.timeout_s), item)
                continue
            item.request, item.target = prepared[0], prepared[1]
            append(item)
        return sends

    def _settle_round(self, sent: Round[Pending | UnpreparedSend], results: list[Any]) -> None:
        """Settle a round's sends from its results; those to retry go to one task (one send at a time,
        as the sync sender's thread does)."""
        settled = PIPELINE.settle(sent, results)
        for p, outcome in zip(settled.sends, settled.outcomes):
            if isinstance(p, UnpreparedSend):  # its own future, which may outlive the send: it keeps none of it
                future = p
                del p.request
            else:
                future = p.future
            if future.done():  # its caller gave up
                continue
            if isinstance(outcome, SendResult):  # the common case first
                future.set_result(outcome)
            else:
                future.set_exception(outcome)
        for p, error in settled.oneway_failed:
            oneway_failed(p.request, error)
        if settled.retries:
            self._spawn(self._retry(settled.retries), self._retries)

    async def _retry(self, retries: list[Pending | UnpreparedSend]) -> None:
        try:
            for p in retries:
                if (future := _future_of(p)) is not None and future.done():
                    continue  # its caller gave up
                try:
                    result: SendResult | BaseException = await self._core.send(p.request)
                except Exception as e:
                    result = e
                _settle(p, result)
        finally:  # cancelled by stop(): the sends not retried yet fail as documented, none waits forever
            error = MQClientError(SHUT_DOWN_MID_SEND)
            for p in retries:
                if (future := _future_of(p)) is not None and not future.done():
                    _settle(p, error)


def _future_of(item: Pending | UnpreparedSend) -> asyncio.Future[Any] | None:
    """What a pending send's caller awaits (an unprepared send is its own future; None: oneway)."""
    return item.future if isinstance(item, Pending) else item


def _settle(item: Pending | UnpreparedSend, outcome: SendResult | BaseException) -> None:
    """Complete a send's future unless its caller gave up meanwhile; log a failed oneway send."""
    future = _future_of(item)
    if future is None:
        if isinstance(outcome, BaseException) and isinstance(item, Pending):
            oneway_failed(item.request, outcome)
    elif not future.done():
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
