"""``mq.aio.Producer``: the sync :class:`mq.Producer` for asyncio programs — ``await send()``,
``await send_batch()``, ``await send_oneway()`` — on ``redis.asyncio``, with no thread.

Checking, encoding, delay levels, routes, the queue choice (explicit queue, selector, round-robin
with latency fault tolerance), retries and results are :mod:`mq.producer.core`'s, the very code the
sync producer runs. Concurrent ``await send()`` calls share pipelines (:mod:`mq.aio.sender`), as
``send_async`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from mq.aio.futures import AioSendFuture
from mq.aio.sender import PipelineSender
from mq.aio.trace import AsyncTracer
from mq.errors import MQClientError, MQError
from mq.model.message import Message, SendResult
from mq.model.msgid import new_client_id
from mq.model.queue import MessageQueue
from mq.observe import otel
from mq.producer.core import (
    DEFAULT_SEND_TIMEOUT_S,
    NOT_STARTED,
    AsyncSendCore,
    Carried,
    Prepared,
    ProducerSettings,
    Where,
    oneway_failed,
    trace_stored,
)
from mq.producer.request import Selector
from mq.store.aio import AsyncStore

#: Seconds :meth:`Producer.shutdown` waits for pending sends by default.
DEFAULT_SHUTDOWN_TIMEOUT_S = 10.0


class Producer(ProducerSettings):
    """Sends messages to topics from asyncio code; the arguments are :class:`mq.Producer`'s.

    Use ``async with Producer(...) as producer``, or ``await start()`` and ``await shutdown()``.
    Sends are traced (message trace with ``trace=True``, OpenTelemetry spans) as the sync producer's.
    """

    def _open(self) -> None:
        self._store = AsyncStore(self._conn, sync=self.sync)
        self._core = AsyncSendCore(self._store, **self._core_options())
        self._fault = self._core.fault
        self._sender: PipelineSender | None = None
        self._route_lock = asyncio.Lock()
        self._tracer = AsyncTracer(self._store, self.group, new_client_id(), self.trace)

    def __repr__(self) -> str:
        return f"aio.Producer(group={self.group!r}, {self._conn!r}, started={self._sender is not None})"

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> Producer:
        """Start the producer (idempotent; on the running loop). Returns self."""
        if self._sender is None:
            await self._store.check_writes()  # a server that cannot confirm as asked is refused before any write
            self._sender = PipelineSender(self._store, self._core, self._send)
            self._sender.start()
        return self

    async def shutdown(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> None:
        """Send what is pending (``timeout_s`` at most, seconds; later ones fail), write the trace, close
        the connections."""
        if self._sender is not None:
            sender, self._sender = self._sender, None
            await sender.stop(timeout_s)
        await self._tracer.close()
        await self._conn.aclose()

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    # -- sending --------------------------------------------------------------------------------

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> AioSendFuture:
        """Send ``msg``; ``await`` what this returns to wait until the store accepted it and get the
        :class:`SendResult`, as :meth:`mq.Producer.send` (same arguments and errors, raised by the
        ``await``; a selector is a plain function: it must not block). Sends awaited at the same time
        share a pipeline.

        Returns an :class:`~mq.aio.futures.AioSendFuture`: an asyncio future that is also a coroutine object,
        so ``await producer.send(m)``, ``asyncio.gather(*sends)``, ``asyncio.wait``,
        ``asyncio.create_task`` and ``TaskGroup.create_task`` all take it — and ``gather`` makes no task
        a send (D59). The send is under way as soon as this returns.

        Cancelling the future or the task awaiting it before the send was handed to the pipeline (its
        round took it) withdraws it; after that the message is stored whole or not at all.

        Raises:
            MQClientError: the producer is not started or is shutting down (at once, not by the ``await``).
        """
        sender = self._started()
        if otel.enabled() or self._tracer.may_be_active():  # a span or the trace: a coroutine of its own
            return sender.chain(self._send(msg, queue, selector, arg, timeout_s))
        return sender.submit_message(msg, queue, selector, arg, timeout_s)  # its round prepares it

    async def _send(
        self, msg: Message, queue: MessageQueue | None, selector: Selector | None, arg: Any, timeout_s: float
    ) -> SendResult:
        """A send with a span or the trace to record, or one its round could not prepare (a delay level,
        a route not cached yet): prepared here, then sent in a round (delayed ones by their own call)."""
        sender = self._started()
        with otel.send_span(self.group, self._conn.namespace, [msg]) as carried:
            prepared = self._core.prepare_at_once(msg, (queue, selector, arg), timeout_s, False, carried)
            if prepared is None:  # a delay level, or a route not cached yet
                prepared = await self._prepare(msg, (queue, selector, arg), timeout_s, False, carried)
            request, pipelined = prepared
            began = time.monotonic()
            if pipelined is None:  # delayed: its own script call
                result = await self._core.send(request)
            else:
                future = sender.submit(request, pipelined)
                assert future is not None  # not oneway
                result = await future
            otel.set_message_id(result.msg_id)
        if result.queue_offset >= 0 and self._tracer.may_be_active():
            await self._trace_stored(request.topic, request.msg_ids, result, began)
        return result

    async def send_oneway(
        self, msg: Message, *, queue: MessageQueue | None = None, selector: Selector | None = None, arg: Any = None
    ) -> None:
        """Hand ``msg`` over without waiting for it to be stored and without retry (failures are only
        logged); bad input and unknown topics raise here."""
        sender = self._started()
        with otel.send_span(self.group, self._conn.namespace, [msg]) as carried:
            timeout_s = DEFAULT_SEND_TIMEOUT_S
            prepared = self._core.prepare_at_once(msg, (queue, selector, arg), timeout_s, True, carried)
            if prepared is None:
                prepared = await self._prepare(msg, (queue, selector, arg), timeout_s, True, carried)
            request, pipelined = prepared
            if pipelined is not None:
                sender.submit(request, pipelined)
                return
            try:
                await self._core.send(request)
            except Exception as e:  # oneway: logged, never raised
                oneway_failed(request, e)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_s: float = DEFAULT_SEND_TIMEOUT_S
    ) -> SendResult:
        """Send messages of one topic to one queue atomically, with consecutive offsets (as
        :meth:`mq.Producer.send_batch`).

        Raises:
            MQClientError: mixed topics, delayed messages, or a batch over ``max_message_size``.
        """
        self._started()
        with otel.send_span(self.group, self._conn.namespace, list(msgs)) as carried:
            request = self._core.batch_request(msgs, queue, timeout_s, carried)
            began = time.monotonic()
            result = await self._core.send(request)
        await self._trace_stored(request.topic, request.msg_ids, result, began)
        return result

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (what selectors choose from)."""
        return list((await self._core.route(topic)).queues)

    async def recall(self, handle: str) -> bool:
        """Remove a delayed or timer message before it is due: :meth:`mq.Producer.recall`, awaited."""
        self._started()
        return await self._store.recall(handle)

    # -- internals ------------------------------------------------------------------------------

    def _started(self) -> PipelineSender:
        if self._sender is None:
            raise MQClientError(NOT_STARTED)
        return self._sender

    async def _prepare(self, msg: Message, where: Where, timeout_s: float, oneway: bool, carried: Carried) -> Prepared:
        """:meth:`SendCore.prepare` for a send :meth:`SendCore.prepare_at_once` could not prepare (a
        delay level, or a route not cached yet), reading a missing route first (:meth:`_load_route`)."""
        await self._load_route(msg.topic)
        queue, selector, arg = where
        return await self._core.prepare(msg, queue, selector, arg, timeout_s, oneway=oneway, carried=carried)

    async def _load_route(self, topic: str) -> None:
        """Read a route not cached yet once for all concurrent first sends (one at a time: many first
        commands at once on a fresh ``redis.asyncio`` cluster client race in redis-py)."""
        if self._core.routes.cached(topic) is None:
            async with self._route_lock:
                if self._core.routes.cached(topic) is None:
                    with contextlib.suppress(MQError):  # the send reports it
                        await self._core.route(topic)

    async def _trace_stored(self, topic: str, msg_ids: Sequence[str], result: SendResult, began: float) -> None:
        """Record a stored send of ``msg_ids`` to ``topic`` that began at ``began`` (monotonic s)."""
        if result.queue_offset >= 0 and await self._tracer.is_active():
            trace_stored(self._tracer, topic, msg_ids, result, began, await self._tracer.now_ms())
