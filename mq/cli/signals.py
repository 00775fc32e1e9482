"""Stopping a long-running process on SIGTERM/SIGINT with no lock in the signal handler (D66).

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is — also
inside ``threading.Event.wait``, which holds the event's lock while it checks the flag and sets up
its wait. The obvious handler, ``signal.signal(SIGTERM, lambda *_: stop.set())`` with the main thread
in ``stop.wait(…)``, then and there waits in ``Event.set`` for the lock its own thread holds: forever.
Python's ``signal`` documentation warns against locks in handlers for this reason. The window is a
few bytecodes of each wait, so it is hit rarely: the example consumer of ``scripts/stack.py`` hung so
once on a loaded machine and was killed 8 s after its SIGTERM.

:class:`StopSignals` is the replacement: its handler records the signal and writes one byte to a pipe
(an attribute store and a system call: no lock), and :meth:`StopSignals.wait` waits for that pipe in
``select``. A signal that arrives while the main thread is in ``select`` interrupts it, the handler
runs, and ``select`` (retried, PEP 475) finds the byte at once; one that arrives elsewhere is seen at
the next check. ``wait`` wakes at least every ``WAKE_S`` to look at the flag, for a signal that the
kernel gave to another thread while the main thread blocked (its handler runs in the main thread
once that thread runs Python code again).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable
from types import FrameType, TracebackType

#: Longest time :meth:`StopSignals.wait` blocks before it looks at the flag again, seconds.
WAKE_S = 1.0


class StopSignals:
    """``signals`` (default SIGTERM and SIGINT) turned into a stop flag the main thread can wait for.

    Make it in the main thread (``signal.signal`` must be called there); :meth:`close` (or leaving
    the ``with`` block) puts the previous handlers back. Use it where a ``threading.Event`` set by a
    signal handler would be used::

        stop = StopSignals()
        while not stop.wait(0.1):
            ...  # periodic work
        consumer.shutdown()

    Attributes:
        received: the number of the first of ``signals`` received (None: none yet).
    """

    def __init__(self, signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.received: int | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous: dict[signal.Signals, object] = {}
        try:
            for s in signals:
                self._previous[s] = signal.signal(s, self._handle)
        except BaseException:
            self.close()
            raise

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        # Runs in the main thread at any bytecode: no lock, no allocation worth speaking of.
        if self.received is None:
            self.received = signum
        with contextlib.suppress(OSError):  # the pipe is full (a storm of signals) or closed: the flag is set
            os.write(self._write, b"\0")

    def is_set(self) -> bool:
        """Whether one of the signals was received."""
        return self.received is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until one of the signals is received or ``timeout`` seconds pass (None: no limit);
        returns :meth:`is_set`. Meant for the main thread; another thread may poll :meth:`is_set`."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while self.received is None:
            left = WAKE_S if deadline is None else min(WAKE_S, deadline - time.monotonic())
            if left <= 0:
                break
            try:
                select.select([self._read], [], [], left)
            except (OSError, ValueError):  # closed meanwhile
                break
        return self.received is not None

    def close(self) -> None:
        """Put the previous handlers back and close the pipe (idempotent)."""
        previous, self._previous = self._previous, {}
        for s, handler in previous.items():
            signal.signal(s, handler)  # type: ignore[arg-type]
        for fd in (self._read, self._write):
            if fd >= 0:
                os.close(fd)
        self._read = self._write = -1

    def __enter__(self) -> StopSignals:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
