"""OpenTelemetry tracing (the optional extra ``rocketredis[otel]``).

When ``opentelemetry-api`` is installed, producers start a ``send`` span (kind PRODUCER) around each
send and carry its context in the message (W3C ``traceparent`` / ``tracestate`` properties); push
consumers start a ``process`` span (kind CONSUMER) around each listener call whose parent is the
sender's span (one message), or with a link to each message's sender (a batch). Attributes follow
OpenTelemetry's messaging semantic conventions for RocketMQ (``messaging.system = "rocketmq"``,
destination, consumer group, message id, keys, tag, message type). Without a configured tracer
provider the API's no-op tracer is used and nothing is recorded; without the package nothing here
runs. Metrics stay on Prometheus (:mod:`mq.observe.metrics`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

try:  # the extra is optional
    from opentelemetry import propagate, trace
    from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
    from opentelemetry.trace import Link, SpanKind
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    trace = None  # type: ignore[assignment]

from mq.model.message import Message, MessageExt

#: Property names that carry the trace context in a message (W3C Trace Context).
TRACE_PROPERTIES = ("traceparent", "tracestate")
#: The instrumentation's name, as tracers report it.
INSTRUMENTATION = "rocketredis"


#: ``trace.get_tracer_provider`` as the API defines it (a test may replace it; then it is asked).
_GET_TRACER_PROVIDER = trace.get_tracer_provider if trace is not None else None
#: ``os.environ``'s own mapping and the provider variable's key in it (CPython's ``os._Environ``):
#: looking a missing name up there is a dict lookup, where ``name in os.environ`` raises and catches
#: a ``KeyError``, once per send (D49). None where ``os.environ`` is something else.
_ENVIRON_DATA: Mapping[Any, Any] | None = getattr(os.environ, "_data", None)
_ENVIRON_KEY: Any = (
    os.environ.encodekey(OTEL_PYTHON_TRACER_PROVIDER)
    if trace is not None and _ENVIRON_DATA is not None and hasattr(os.environ, "encodekey")
    else None
)
if _ENVIRON_KEY is None:
    _ENVIRON_DATA = None


def enabled() -> bool:
    """Whether spans are recorded: the OpenTelemetry API is installed and a tracer provider was set
    (until then the API's proxy provider hands out no-op tracers: nothing is done per message).

    Exact at every call, and cheap while no provider is set (once per send): the API's provider is
    set at most once (``trace._TRACER_PROVIDER`` goes from None to set, never back), and while it is
    unset ``get_tracer_provider()`` returns its proxy unless ``OTEL_PYTHON_TRACER_PROVIDER`` names
    one in the environment — both are checked here without the API's environment lookup; anything
    else (a set provider, the variable, a replaced ``get_tracer_provider``) asks the API.
    """
    if trace is None:
        return False
    if trace._TRACER_PROVIDER is None and trace.get_tracer_provider is _GET_TRACER_PROVIDER and not _environ_names_provider():
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _environ_names_provider() -> bool:
    """Whether ``OTEL_PYTHON_TRACER_PROVIDER`` is in the environment now."""
    if _ENVIRON_DATA is not None:
        return _ENVIRON_KEY in _ENVIRON_DATA
    return OTEL_PYTHON_TRACER_PROVIDER in os.environ


def _message_type(msg: Message) -> str:
    if msg.delay_level or msg.deliver_time_ms is not None:
        return "delay"
    return "normal"


def _attributes(topic: str, msgs: Sequence[Message], operation: str, group: str, namespace: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "messaging.system": "rocketmq",
        "messaging.destination.name": topic,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.rocketmq.namespace": namespace,
        "messaging.rocketmq.client_group": group,
    }
    if operation == "process":
        attrs["messaging.consumer.group.name"] = group
    if len(msgs) == 1:
        m = msgs[0]
        if isinstance(m, MessageExt):
            attrs["messaging.message.id"] = m.msg_id
        if m.keys:
            attrs["messaging.rocketmq.message.keys"] = list(m.keys)
        if m.tags:
            attrs["messaging.rocketmq.message.tag"] = m.tags
        attrs["messaging.rocketmq.message.type"] = _message_type(m)
    else:
        attrs["messaging.batch.message_count"] = len(msgs)
    return attrs


class _NoSpan(contextlib.AbstractContextManager[dict[str, str]]):
    """:func:`send_span` while nothing is recorded: no span, no context to carry (a fresh empty dict)."""

    __slots__ = ()

    def __enter__(self) -> dict[str, str]:
        return {}

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


def send_span(
    group: str, namespace: str, msgs: Sequence[Message], *, message_type: str | None = None
) -> contextlib.AbstractContextManager[dict[str, str]]:
    """A ``send`` span around sending ``msgs`` (one topic); entering it gives the properties that
    carry its context (empty without OpenTelemetry). The span records an exception raised inside.
    Without a span to record this is one shared do-nothing context (it runs once per send)."""
    if not msgs or not enabled():
        return _NO_SPAN
    return _send_span(group, namespace, msgs, message_type)


@contextlib.contextmanager
def _send_span(group: str, namespace: str, msgs: Sequence[Message], message_type: str | None) -> Iterator[dict[str, str]]:
    attrs = _attributes(msgs[0].topic, msgs, "send", group, namespace)
    if message_type is not None:
        attrs["messaging.rocketmq.message.type"] = message_type
    tracer = trace.get_tracer(INSTRUMENTATION)
    with tracer.start_as_current_span(f"send {msgs[0].topic}", kind=SpanKind.PRODUCER, attributes=attrs):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield {k: v for k, v in carrier.items() if k in TRACE_PROPERTIES}


def set_message_id(msg_id: str) -> None:
    """Record the id of the message the current ``send`` span sent."""
    if enabled():
        trace.get_current_span().set_attribute("messaging.message.id", msg_id)


@contextlib.contextmanager
def process_span(group: str, namespace: str, msgs: Sequence[MessageExt]) -> Iterator[None]:
    """A ``process`` span around a listener call: child of the sender's span for one message, linked
    to every sender's span for a batch."""
    if not msgs or not enabled():
        yield
        return
    contexts = [propagate.extract(_carrier(m.properties)) for m in msgs]
    tracer = trace.get_tracer(INSTRUMENTATION)
    attrs = _attributes(msgs[0].topic, msgs, "process", group, namespace)
    if len(msgs) == 1:
        span = tracer.start_as_current_span(
            f"process {msgs[0].topic}", context=contexts[0], kind=SpanKind.CONSUMER, attributes=attrs
        )
    else:
        links = [Link(sc) for c in contexts if (sc := trace.get_current_span(c).get_span_context()).is_valid]
        span = tracer.start_as_current_span(f"process {msgs[0].topic}", kind=SpanKind.CONSUMER, attributes=attrs, links=links)
    with span:
        yield


def _carrier(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: properties[k] for k in TRACE_PROPERTIES if k in properties}
