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

The logic is :mod:`mq.producer.tx_core`'s, shared with ``mq.aio.TransactionProducer``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from mq.errors import MQError
from mq.model.message import Message
from mq.producer.producer import DEFAULT_SEND_TIMEOUT_S, Producer
from mq.producer.tx_core import (
    CHECK_BATCH,
    CHECK_POLL_MS,
    DEFAULT_TRANSACTION_TIMEOUT_S,
    PGROUP,
    Checker,
    CheckRequest,
    Executor,
    LocalTransactionState,
    SyncTransactionCore,
    TransactionSendResult,
    check_callable,
    run_local,
)
from mq.store import Store
from mq.store.connection import Connection

log = logging.getLogger("mq.producer")

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_S",
    "PGROUP",
    "LocalTransactionState",
    "TransactionProducer",
    "TransactionSendResult",
]


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
        check_callable(checker, "checker(msg) -> LocalTransactionState")
        super().__init__(group, url, namespace=namespace, **options)
        self.checker = checker
        self._tx = SyncTransactionCore(self._core, self.group)
        self._client_id = self._tx.client_id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll = Connection(url, namespace, socket_timeout_s=CHECK_POLL_MS / 1000 + 5)
        self._poll_store = Store(self._poll)

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
        check_callable(executor, "executor(msg, arg) -> LocalTransactionState")
        half = self._tx.begin(msg, check_immunity_time_s)
        state = run_local(executor, msg, arg) if half.confirmed else LocalTransactionState.ROLLBACK_MESSAGE
        return self._tx.finish(half, state)

    def _answer_checks(self) -> None:
        """The check-back thread: answers requests until stopped, surviving any error of a round."""
        while not self._stop.is_set():
            try:
                entries = self._poll_store.read_checks(self.group, self._client_id, CHECK_BATCH, CHECK_POLL_MS)
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
                    self._answer(CheckRequest.parse(fields))
                except Exception:  # a malformed request (written around the library) affects only itself
                    log.exception("check-back request %r of producer group %r could not be answered", entry_id, self.group)
                self._poll_store.ack_check(self.group, entry_id)

    def _answer(self, request: CheckRequest) -> None:
        try:
            msg = self._tx.checked_half(request)
            if msg is not None:  # else resolved meanwhile
                self._tx.answer(request, run_local(self.checker, msg))
        except MQError as e:
            self._tx.check_failed(request, e)
