"""``mq.aio.TransactionProducer``: :class:`mq.TransactionProducer` for asyncio programs — the same
half messages, commit/rollback and check-backs (:mod:`mq.producer.tx_core`, the code the sync one
runs); the local-transaction executor and the checker may be ``async def`` or plain functions, and
check-backs are read from the group's stream by a task, not a thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from mq.aio.producer import DEFAULT_SHUTDOWN_TIMEOUT_S, Producer
from mq.aio.tasks import cancel_and_wait
from mq.errors import MQError
from mq.model.message import Message
from mq.producer.core import DEFAULT_SEND_TIMEOUT_S
from mq.producer.tx_core import (
    CHECK_BATCH,
    CHECK_POLL_MS,
    AsyncTransactionCore,
    Checker,
    CheckRequest,
    Executor,
    LocalTransactionState,
    TransactionSendResult,
    check_callable,
    local_state,
    unknown_after,
)
from mq.store.aio import AsyncStore
from mq.store.connection import Connection

log = logging.getLogger("mq.producer")

__all__ = ["TransactionProducer"]


async def _state_of(fn: Callable[..., Any], *args: Any) -> LocalTransactionState:
    """Call a plain or ``async def`` executor/checker; its answer as a state (UNKNOW when it raised)."""
    try:
        answer = fn(*args)
        if inspect.isawaitable(answer):
            answer = await answer
        return local_state(answer)
    except Exception as e:  # an exception in the local transaction means "unknown": check back later
        return unknown_after(e)


class TransactionProducer(Producer):
    """An asyncio producer that also sends transaction messages and answers check-backs for its group.

    The arguments are :class:`mq.TransactionProducer`'s; ``checker`` (and each executor) may be
    ``async def`` or a plain function (a plain one runs on the loop: it must not block). Check-backs
    go to any live member of the group, sync or asyncio.
    """

    def __init__(self, group: str, url: str | None = None, *, checker: Checker, namespace: str = "mq", **options: Any) -> None:
        check_callable(checker, "checker(msg) -> LocalTransactionState")
        super().__init__(group, url, namespace=namespace, **options)
        self.checker = checker
        self._tx = AsyncTransactionCore(self._core, self.group)
        self._poll = Connection(url, namespace, socket_timeout_s=CHECK_POLL_MS / 1000 + 5)
        self._poll_store = AsyncStore(self._poll)
        self._checks: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> TransactionProducer:
        """Start sending and answering check-backs. Returns self."""
        await super().start()
        if self._checks is None:
            try:
                await self._store.join_checks(self.group)
            except BaseException:  # ``async with`` does not exit what did not enter
                await self.shutdown()
                raise
            self._checks = asyncio.get_running_loop().create_task(self._answer_checks(), name=f"mq-tx-check-{self.group}")
        return self

    async def __aenter__(self) -> TransactionProducer:
        return await self.start()

    async def shutdown(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> None:
        """Stop answering check-backs (the task ends after its current read, a second at most; a request
        cut short is asked again next interval) and shut the producer down."""
        self._stopping = True
        task, self._checks = self._checks, None
        if task is not None:
            done, _ = await asyncio.wait([task], timeout=CHECK_POLL_MS / 1000 + 2)
            if not done:
                await cancel_and_wait([task])
        await self._poll.aclose()
        await super().shutdown(timeout_s)

    async def send_message_in_transaction(
        self,
        msg: Message,
        executor: Executor,
        arg: Any = None,
        *,
        check_immunity_time_s: float | None = None,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> TransactionSendResult:
        """Store ``msg`` as a half message, run ``executor(msg, arg)`` (``async def`` or plain), then
        commit or roll back — as :meth:`mq.TransactionProducer.send_message_in_transaction`.

        Cancelled while the executor runs, the half message stays and check-back resolves it.

        Raises:
            MQClientError: bad input (a delayed message, an unknown topic, …), before anything is stored.
            MQBrokerError: the half message could not be stored (the executor did not run).
        """
        self._started()
        check_callable(executor, "executor(msg, arg) -> LocalTransactionState")
        half = await self._tx.begin(msg, check_immunity_time_s)
        state = await _state_of(executor, msg, arg) if half.confirmed else LocalTransactionState.ROLLBACK_MESSAGE
        return await self._tx.finish(half, state)

    async def _answer_checks(self) -> None:
        """The check-back task: answers requests until stopped, surviving any error of a round."""
        while not self._stopping:
            try:
                entries = await self._poll_store.read_checks(self.group, self._tx.client_id, CHECK_BATCH, CHECK_POLL_MS)
            except MQError as e:
                log.debug("reading check-backs of %s failed: %s", self.group, e)
                await asyncio.sleep(1.0)
                continue
            except Exception:  # a bug must not end check-backs for good: log it and go on
                log.exception("the check-back task of producer group %r failed; retrying in 1 s", self.group)
                await asyncio.sleep(1.0)
                continue
            for entry_id, fields in entries:
                try:
                    await self._answer(CheckRequest.parse(fields))
                except Exception:  # a malformed request (written around the library) affects only itself
                    log.exception("check-back request %r of producer group %r could not be answered", entry_id, self.group)
                await self._poll_store.ack_check(self.group, entry_id)

    async def _answer(self, request: CheckRequest) -> None:
        try:
            msg = await self._tx.checked_half(request)
            if msg is not None:  # else resolved meanwhile
                await self._tx.answer(request, await _state_of(self.checker, msg))
        except MQError as e:
            self._tx.check_failed(request, e)
