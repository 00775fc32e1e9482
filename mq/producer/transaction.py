"""``TransactionProducer``: half messages, the local transaction, commit/rollback and check-back
[RocketMQ ``TransactionMQProducer``].

1. ``send_message_in_transaction`` stores a half message, invisible to consumers, in its target
   queue (``put-pending``), then runs the executor (the local transaction).
2. COMMIT makes it visible in that queue with a fresh offset; ROLLBACK discards it
   (``end-transaction``: atomic and idempotent). UNKNOW, an exception or a dead producer leaves it
   for check-back.
3. The broker service asks the group's producers about half messages older than the transaction
   timeout through the group's ``txcheck`` stream; any live member of the group answers (a
   consumer group on the stream hands each request to one member), by running ``checker`` and
   committing or rolling back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mq.connection import Connection
from mq.errors import MQClientError, MQError, ReplicaAckTimeout
from mq.message import Message, MessageExt, SendStatus
from mq.msgid import new_msg_id
from mq.producer.producer import DEFAULT_SEND_TIMEOUT_S, Producer
from mq.queue import MessageQueue
from mq.store import Store, codec

log = logging.getLogger("mq.producer")

#: System property: the producer group of a half message [RocketMQ ``PGROUP``].
PGROUP = "PGROUP"
#: Default seconds before the first check-back when the broker has not published its own.
DEFAULT_TRANSACTION_TIMEOUT_S = 6.0
#: Milliseconds a producer blocks waiting for check-back requests.
CHECK_POLL_MS = 1000


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


Executor = Callable[[Message, Any], LocalTransactionState]
Checker = Callable[[MessageExt], LocalTransactionState]


class TransactionProducer(Producer):
    """A producer that also sends transaction messages and answers check-backs for its group.

    Args:
        group: producer group; check-backs go to any live member of it.
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        checker: called with a half message whose transaction outcome is unknown; returns its state.
        namespace: key prefix of the deployment.
        **options: as :class:`Producer`.
    """

    def __init__(self, group: str, url: str | None = None, *, checker: Checker, namespace: str = "mq", **options: Any) -> None:
        if not callable(checker):
            raise MQClientError("checker must be a callable(msg) -> LocalTransactionState")
        super().__init__(group, url, namespace=namespace, **options)
        self.checker = checker
        self._client_id = f"{self.group}@{new_msg_id()[:12]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll = Connection(url, namespace, socket_timeout_s=CHECK_POLL_MS / 1000 + 5)
        self._poll_store = Store(self._poll)
        self._timeout_ms: int | None = None

    def start(self) -> TransactionProducer:
        """Start sending and answering check-backs. Returns self."""
        super().start()
        if self._thread is None:
            self._store.join_checks(self.group)
            self._thread = threading.Thread(target=self._answer_checks, name=f"mq-tx-check-{self.group}", daemon=True)
            self._thread.start()
        return self

    def __enter__(self) -> TransactionProducer:
        return self.start()

    def shutdown(self) -> None:
        """Stop answering check-backs and shut the producer down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CHECK_POLL_MS / 1000 + 2)
            self._thread = None
        self._poll.close()
        super().shutdown()

    def send_message_in_transaction(
        self,
        msg: Message,
        executor: Executor,
        arg: Any = None,
        *,
        check_immunity_time_s: float | None = None,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> TransactionSendResult:
        """Store ``msg`` as a half message, run ``executor(msg, arg)``, then commit or roll back.

        Args:
            check_immunity_time_s: no check-back before this many seconds [RocketMQ
                ``CHECK_IMMUNITY_TIME_IN_SECONDS``]; default: the broker's ``transaction_timeout_s``.

        Raises:
            MQClientError: bad input (a delayed message, an unknown topic, …), before anything is stored.
            MQBrokerError: the half message could not be stored (the executor did not run).
        """
        self._check_started()
        if not isinstance(msg, Message):
            raise MQClientError(f"a transaction carries exactly one Message, got {type(msg).__name__}: batches are not allowed")
        if not callable(executor):
            raise MQClientError("executor must be a callable(msg, arg) -> LocalTransactionState")
        if self._check(msg) is not None:
            raise MQClientError("a transaction message cannot be delayed: send it without delay_level/deliver_time_ms")
        route = self._routes.get(msg.topic)
        mq = self._select_default(route, None)
        msg_id = new_msg_id()
        encoded = codec.encode(msg, msg_id, system_properties={PGROUP: self.group})
        wait_ms = int((check_immunity_time_s if check_immunity_time_s is not None else self._timeout_s()) * 1000)
        status = SendStatus.SEND_OK
        try:
            half_id = self._store.put_half(msg.topic, mq.queue_id, encoded, self._clock.now_ms() + wait_ms)
        except ReplicaAckTimeout as e:
            # As RocketMQ: a half message not confirmed by the replicas is rolled back and the local
            # transaction does not run (the caller sees FLUSH_SLAVE_TIMEOUT and ROLLBACK_MESSAGE).
            half_id, status = str(e.result), SendStatus.FLUSH_SLAVE_TIMEOUT
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            state = self._run_local(executor, msg, arg)
        offset = -1
        if state is not LocalTransactionState.UNKNOW:
            commit = state is LocalTransactionState.COMMIT_MESSAGE
            try:
                changed, offset = self._store.end_transaction(msg.topic, mq.queue_id, half_id, commit)
                if not changed or (commit and offset < 0):  # decided before us (a check-back), or discarded
                    state, offset = self._outcome(msg.topic, mq.queue_id, msg_id, half_id, state)
            except ReplicaAckTimeout as e:  # done on the master; if a failover loses it, check-back asks again
                offset = e.result[1]
                log.warning("ending transaction %s: %s (check-back resolves it if a failover loses it)", half_id, e)
            except MQError as e:  # the half message stays: check-back resolves it
                log.warning("ending transaction %s failed, check-back will resolve it: %s", half_id, e)
        transaction_id = f"{mq.topic}:{mq.queue_id}:{half_id}"
        return TransactionSendResult(status, msg_id, mq, offset, transaction_id, state)

    def _outcome(
        self, topic: str, queue_id: int, msg_id: str, half_id: str, local: LocalTransactionState
    ) -> tuple[LocalTransactionState, int]:
        """How a transaction the local end did not decide ended: committed (the message is in the log) or
        rolled back; ``(state, offset)``, with a warning when it differs from ``local``."""
        found = self._store.find_ids(topic, [queue_id], msg_id)
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

    def _timeout_s(self) -> float:
        if self._timeout_ms is None:
            raw = self._store.namespace_setting("transaction_timeout_s")
            self._timeout_ms = int(float(raw or DEFAULT_TRANSACTION_TIMEOUT_S) * 1000)
        return self._timeout_ms / 1000

    @staticmethod
    def _run_local(fn: Callable[..., Any], *args: Any) -> LocalTransactionState:
        try:
            return LocalTransactionState(fn(*args))
        except Exception as e:  # an exception in the local transaction means "unknown": check back later
            log.warning("local transaction raised (state UNKNOW, resolved by check-back): %r", e)
            return LocalTransactionState.UNKNOW

    def _answer_checks(self) -> None:
        """The check-back thread: answers requests until stopped, surviving any error of a round."""
        while not self._stop.is_set():
            try:
                entries = self._poll_store.read_checks(self.group, self._client_id, 16, CHECK_POLL_MS)
            except MQError as e:
                log.debug("reading check-backs of %s failed: %s", self.group, e)
                self._stop.wait(1.0)
                continue
            except Exception:  # a bug must not end check-backs for good: log it and go on
                log.exception("the check-back thread of producer group %r failed; retrying in 1 s", self.group)
                self._stop.wait(1.0)
                continue
            for entry_id, fields in entries:
                try:
                    self._answer(fields)
                except Exception:  # a malformed request (written around the library) affects only itself
                    log.exception("check-back request %r of producer group %r could not be answered", entry_id, self.group)
                self._poll_store.ack_check(self.group, entry_id)

    def _answer(self, fields: dict[bytes, bytes]) -> None:
        topic, qid, half_id = fields[b"topic"].decode(), int(fields[b"queue_id"]), fields[b"half_id"].decode()
        try:
            msg = self._store.read_half(topic, qid, half_id)
            if msg is None:
                return  # resolved meanwhile
            msg.system_properties["TRANSACTION_CHECK_TIMES"] = fields.get(b"checks", b"0").decode()
            state = self._run_local(self.checker, msg)
            if state is not LocalTransactionState.UNKNOW:
                self._store.end_transaction(topic, qid, half_id, state is LocalTransactionState.COMMIT_MESSAGE)
        except ReplicaAckTimeout as e:
            log.warning("check-back of %s: %s", half_id, e)
        except MQError as e:
            log.warning("answering a check-back of %s failed (asked again next interval): %s", half_id, e)
