"""Stopping on SIGTERM (mq/cli/signals.py, D66): the long-running programs stop whenever the signal comes.

A handler that sets a ``threading.Event`` the main thread waits on deadlocks when it runs inside
``Event.wait`` while that holds the event's lock (the example consumer of ``scripts/stack.py``, once,
on a loaded machine). tests/sigterm_storm.py makes the handler run at every line of the program's
stop wait, so such a program hangs every time instead of once in a while.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any

import pytest

from mq.cli.signals import StopSignals
from tests.servers import RedisServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
STORM = ROOT / "tests" / "sigterm_storm.py"
#: Seconds a program gets to stop: it stops within about one of them; more means it hangs.
STOP_BOUND_S = 60


def test_wait_times_out_without_a_signal() -> None:
    with StopSignals() as stop:
        assert stop.wait(0) is False
        assert stop.wait(0.05) is False
        assert not stop.is_set() and stop.received is None


def test_a_signal_ends_the_wait() -> None:
    with StopSignals() as stop:
        threading.Timer(0.1, os.kill, args=(os.getpid(), signal.SIGTERM)).start()
        assert stop.wait(STOP_BOUND_S) is True
        assert stop.received == signal.SIGTERM
        assert stop.wait() is True  # stays set


def test_the_handler_may_run_at_any_line_of_the_wait() -> None:
    sent = []

    def local(frame: FrameType, event: str, arg: object) -> Any:
        if event == "line":
            sent.append(frame.f_lineno)
            os.kill(os.getpid(), signal.SIGTERM)
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_name == "wait" else None

    with StopSignals() as stop:
        sys.settrace(calls)
        try:
            done = stop.wait(STOP_BOUND_S)
        finally:
            sys.settrace(None)
    assert done and sent


def test_close_puts_the_previous_handlers_back() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    stop = StopSignals()
    assert signal.getsignal(signal.SIGTERM) != before[0]
    stop.close()
    stop.close()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert stop.wait(0.01) is False


PROGRAMS = {
    # name: (the line that says it is up, the command after `python`, the line of a clean end)
    "consumer_app": ("assigned", ["examples/consumer_app.py", "--duration-s", "0", "--count", "0"], "consumer done:"),
    "producer_app": ("sent ", ["examples/producer_app.py", "--count", "0", "--rate", "20"], "producer done:"),
    "mq broker": ("BrokerService(", ["-m", "mq", "broker"], ""),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_program_stops_on_sigterm_whichever_line_it_arrives_at(name: str, redis_server: RedisServer, namespace: str) -> None:
    mark, command, last = PROGRAMS[name]
    if command[0] != "-m":
        command = [command[0], "--namespace", namespace, "--topic", "SignalTopic", *command[1:]]
    else:
        command = [*command, "--namespace", namespace]
    argv = [sys.executable, str(STORM), mark, "200", *command]
    env = {**os.environ, "MQ_URL": redis_server.url, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{name} did not stop within {STOP_BOUND_S} s of SIGTERM:\n{out[-3000:]}")
    assert proc.returncode == 0, out[-3000:]
    assert any(line.startswith(mark) for line in out.splitlines()), out[-3000:]  # the signals were sent
    assert out.splitlines()[-1].startswith(last), out[-3000:]
