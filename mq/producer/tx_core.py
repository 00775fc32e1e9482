"""The transaction producer's logic, written once for the sync :class:`mq.TransactionProducer` and
the asyncio ``mq.aio.TransactionProducer`` (see :mod:`mq.producer.transaction` for the protocol).

A transaction is two operations around the local transaction, which the facade runs in its own
style (a plain call, or an awaited ``async def``): :meth:`TransactionCore.begin` checks the message
and stores the half message, :meth:`TransactionCore.finish` commits or rolls back and builds the
result. A check-back is :meth:`TransactionCore.checked_half` (the half message to ask the checker
about) then :meth:`TransactionCore.answer`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mq.errors import MQClientError, MQError, ReplicaAckTimeout
from mq.model.message import Message, MessageExt, SendStatus
from mq.model.msgid import new_msg_id
from mq.model.queue import MessageQueue
from mq.producer.core import SendCore
from mq.store import codec
from mq.store.ops import AsyncRunner, Op, SyncRunner, operation, share_client
from mq.store.store import StoreOps

log = logging.getLogger("mq.producer")

#: System property: the producer group of a half message [RocketMQ ``PGROUP``].
PGROUP = "PGROUP"
#: Default seconds before the first check-back when the broker has not published its own.
DEFAULT_TRANSACTION_TIMEOUT_S = 6.0
#: Milliseconds a producer blocks waiting for check-back requests.
CHECK_POLL_MS = 1000
#: Check-back requests read at a time.
CHECK_BATCH = 16


class LocalTransactionState(str, Enum):
    """The outcome of a local transaction [RocketMQ ``LocalTransactionState``]."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"  # alias: the same member as UNKNOW


@dataclass(frozen=True)
class TransactionSendResult:
    """What ``send_message_in_transaction`` returns [RocketMQ ``TransactionSendResult``].

    Attributes:
        status: SEND_OK once the half message is stored; FLUSH_SLAVE_TIMEOUT when ``sync_replicas``
            replicas did not confirm it in time (it is then rolled back and the executor does not run).
        msg_id: the message id.
        message_queue: the queue it is (or will be) in.
        queue_offset: its offset once committed by the producer, else -1.
        transaction_id: the half message's id (``topic:queue:half id``).
        local_transaction_state: what the executor answered (UNKNOW on an exception).
    """

    status: SendStatus
    msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str
    local_transaction_state: LocalTransactionState


@dataclass(frozen=True)
class HalfSent:
    """A stored half message waiting for its local transaction.

    Attributes:
        queue: its queue; msg_id: the message id; half_id: its id among the queue's half messages.
        confirmed: False when ``sync_replicas`` replicas did not confirm it (the local transaction
            must not run: it is rolled back).
    """

    queue: MessageQueue
    msg_id: str
    half_id: str
    confirmed: bool


@dataclass(frozen=True)
class CheckRequest:
    """One check-back request read from the group's stream."""

    topic: str
    queue_id: int
    half_id: str
    checks: str

    @classmethod
    def parse(cls, fields: dict[bytes, bytes]) -> CheckRequest:
        """The request an entry of the check stream carries (KeyError/ValueError when malformed)."""
        return cls(
            fields[b"topic"].decode(), int(fields[b"queue_id"]), fields[b"half_id"].decode(), fields.get(b"checks", b"0").decode()
        )


Executor = Callable[[Message, Any], Any]
Checker = Callable[[MessageExt], Any]


def transaction_id(topic: str, queue_id: int, half_id: str) -> str:
    """The transaction id of a half message (``topic:queue:half id``): what producers report and the
    RocketMQ 5 endpoint hands out."""
    return f"{topic}:{queue_id}:{half_id}"


def transaction_timeout_ms(store: StoreOps) -> Op[int]:
    """The broker's ``transaction_timeout_s`` (default :data:`DEFAULT_TRANSACTION_TIMEOUT_S`), ms: how
    long a half message waits before its first check-back."""
    raw = yield from StoreOps.namespace_setting.op(store, "transaction_timeout_s")
    return int(float(raw or DEFAULT_TRANSACTION_TIMEOUT_S) * 1000)


def check_callable(fn: object, what: str) -> None:
    """Raise MQClientError unless ``fn`` is callable; ``what`` names it with its signature,
    e.g. ``"checker(msg) -> LocalTransactionState"``."""
    if not callable(fn):
        raise MQClientError(f"{what.partition('(')[0]} must be a callable {what}")


def local_state(answer: object) -> LocalTransactionState:
    """What an executor or checker returned, as a state (ValueError for anything else)."""
    return LocalTransactionState(answer)


def unknown_after(error: BaseException) -> LocalTransactionState:
    """The state of a local transaction or check that raised: UNKNOW (check-back asks again), logged."""
    log.warning("local transaction raised (state UNKNOW, resolved by check-back): %r", error)
    return LocalTransactionState.UNKNOW


def run_local(fn: Callable[..., Any], *args: Any) -> LocalTransactionState:
    """Call a plain executor or checker; its answer as a state (UNKNOW when it raised or answered nonsense)."""
    try:
        return local_state(fn(*args))
    except Exception as e:  # an exception in the local transaction means "unknown": check back later
        return unknown_after(e)


class TransactionCore:
    """Half messages, their end and check-backs for one producer group (no I/O of its own).

    Args:
        core: the producer's :class:`SendCore` (routes, queue choice, clock, delay levels).
        group: the producer group.
    """

    def __init__(self, core: SendCore, group: str) -> None:
        self.core = core
        self.group = group
        self.store = core.store
        share_client(self, core.store)
        self.client_id = f"{group}@{new_msg_id()[:12]}"
        self._timeout_ms: int | None = None

    @operation
    def begin(self, msg: Message, check_immunity_time_s: float | None) -> Op[HalfSent]:
        """Check ``msg`` and store it as a half message (nothing is stored for bad input).

        Raises:
            MQClientError: a batch, a delayed message, an unknown topic, …
            MQBrokerError: the half message could not be stored.
        """
        if not isinstance(msg, Message):
            raise MQClientError(f"a transaction carries exactly one Message, got {type(msg).__name__}: batches are not allowed")
        if (yield from SendCore.due_ms.op(self.core, msg)) is not None:
            raise MQClientError("a transaction message cannot be delayed: send it without delay_level/deliver_time_ms")
        if msg.dedup_id is not None:  # its commit appends it later, outside any window (D140)
            raise MQClientError(f"a transaction message cannot carry a dedup_id ({msg.dedup_id!r}): send it without one")
        route = yield from self.core.routes.get(msg.topic)
        mq = self.core.select_default(route, None, msg.priority)  # a priority topic: a queue of its level (D142)
        msg_id = new_msg_id()
        encoded = codec.encode(msg, msg_id, system_properties={PGROUP: self.group})
        wait_s = check_immunity_time_s if check_immunity_time_s is not None else (yield from self._timeout_s())
        first_check_ms = (yield from SendCore.now_ms.op(self.core)) + int(wait_s * 1000)
        try:
            half_id = yield from StoreOps.put_half.op(self.store, msg.topic, mq.queue_id, encoded, first_check_ms)
        except ReplicaAckTimeout as e:
            # As RocketMQ: a half message not confirmed by the replicas is rolled back and the local
            # transaction does not run (the caller sees FLUSH_SLAVE_TIMEOUT and ROLLBACK_MESSAGE).
            return HalfSent(mq, msg_id, str(e.result), False)
        return HalfSent(mq, msg_id, half_id, True)

    @operation
    def finish(self, half: HalfSent, state: LocalTransactionState) -> Op[TransactionSendResult]:
        """Commit or roll back ``half`` as ``state`` says (UNKNOW leaves it for check-back); the result."""
        mq = half.queue
        offset = -1
        if not half.confirmed:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        if state is not LocalTransactionState.UNKNOW:
            commit = state is LocalTransactionState.COMMIT_MESSAGE
            try:
                changed, offset = yield from self._end(mq.topic, mq.queue_id, half.half_id, commit)
                if not changed or (commit and offset < 0):  # decided before us (a check-back), or discarded
                    state, offset = yield from self._outcome(mq.topic, mq.queue_id, half.msg_id, half.half_id, state)
            except ReplicaAckTimeout as e:  # done on the master; if a failover loses it, check-back asks again
                offset = e.result[1]
                log.warning("ending transaction %s: %s (check-back resolves it if a failover loses it)", half.half_id, e)
            except MQError as e:  # the half message stays: check-back resolves it
                log.warning("ending transaction %s failed, check-back will resolve it: %s", half.half_id, e)
        status = SendStatus.SEND_OK if half.confirmed else SendStatus.FLUSH_SLAVE_TIMEOUT
        return TransactionSendResult(status, half.msg_id, mq, offset, transaction_id(mq.topic, mq.queue_id, half.half_id), state)

    @operation
    def checked_half(self, request: CheckRequest) -> Op[MessageExt | None]:
        """The half message a check-back asks about (None: resolved meanwhile), with its check count."""
        msg = yield from StoreOps.read_half.op(self.store, request.topic, request.queue_id, request.half_id)
        if msg is not None:
            msg.system_properties["TRANSACTION_CHECK_TIMES"] = request.checks
        return msg

    @operation
    def answer(self, request: CheckRequest, state: LocalTransactionState) -> Op[None]:
        """End the half message of ``request`` as the checker said (UNKNOW: asked again next interval)."""
        if state is not LocalTransactionState.UNKNOW:
            yield from self._end(request.topic, request.queue_id, request.half_id, state is LocalTransactionState.COMMIT_MESSAGE)

    @staticmethod
    def check_failed(request: CheckRequest, error: MQError) -> None:
        """Log a check-back that could not be answered (it is asked again next interval)."""
        if isinstance(error, ReplicaAckTimeout):
            log.warning("check-back of %s: %s", request.half_id, error)
        else:
            log.warning("answering a check-back of %s failed (asked again next interval): %s", request.half_id, error)

    def _end(self, topic: str, queue_id: int, half_id: str, commit: bool) -> Op[tuple[bool, int]]:
        return (yield from StoreOps.end_transaction.op(self.store, topic, queue_id, half_id, commit))

    def _outcome(
        self, topic: str, queue_id: int, msg_id: str, half_id: str, local: LocalTransactionState
    ) -> Op[tuple[LocalTransactionState, int]]:
        """How a transaction the local end did not decide ended: committed (the message is in the log) or
        rolled back; ``(state, offset)``, with a warning when it differs from ``local``."""
        found = yield from StoreOps.find_ids.op(self.store, topic, [queue_id], msg_id)
        state = LocalTransactionState.COMMIT_MESSAGE if found else LocalTransactionState.ROLLBACK_MESSAGE
        if state is not local:
            log.warning(
                "transaction %s was already ended as %s (by a check-back) when the local transaction returned %s: reported as %s",
                half_id,
                state.value,
                local.value,
                state.value,
            )
        return state, found[0][1] if found else -1

    def _timeout_s(self) -> Op[float]:
        if self._timeout_ms is None:
            self._timeout_ms = yield from transaction_timeout_ms(self.store)
        return self._timeout_ms / 1000


class SyncTransactionCore(TransactionCore, SyncRunner):
    """:class:`TransactionCore` run at once."""


class AsyncTransactionCore(TransactionCore, AsyncRunner):
    """:class:`TransactionCore` awaited."""
