"""``SendFuture`` (what ``send_async`` returns) on its producer's shared condition: still a
``concurrent.futures.Future`` in every documented way, and never confused by the other futures of
its group. And ``otel.enabled()``'s cheap check stays exact."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
import threading
import time

import pytest

from mq.producer.futures import FutureGroup, SendFuture

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def later(seconds: float, fn: object) -> threading.Thread:
    """Run ``fn()`` in a thread after ``seconds``."""

    def go() -> None:
        time.sleep(seconds)
        fn()  # type: ignore[operator]

    t = threading.Thread(target=go)
    t.start()
    return t


def test_a_send_future_is_a_concurrent_future_sharing_its_groups_condition() -> None:
    group = FutureGroup()
    a, b = group.new(), group.new()
    assert isinstance(a, concurrent.futures.Future) and isinstance(a, SendFuture)
    assert a._condition is b._condition is group.condition
    assert not a.done() and not a.running()
    group.settle([(a, "ra"), (b, ValueError("rb"))])
    assert a.done() and a.result() == "ra" and a.exception() is None
    with pytest.raises(ValueError, match="rb"):
        b.result()
    assert isinstance(b.exception(), ValueError)


def test_result_waits_through_wake_ups_for_the_other_futures_of_its_group() -> None:
    group = FutureGroup()
    mine, other = group.new(), group.new()
    t = later(0.05, lambda: group.settle([(other, "other")]))
    started = time.monotonic()
    with pytest.raises(concurrent.futures.TimeoutError):
        mine.result(timeout=0.3)  # woken by the other's completion, waits on to its own timeout
    assert time.monotonic() - started >= 0.29
    t.join()
    t = later(0.05, lambda: group.settle([(mine, "mine")]))
    assert mine.result(timeout=5) == "mine"
    t.join()
    with pytest.raises(concurrent.futures.TimeoutError):
        group.new().exception(timeout=0.05)


def test_a_cancelled_future_is_left_cancelled_and_callbacks_run_once_on_settle() -> None:
    group = FutureGroup()
    cancelled, kept = group.new(), group.new()
    calls: list[object] = []
    kept.add_done_callback(lambda f: calls.append(f.result()))
    assert cancelled.cancel()
    group.settle([(cancelled, "late"), (kept, "ok")])
    assert cancelled.cancelled()
    with pytest.raises(concurrent.futures.CancelledError):
        cancelled.result(timeout=1)
    assert calls == ["ok"]
    kept.add_done_callback(lambda f: calls.append("after"))  # a done future runs it at once
    assert calls == ["ok", "after"]
    group.settle([(kept, "again")])  # a finished future is not completed twice
    assert kept.result() == "ok"


def test_wait_as_completed_and_asyncio_see_a_settled_round() -> None:
    group = FutureGroup()
    futures = [group.new() for _ in range(3)]
    t = later(0.05, lambda: group.settle([(f, i) for i, f in enumerate(futures)]))
    done, pending = concurrent.futures.wait(futures, timeout=5)
    assert done == set(futures) and not pending
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures, timeout=5)) == [0, 1, 2]
    t.join()

    async def awaited() -> object:
        f = group.new()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, lambda: threading.Thread(target=group.settle, args=([(f, "async")],)).start())
        return await asyncio.wrap_future(f)

    assert asyncio.run(awaited()) == "async"


def test_settle_completes_a_plain_future_on_its_own_condition() -> None:
    group = FutureGroup()
    plain: concurrent.futures.Future[str] = concurrent.futures.Future()
    t = later(0.05, lambda: group.settle([(plain, "plain")]))
    assert plain.result(timeout=5) == "plain"
    t.join()
    cancelled: concurrent.futures.Future[str] = concurrent.futures.Future()
    cancelled.cancel()
    group.settle([(cancelled, "late")])  # no InvalidStateError
    assert cancelled.cancelled()


def test_otel_is_enabled_when_the_environment_names_a_provider_after_import() -> None:
    code = (
        "import os\nfrom mq.observe import otel\nassert not otel.enabled()\n"
        "os.environ['OTEL_PYTHON_TRACER_PROVIDER'] = 'sdk_tracer_provider'\nprint(otel.enabled())\n"
        "del os.environ['OTEL_PYTHON_TRACER_PROVIDER']\nprint(otel.enabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    env["PYTHONPATH"] = ROOT
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # the API loads the provider the variable names and keeps it, as it does for its own callers
    assert result.stdout.split() == ["True", "True"]
