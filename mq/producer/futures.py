"""``SendFuture``: the :class:`concurrent.futures.Future` ``send_async`` returns, made light.

A plain ``Future`` makes a ``Condition``, its ``RLock``, a ``deque`` and five bound methods for
itself: about ten objects the garbage collector tracks, per send. With thousands of sends in flight
they survive into the older generations and the collector's passes over them cost more than the send
(measured: 15–25 µs of CPU per message at 10 000 in flight, see D49). A :class:`SendFuture` shares
one condition with every other future of its producer (:class:`FutureGroup`), and a pipelined round
completes all of its futures under that condition with one wake-up of the waiting threads
(:meth:`FutureGroup.settle`).

It is still a ``concurrent.futures.Future`` for the caller: ``result``, ``exception``,
``add_done_callback``, ``cancel``, ``concurrent.futures.wait``/``as_completed`` and
``asyncio.wrap_future`` behave as documented. Because the condition is shared, a waiting thread may
be woken for another future: :meth:`SendFuture.result` and :meth:`SendFuture.exception` wait again
until their own future is done or their timeout (seconds) has passed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING, RUNNING
from typing import Any, TypeVar

T = TypeVar("T")

#: The states in which a future waits no more.
_DONE = frozenset((FINISHED, CANCELLED, CANCELLED_AND_NOTIFIED))


class FutureGroup:
    """The condition the futures of one producer share, and the completion of many at once."""

    def __init__(self) -> None:
        self.condition = threading.Condition()

    def new(self) -> SendFuture[Any]:
        """A pending future of this group."""
        return SendFuture(self.condition)

    def settle(self, outcomes: Iterable[tuple[Future[T], T | BaseException]]) -> None:
        """Complete each future with its result or exception, under one lock and with one wake-up
        of the waiting threads; a future its caller cancelled meanwhile is left as it is. Done
        callbacks then run in this thread, as ``Future.set_result`` runs them."""
        done: list[SendFuture[Any]] = []
        others: list[tuple[Future[T], T | BaseException]] = []
        with self.condition:
            for future, outcome in outcomes:
                if not isinstance(future, SendFuture) or future._condition is not self.condition:
                    others.append((future, outcome))  # not of this group: its own lock and wake-up
                    continue
                if future._state not in (PENDING, RUNNING):
                    continue
                waiters = future._waiters_list or ()
                if isinstance(outcome, BaseException):
                    future._exception = outcome
                    for waiter in waiters:
                        waiter.add_exception(future)
                else:
                    future._result = outcome
                    for waiter in waiters:
                        waiter.add_result(future)
                future._state = FINISHED
                done.append(future)
            if done:
                self.condition.notify_all()
        for future in done:
            if future._callbacks_list:
                future._invoke_callbacks()  # type: ignore[attr-defined]
        for future, outcome in others:
            with contextlib.suppress(InvalidStateError):  # cancelled by its caller meanwhile
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)


class SendFuture(Future[T]):
    """A ``Future`` on a shared condition (see the module docstring); make it with :meth:`FutureGroup.new`."""

    #: ``concurrent.futures.wait``'s waiters and the done callbacks, made on first use (most sends
    #: have neither: two lists less per send for the garbage collector).
    _waiters_list: list[Any] | None = None
    _callbacks_list: list[Any] | None = None

    def __init__(self, condition: threading.Condition) -> None:  # no super().__init__(): it makes a Condition
        # every attribute set here, as class defaults set later would give each future a dict of its own
        self._condition = condition
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]  # read-only: nothing assigns it
        if self._waiters_list is None:
            self._waiters_list = []
        return self._waiters_list

    @property
    def _done_callbacks(self) -> list[Any]:
        if self._callbacks_list is None:
            self._callbacks_list = []
        return self._callbacks_list

    def result(self, timeout: float | None = None) -> T:
        """The result, waiting at most ``timeout`` seconds (None: as long as it takes)."""
        if self._state == FINISHED and self._exception is None:
            # done and final (set under the condition before the state): no lock round trip
            return self._result  # type: ignore[no-any-return]
        self._wait(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The exception (None when it succeeded), waiting at most ``timeout`` seconds."""
        self._wait(timeout)
        return super().exception(0)

    def _wait(self, timeout: float | None) -> None:
        """Wait until this future is done or ``timeout`` seconds passed (wake-ups for the other
        futures of the group are waited through)."""
        if self._state in _DONE:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._state not in _DONE:
                if deadline is None:
                    self._condition.wait()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._condition.wait(left)
