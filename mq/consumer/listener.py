"""Calling a listener: consume hooks around it, its time measured, and any failure — an exception,
even ``SystemExit`` or ``KeyboardInterrupt``, or an answer that is not a status — turned into the
"try later" status, logged, never a lost message or a dead worker thread.

The handling is written once, as a generator (:func:`_calling`) that yields the listener call and is
given its answer; :func:`invoke` calls it in the caller's thread, :func:`ainvoke` awaits it when the
listener is a coroutine function (the asyncio push consumer)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from mq.consumer.types import ConsumeHook, ConsumeMessageContext
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.observe import metrics, otel

log = logging.getLogger("mq.consumer")

S = TypeVar("S")

#: The listener call a :func:`_calling` generator yields: run it (and await what it returns, if anything).
Call = Callable[[], Any]


def invoke(
    group: str,
    hooks: Sequence[ConsumeHook],
    listener: Callable[..., Any],
    mq: MessageQueue,
    msgs: list[MessageExt],
    ctx: Any,
    failure: S,
    *,
    namespace: str = "",
    spans: bool | None = None,
) -> S:
    """``listener(msgs, ctx)`` between the hooks (in an OpenTelemetry ``process`` span when tracing is
    on: ``spans``, or ``otel.enabled()`` when None — a caller making many calls asks once); returns its
    status, or ``failure`` when it failed.

    Without hooks, metrics or spans (the common case) the listener is called straight away: no
    generator, closure or hook context per call."""
    if _direct(hooks, spans):
        try:
            return _status_of(listener(msgs, ctx), failure)
        except BaseException as e:  # as in _hooked: a listener's failure means "later", never a lost message
            return _failed(group, mq, msgs, failure, e)
    calling = _calling(group, hooks, listener, mq, msgs, ctx, failure, namespace, spans)
    call = next(calling)
    try:
        answer = call()
    except BaseException as e:
        return _finish(calling, error=e)
    return _finish(calling, answer=answer)


async def ainvoke(
    group: str,
    hooks: Sequence[ConsumeHook],
    listener: Callable[..., Any],
    mq: MessageQueue,
    msgs: list[MessageExt],
    ctx: Any,
    failure: S,
    *,
    namespace: str = "",
    spans: bool | None = None,
    blocked: Callable[[float], None] | None = None,
) -> S:
    """:func:`invoke` for the asyncio consumer: an ``async def`` listener is awaited, a plain one called
    in place. Without hooks, metrics or spans the listener is called straight away, as by :func:`invoke`.

    Cancelling the calling task (the consumer's shutdown after its grace period) cancels the listener
    and is not a failure: it propagates (the messages stay uncommitted and are delivered again). A
    ``CancelledError`` the listener raises while its task is *not* being cancelled is its own (it
    awaited a future something else cancelled): a failure like any other exception, so its messages
    are tried again instead of being left in flight (:func:`cancelled_here`, D98).

    ``blocked(seconds)``, when given, is told how long a plain (not ``async``) listener's call held the
    event loop."""
    if _direct(hooks, spans):
        try:
            began = time.perf_counter()
            answer = listener(msgs, ctx)
            if inspect.isawaitable(answer):
                answer = await answer
            elif blocked is not None:
                blocked(time.perf_counter() - began)
            return _status_of(answer, failure)
        except asyncio.CancelledError as e:
            if cancelled_here():
                raise
            return _failed(group, mq, msgs, failure, e)
        except BaseException as e:  # as in _hooked: a listener's failure means "later", never a lost message
            return _failed(group, mq, msgs, failure, e)
    calling = _calling(group, hooks, listener, mq, msgs, ctx, failure, namespace, spans)
    call = next(calling)
    try:
        began = time.perf_counter()
        answer = call()
        if inspect.isawaitable(answer):
            answer = await answer
        elif blocked is not None:
            blocked(time.perf_counter() - began)
    except asyncio.CancelledError as e:
        if cancelled_here():
            calling.close()
            raise
        return _finish(calling, error=e)
    except BaseException as e:
        return _finish(calling, error=e)
    return _finish(calling, answer=answer)


def cancelled_here() -> bool:
    """Whether the running task is being cancelled (``Task.cancelling()``): a ``CancelledError`` seen
    now is the task's own cancellation, to propagate; otherwise it came out of an awaited future that
    something else cancelled, and is an ordinary failure of the code that awaited it."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _finish(calling: Generator[Call, Any, S], *, answer: Any = None, error: BaseException | None = None) -> S:
    try:
        if error is not None:
            calling.throw(error)
        else:
            calling.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise RuntimeError("a listener call yielded twice")  # pragma: no cover - _calling yields once


def _calling(
    group: str,
    hooks: Sequence[ConsumeHook],
    listener: Callable[..., Any],
    mq: MessageQueue,
    msgs: list[MessageExt],
    ctx: Any,
    failure: S,
    namespace: str,
    spans: bool | None,
) -> Generator[Call, Any, S]:
    """Yields the listener call once, is given its answer (or has its exception thrown in), returns the status."""
    traced = otel.enabled() if spans is None else spans
    span = otel.process_span(group, namespace, msgs) if traced else contextlib.nullcontext()
    with span:
        return (yield from _hooked(group, hooks, listener, mq, msgs, ctx, failure))


def _hooked(
    group: str,
    hooks: Sequence[ConsumeHook],
    listener: Callable[..., Any],
    mq: MessageQueue,
    msgs: list[MessageExt],
    ctx: Any,
    failure: S,
) -> Generator[Call, Any, S]:
    if _unhooked(hooks):  # the common case, without the hooks' bookkeeping
        try:
            return _status_of((yield lambda: listener(msgs, ctx)), failure)
        except GeneratorExit:
            raise
        except BaseException as e:  # same handling as below, through the full path
            return _failed(group, mq, msgs, failure, e)
    hook_ctx = ConsumeMessageContext(group, mq, msgs)
    run_hooks(hooks, "before", hook_ctx)
    started = time.perf_counter()
    status: Any = failure
    try:
        status = type(failure)((yield lambda: listener(msgs, ctx)))  # type: ignore[call-arg]
    except GeneratorExit:
        raise
    except BaseException as e:  # a listener's failure means "later", never a lost message
        hook_ctx.error = e
        status = _failed(group, mq, msgs, failure, e)
    hook_ctx.duration_ms = (time.perf_counter() - started) * 1000
    if metrics.CLIENT_METRICS is not None:
        metrics.CLIENT_METRICS.consume_latency.labels(group, mq.topic).observe(hook_ctx.duration_ms / 1000)
    hook_ctx.status = getattr(status, "value", str(status))
    hook_ctx.success = status != failure
    run_hooks(hooks, "after", hook_ctx)
    return status  # type: ignore[no-any-return]


def _unhooked(hooks: Sequence[ConsumeHook]) -> bool:
    """Whether a listener call needs no hook or metrics bookkeeping."""
    return not hooks and metrics.CLIENT_METRICS is None


def _direct(hooks: Sequence[ConsumeHook], spans: bool | None) -> bool:
    """Whether a listener call is made straight away: no hooks, metrics or spans (``spans`` None:
    ask OpenTelemetry)."""
    return _unhooked(hooks) and not (otel.enabled() if spans is None else spans)


def _status_of(answer: Any, failure: S) -> S:
    """A listener's answer as a status of ``failure``'s type.

    Raises:
        ValueError: the answer is not such a status.
    """
    if type(answer) is type(failure):  # already a status: nothing to convert
        return answer
    return type(failure)(answer)  # type: ignore[call-arg]


def _failed(group: str, mq: MessageQueue, msgs: list[MessageExt], failure: S, e: BaseException) -> S:
    """Log a failed listener call (a ValueError: its answer was no status); returns ``failure``."""
    if isinstance(e, ValueError):
        log.error(
            "listener of %s returned something that is not a %s on %d message(s) from %s (%s): they are consumed again later",
            group,
            type(failure).__name__,
            len(msgs),
            mq,
            e,
        )
    else:
        level = logging.WARNING if isinstance(e, Exception) else logging.ERROR
        log.log(
            level, "listener of %s raised on %d message(s) from %s: %r; they are consumed again later", group, len(msgs), mq, e
        )
    return failure


def run_hooks(hooks: Sequence[ConsumeHook], phase: str, ctx: ConsumeMessageContext) -> None:
    """Run every hook's ``phase``; a hook's error is logged and changes nothing."""
    for hook in hooks:
        try:
            getattr(hook, phase)(ctx)
        except Exception as e:
            log.warning("consume hook %r.%s raised: %r", hook, phase, e)
