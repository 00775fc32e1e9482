"""The background sender behind ``send_async`` and ``send_oneway``.

Sends that wait at the same time go out in one pipeline (one round trip per node), and those bound
for the same queue in bounded put calls, so many concurrent async sends cost little more than one.
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
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from mq.errors import MQBrokerError
from mq.message import SendResult
from mq.producer.core import MAX_PIPELINE, oneway_failed, outcomes, plan_puts, puts_of, round_failed
from mq.producer.futures import FutureGroup
from mq.producer.request import SendRequest
from mq.queue import MessageQueue
from mq.store import Store

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
        self._thread = threading.Thread(target=self._run, name="mq-async-sender", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, request: SendRequest) -> None:
        """Queue a send."""
        self._queue.put(request)

    def stop(self) -> None:
        """Send everything queued so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        running = True
        while running:
            batch: list[SendRequest] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= MAX_PIPELINE or self._queue.empty():
                    break
                item = self._queue.get()
            running = item is not None
            if batch:
                self._send_guarded(batch)

    def _send_guarded(self, batch: list[SendRequest]) -> None:
        """One round; an unexpected error fails the round's unfinished sends and the thread goes on."""
        try:
            self._send(batch)
        except Exception as e:
            unfinished = [r for r in batch if not r.future.done()]
            round_failed(batch, unfinished, e)
            for r in unfinished:
                self._fail(r, e)

    def _send(self, batch: list[SendRequest]) -> None:
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
        results: list[Any]
        try:
            results = self._store.put_many(puts) if puts else []
        except MQBrokerError as e:  # the whole pipeline failed (e.g. a lost connection)
            results = [e] * len(puts)
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
