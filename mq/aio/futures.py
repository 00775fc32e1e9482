"""``AioSendFuture``: what ``mq.aio.Producer.send`` returns — an asyncio future that is also a
coroutine object (D59) — and how a send run in a task of its own completes it.

Named apart from :class:`mq.producer.futures.SendFuture` (what the sync ``send_async`` returns, a
``concurrent.futures.Future``): two classes of one name were two different things (D114).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mq.errors import MQClientError
from mq.model.message import Message, SendResult
from mq.model.queue import MessageQueue
from mq.producer.request import Selector, SendRequest

#: What a send still under way when the producer's shutdown ended it fails with.
SHUT_DOWN_MID_SEND = (
    "the producer shut down before this send completed (it may have been stored): send it again with a started "
    "producer if it must go out (a consumer sees a duplicate at worst), or shut down with a longer timeout_s"
)


class AioSendFuture(asyncio.Future[SendResult]):
    """What :meth:`mq.aio.Producer.send` returns: the future of one send — awaiting it gives the
    :class:`SendResult` or raises the send's error — that is also a coroutine object.

    A future, so ``asyncio.gather``, ``asyncio.wait`` and ``asyncio.ensure_future`` take it as it is:
    concurrent sends make no task and no coroutine each (D59). A coroutine too (``send``/``throw``/
    ``close``, delegated to the future's own iterator, which keeps no state), so ``asyncio.create_task``,
    ``TaskGroup.create_task`` and ``asyncio.run`` accept it as they accept what an ``async def`` returns.

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


class UnpreparedSend(AioSendFuture):
    """The future of a send its round prepares (checks, encodes, chooses its queue) rather than its
    caller (:meth:`mq.aio.sender.PipelineSender.submit_message`, D59), carrying that send until then:
    the message, where it goes (its explicit ``queue``, or ``selector`` and ``arg``; all None:
    round-robin) and its time budget in seconds (``timeout_s``).

    Its round prepares it in place (``request``, ``target``) and sends it as it is; what it carries is
    dropped as soon as it is used (the message when the round prepares it, the request when it is
    settled: a caller keeping its futures keeps no message). The send's fields live on its future
    rather than in an object of their own: a pending send is then no object more
    than its future for the garbage collector, whose passes over thousands of sends in flight cost
    more than the sends (D64, D114)."""

    __slots__ = ("arg", "msg", "queue", "request", "selector", "target", "timeout_s")

    msg: Message
    queue: MessageQueue | None
    selector: Selector | None
    arg: Any
    timeout_s: float
    #: once its round prepared it (a :class:`mq.producer.pipeline.Ready`): what to store, and where
    request: SendRequest
    target: MessageQueue


def settle_from(future: AioSendFuture, task: asyncio.Task[SendResult]) -> None:
    """Complete ``future`` as ``task`` ended (its exception retrieved even when its caller gave up).

    A task cancelled while its future is still pending was not cancelled by the future's caller
    (that cancels the future first, see :func:`_cancel_task`) but by :meth:`mq.aio.sender.PipelineSender.stop`: the
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


def cancel_task(task: asyncio.Task[SendResult], future: AioSendFuture) -> None:
    if future.cancelled():
        task.cancel()
