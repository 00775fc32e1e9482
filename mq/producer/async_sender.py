"""The background sender behind ``send_async`` and ``send_oneway``.

Sends that wait at the same time go out in one pipeline (one round trip per node), and those bound
for the same queue in bounded put calls, so many concurrent async sends cost little more than one.
Where the store has a :class:`~mq.store.store.PutPipeline` (a plain Redis client, no replicas to wait
for), two rounds are in flight on its connection: the next round is written before the last one's
replies are read, so Redis runs one while the thread packs the next (D57).
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
from typing import Any

from mq.errors import MQBrokerError
from mq.message import SendResult
from mq.producer.core import MAX_PIPELINE, PutCall, oneway_failed, outcomes, plan_puts, puts_of, round_failed
from mq.producer.futures import FutureGroup
from mq.producer.request import SendRequest
from mq.queue import MessageQueue
from mq.store import Store
from mq.store.store import PutPipeline

log = logging.getLogger("mq.producer")

__all__ = ["MAX_PIPELINE", "AsyncSender"]


class AsyncSender:
    """A daemon thread draining pending sends into pipelines."""

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
        self._queue: queue.SimpleQueue[SendRequest | None] = queue.SimpleQueue()
        #: sends queued since the caller last let go of the GIL (see :meth:`submit`)
        self._submitted = 0
        self._thread = threading.Thread(target=self._run, name="mq-async-sender", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, request: SendRequest) -> None:
        """Queue a send. Every :data:`MAX_PIPELINE` sends the calling thread lets go of the GIL for a
        moment (``time.sleep(0)``): a caller queueing sends in a loop would otherwise keep it for the
        interpreter's whole switch interval (5 ms, ~700 sends) while the sender thread, back from
        writing or reading a round, waits for it — and Redis waits for the sender (D64)."""
        self._queue.put(request)
        self._submitted += 1
        if self._submitted >= MAX_PIPELINE:
            self._submitted = 0
            time.sleep(0)

    def stop(self) -> None:
        """Send everything queued so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        # Two rounds in flight on the pipeline's connection: round N+1 is written before round N's
        # replies are read, so Redis runs one round while this thread packs the next (or settles the last).
        pipeline: PutPipeline | None
        try:
            pipeline = self._store.put_pipeline()
        except Exception as e:  # the thread never dies: one pipeline at a time then
            log.error("async sender: no pipeline of its own (%r); sending one round at a time", e)
            pipeline = None
        inflight: _Round | None = None
        running = True
        while running:
            batch: list[SendRequest] = []
            try:
                item = self._queue.get(block=inflight is None)
            except queue.Empty:  # nothing more to send now: read the round in flight
                if inflight is not None:
                    self._finish_guarded(inflight)
                inflight = None
                continue
            while item is not None:
                batch.append(item)
                if len(batch) >= MAX_PIPELINE or self._queue.empty():
                    break
                item = self._queue.get()
            running = item is not None
            sent = self._start_guarded(batch, pipeline) if batch else None
            if inflight is not None:
                self._finish_guarded(inflight)
            inflight = sent
        if inflight is not None:
            self._finish_guarded(inflight)
        if pipeline is not None:
            try:
                pipeline.close()
            except Exception as e:
                log.warning("async sender: closing its pipeline connection failed: %r", e)

    def _start_guarded(self, batch: list[SendRequest], pipeline: PutPipeline | None) -> _Round | None:
        """Write one round (or send it whole without a pipeline); an unexpected error fails the round's
        unfinished sends and the thread goes on."""
        try:
            return self._start(batch, pipeline)
        except Exception as e:
            self._failed(batch, e)
            return None

    def _finish_guarded(self, sent: _Round) -> None:
        """Read and settle one round written before; errors as :meth:`_start_guarded`."""
        try:
            self._finish(sent)
        except Exception as e:
            self._failed(sent.batch, e)

    def _failed(self, batch: list[SendRequest], e: Exception) -> None:
        unfinished = [r for r in batch if not r.future.done()]
        round_failed(batch, unfinished, e)
        for r in unfinished:
            self._fail(r, e)

    def _start(self, batch: list[SendRequest], pipeline: PutPipeline | None) -> _Round | None:
        """Write ``batch``'s puts; the round to read later, or None when it is settled already."""
        chosen: list[tuple[SendRequest, MessageQueue]] = []
        for r in batch:
            if r.due_ms is not None:  # delayed: its own script call, through the sync path
                self._retry(r)
                continue
            try:
                chosen.append((r, self._select(r)))
            except Exception as e:  # a selector or route error belongs to that send only
                self._fail(r, e)
        calls = plan_puts(chosen)
        puts = puts_of(calls)
        if not puts:
            return None
        if pipeline is None:
            try:
                results: list[Any] = self._store.put_many(puts)
            except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
                results = [e] * len(puts)
            self._settle_round(calls, results)
            return None
        try:
            handle = pipeline.send(puts)  # the last step: a round written is always read
        except MQBrokerError as e:  # the connection failed: retried through the sync path
            self._settle_round(calls, [e] * len(puts))
            return None
        return _Round(batch, calls, pipeline, handle)

    def _finish(self, sent: _Round) -> None:
        results: list[Any]
        try:
            results = sent.pipeline.read(sent.handle)
        except MQBrokerError as e:  # the round was lost with the connection: retried through the sync path
            results = [e] * len(sent.calls)
        self._settle_round(sent.calls, results)

    def _settle_round(self, calls: list[PutCall], results: list[Any]) -> None:
        settled: list[tuple[Future[SendResult], SendResult | BaseException]] = []
        retries: list[SendRequest] = []
        for r, outcome in outcomes(calls, results):
            if outcome is None:
                retries.append(r)
            elif r.oneway:
                if isinstance(outcome, BaseException):
                    oneway_failed(r, outcome)
            else:
                settled.append((r.future, outcome))
        self._futures.settle(settled)  # one wake-up of the waiting callers for the whole round
        for r in retries:
            self._retry(r)

    def _retry(self, r: SendRequest) -> None:
        try:
            result = self._send_sync(r)
        except Exception as e:
            self._fail(r, e)
        else:
            self._resolve(r, result)

    @staticmethod
    def _resolve(r: SendRequest, result: SendResult) -> None:
        if not r.oneway:
            _settle(r.future, result=result)

    @staticmethod
    def _fail(r: SendRequest, error: BaseException) -> None:
        if r.oneway:
            oneway_failed(r, error)
        else:
            _settle(r.future, error=error)


def _settle(future: Future[SendResult], *, result: SendResult | None = None, error: BaseException | None = None) -> None:
    """Complete ``future`` unless the caller cancelled it meanwhile."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]
    except InvalidStateError:
        pass


class _Round:
    """A round written to the pipeline whose replies are not read yet."""

    __slots__ = ("batch", "calls", "handle", "pipeline")

    def __init__(self, batch: list[SendRequest], calls: list[PutCall], pipeline: PutPipeline, handle: Any) -> None:
        self.batch, self.calls, self.pipeline, self.handle = batch, calls, pipeline, handle
