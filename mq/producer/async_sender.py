"""The background sender behind ``send_async`` and ``send_oneway``.

Sends that wait at the same time go out in one pipeline (one round trip per node), and those bound
for the same queue in bounded put calls, so many concurrent async sends cost little more than one.
Where the store has a :class:`~mq.store.store.PutPipeline` (a plain Redis client, no replicas to wait
for), two rounds are in flight on its connection: the next round is written before the last one's
replies are read, so Redis runs one while the thread packs the next (D57). What goes in a round, how
many are in flight and what each reply means are :mod:`mq.producer.pipeline`'s, as for the asyncio
producer; this module is the thread's I/O.
A send that fails in the pipeline is retried through the producer's sync path (the same
:class:`~mq.producer.request.SendRequest`) within what is left of its time budget (oneway sends are
not retried, as in RocketMQ).

The thread never dies of an error: whatever one round raises is logged at ERROR on the
``mq.producer`` logger with the sends it affects, and those sends' futures fail with it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from operator import attrgetter
from typing import Any

from mq.errors import MQBrokerError
from mq.model.message import SendResult
from mq.model.queue import MessageQueue
from mq.producer.core import oneway_failed, round_failed
from mq.producer.futures import FutureGroup
from mq.producer.pipeline import MAX_PIPELINE, Pending, Round, SendPipeline, Step
from mq.producer.request import SendRequest
from mq.store import Store
from mq.store.store import PutPipeline

log = logging.getLogger("mq.producer")

__all__ = ["MAX_PIPELINE", "AsyncSender"]

#: Rounds of this thread: up to ``MAX_PIPELINE`` sends, two in flight on the pipeline's connection (D57).
PIPELINE = SendPipeline(MAX_PIPELINE, rounds_in_flight=2)


class AsyncSender:
    """A daemon thread draining pending sends into pipelines; :data:`PIPELINE` decides, this thread
    does the I/O."""

    def __init__(
        self,
        store: Store,
        select: Callable[[SendRequest], MessageQueue],
        send_sync: Callable[[SendRequest], SendResult],
        futures: FutureGroup | None = None,
    ) -> None:
        self._store = store
        self._select = select
        self._send_sync = send_sync
        self._futures = futures or FutureGroup()
        self._queue: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        #: sends queued since the caller last let go of the GIL (see :meth:`submit`)
        self._submitted = 0
        self._thread = threading.Thread(target=self._run, name="mq-async-sender", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, send: Pending | SendRequest) -> None:
        """Queue a send: a :class:`Pending` (its request and future, the producer's way), or a request
        whose own ``future`` its caller took.

        Every :data:`MAX_PIPELINE` sends the calling thread lets go of the GIL for a moment
        (``time.sleep(0)``): a caller queueing sends in a loop would otherwise keep it for the
        interpreter's whole switch interval (5 ms) while the sender thread, back from writing or
        reading a round, waits for it — and Redis waits for the sender (D64)."""
        if not isinstance(send, Pending):
            send = Pending(send, None if send.oneway else send.future)
        self._queue.put(send)
        self._submitted += 1
        if self._submitted >= MAX_PIPELINE:
            self._submitted = 0
            time.sleep(0)

    def stop(self) -> None:
        """Send everything queued so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        pipeline: PutPipeline | None
        try:
            pipeline = self._store.put_pipeline()
        except Exception as e:  # the thread never dies: one pipeline at a time then
            log.error("async sender: no pipeline of its own (%r); sending one round at a time", e)
            pipeline = None
        pending: list[Pending] = []
        written: list[Round[Pending]] = []
        closing = False
        step = PIPELINE.step
        while True:
            closing = self._drain(pending, closing)
            what = step(len(pending), len(written), closing)
            if what is Step.WRITE:
                batch, pending = PIPELINE.take(pending)
                try:
                    sent = self._write(batch, pipeline)
                except Exception as e:
                    self._failed(batch, e)
                else:
                    if sent is not None:
                        written.append(sent)
            elif what is Step.READ:
                sent = written.pop(0)
                try:
                    self._read(sent, pipeline)
                except Exception as e:
                    self._failed(sent.sends, e)
            elif what is Step.WAIT:
                item = self._queue.get()
                if item is None:
                    closing = True
                else:
                    pending.append(item)
            else:
                break
        if pipeline is not None:
            try:
                pipeline.close()
            except Exception as e:
                log.warning("async sender: closing its pipeline connection failed: %r", e)

    def _drain(self, pending: list[Pending], closing: bool) -> bool:
        """Move what is queued into ``pending``, up to a round's worth; whether the producer is closing."""
        get, empty = self._queue.get, self._queue.empty
        while not closing and len(pending) < MAX_PIPELINE and not empty():
            item = get()
            if item is None:
                return True
            pending.append(item)
        return closing

    def _failed(self, batch: list[Pending], e: Exception) -> None:
        """A write or read raised unexpectedly (a bug): its unfinished sends fail with ``e``, logged,
        and the thread goes on."""
        unfinished = [p for p in batch if p.future is None or not p.future.done()]
        round_failed(len(batch), [p.request for p in unfinished], e)
        for p in unfinished:
            self._fail(p, e)

    def _write(self, batch: list[Pending], pipeline: PutPipeline | None) -> Round[Pending] | None:
        """Write ``batch``'s puts; the round to read later, or None when it is settled already."""
        sends: list[Pending] = []
        append, select = sends.append, self._select
        for p in batch:
            if p.request.due_ms is not None or p.request.lite is not None:  # delayed or lite: its own script call
                self._retry(p)
                continue
            try:
                p.target = select(p.request)
            except Exception as e:  # a selector or route error belongs to that send only
                self._fail(p, e)
            else:
                append(p)
        sent = PIPELINE.plan(sends)
        if sent is None:
            return None
        if pipeline is None:
            try:
                results: list[Any] = self._store.put_many(sent.puts)
            except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
                results = PIPELINE.lost(sent, e)
            self._settle_round(sent, results)
            return None
        try:
            sent.handle = pipeline.send(sent.puts)  # the last step: a round written is always read
        except MQBrokerError as e:  # the connection failed: retried through the sync path
            self._settle_round(sent, PIPELINE.lost(sent, e))
            return None
        return sent

    def _read(self, sent: Round[Pending], pipeline: PutPipeline | None) -> None:
        assert pipeline is not None  # only rounds written ahead are read
        results: list[Any]
        try:
            results = pipeline.read(sent.handle)
        except MQBrokerError as e:  # the round was lost with the connection: retried through the sync path
            results = PIPELINE.lost(sent, e)
        self._settle_round(sent, results)

    def _settle_round(self, sent: Round[Pending], results: list[Any]) -> None:
        settled = PIPELINE.settle(sent, results)
        # one wake-up of the waiting callers for the whole round; each send's future is its Pending's
        self._futures.settle(zip(map(_future_of, settled.sends), settled.outcomes))
        for p, error in settled.oneway_failed:
            oneway_failed(p.request, error)
        for p in settled.retries:
            self._retry(p)

    def _retry(self, p: Pending) -> None:
        try:
            result = self._send_sync(p.request)
        except Exception as e:
            self._fail(p, e)
        else:
            if p.future is not None:
                _settle(p.future, result=result)

    @staticmethod
    def _fail(p: Pending, error: BaseException) -> None:
        if p.future is None:
            oneway_failed(p.request, error)
        else:
            _settle(p.future, error=error)


_future_of = attrgetter("future")


def _settle(future: Future[SendResult], *, result: SendResult | None = None, error: BaseException | None = None) -> None:
    """Complete ``future`` unless the caller cancelled it meanwhile."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        pass
