"""Message trace and OpenTelemetry spans, through a real redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
from mq.cli import main
from mq.observe.trace import FLUSH_INTERVAL_S
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned
from tests.procs import ROOT, wait_for
from tests.servers import RedisServer


def _consumer(url: str, ns: str, group: str, listener, **kw):  # type: ignore[no-untyped-def]
    c = PushConsumer(group, url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **kw)
    c.subscribe("TR")
    c.register_message_listener(listener)
    return c


def test_trace_shows_the_send_both_groups_and_the_retry(backend_url: str, namespace: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from scheduler import BrokerConfig, BrokerService

    url = backend_url
    admin = owned(Admin(url, namespace))
    admin.create_topic("TR", read_queues=2, write_queues=2)
    admin.set_trace(True)  # the namespace switch: every client below follows it
    with Producer("tp", url, namespace=namespace) as producer:
        sent = producer.send(Message("TR", b"order", keys=["k1"]))
    seen: dict[str, list[int]] = {"ga": [], "gb": []}
    lock = threading.Lock()

    def listener_of(group: str, fail_first: bool):  # type: ignore[no-untyped-def]
        def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            with lock:
                seen[group] += [m.reconsume_times for m in msgs]
                if fail_first and len(seen[group]) == 1:
                    ctx.delay_level_when_next_consume = 1  # 1 s
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    broker = BrokerService(url, namespace, BrokerConfig(timer_poll_ms=20))
    with (
        broker,
        _consumer(url, namespace, "ga", listener_of("ga", True)),
        _consumer(url, namespace, "gb", listener_of("gb", False)),
    ):
        wait_for(lambda: seen["ga"] == [0, 1] and seen["gb"] == [0], 20, "ga retried once, gb consumed once")
        wait_for(lambda: len(admin.message_trace("TR", sent.msg_id)) >= 5, 10, "the five trace events written")
        stays_quiet(
            lambda: (len(seen["ga"]), len(seen["gb"]), len(admin.message_trace("TR", sent.msg_id))),
            "the deliveries and their trace events",
            poll_s=0.2,
        )
    events = admin.message_trace("TR", sent.msg_id)
    kinds = [(e.kind, e.group, e.status, e.attempt) for e in events]
    assert kinds[0] == ("send", "tp", "SEND_OK", 1)
    assert ("consume", "ga", "RECONSUME_LATER", 1) in kinds
    assert ("retry", "ga", "%RETRY%ga", 1) in kinds
    assert ("consume", "ga", "CONSUME_SUCCESS", 2) in kinds
    assert ("consume", "gb", "CONSUME_SUCCESS", 1) in kinds
    assert len(kinds) == 5, kinds
    assert all(e.time_ms > 0 and e.cost_ms >= 0 and e.host for e in events)
    assert [e.time_ms for e in events] == sorted(e.time_ms for e in events)
    assert main(["trace", "TR", sent.msg_id, "--url", url, "--namespace", namespace]) == 0
    out = capsys.readouterr().out
    assert out.count("consume") == 3 and "send" in out and "retry" in out and "%RETRY%ga" in out


def test_with_tracing_off_nothing_extra_is_written(namespace: str) -> None:
    """Every command the server ran (MONITOR on the test's own server) while a producer sent and a
    consumer consumed 20 messages with tracing off: no trace script, no trace key."""
    from mq.store.scripts import SCRIPTS

    trace_shas = {SCRIPTS["trace-append"].sha.encode(), SCRIPTS["trace-append"].flagged_sha.encode()}
    with RedisServer() as server:
        url = server.url
        admin_once(url, namespace).create_topic("TR", read_queues=1, write_queues=1)
        got: list[bytes] = []
        commands: list[bytes] = []
        stop = threading.Event()

        def watch() -> None:
            with server.client().monitor() as m:
                for record in m.listen():
                    commands.append(record["command"].encode())
                    if stop.is_set():
                        return

        ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        probe = server.client()
        with (
            Producer("tp", url, namespace=namespace) as producer,
            _consumer(url, namespace, "g", lambda m, c: got.extend(x.body for x in m) or ok) as consumer,
        ):
            wait_for(lambda: any(q.topic == "TR" for q in consumer.assigned_queues()), 10, "the consumer's queue")
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            wait_for(lambda: any("O" in c["flags"] for c in probe.client_list()), 10, "the MONITOR client")
            for i in range(20):
                producer.send(Message("TR", b"%d" % i))
            wait_for(lambda: len(got) >= 20, 10, "all consumed")
            time.sleep(5 * FLUSH_INTERVAL_S)  # a trace written for these deliveries would be flushed by now
            stop.set()
            producer.send(Message("TR", b"last"))  # one more command wakes the watcher
            watcher.join(5)
        trace_keys = list(probe.scan_iter(match="*:trace", count=1000))
        probe.close()
    assert len(commands) > 40, "the monitor saw the sends and the consumption"
    assert trace_keys == []
    assert not [c for c in commands if any(sha in c for sha in trace_shas) or b":trace" in c]


OTEL_CONSUMER = r"""
import json, sys, threading
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
done = threading.Event()
c = PushConsumer("og", sys.argv[1], namespace=sys.argv[2], consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
c.subscribe("OT")
c.register_message_listener(lambda msgs, ctx: done.set() or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
with c:
    done.wait(20)
spans = [s for s in exporter.get_finished_spans() if s.name == "process OT"]
s = spans[0]
print(json.dumps({"trace_id": s.context.trace_id, "parent": s.parent.span_id if s.parent else None,
                  "kind": s.kind.name, "attributes": dict(s.attributes)}))
"""


def test_a_consumers_process_span_is_a_child_of_the_producers_send_span_across_processes(
    redis_server, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    url = redis_server.url
    admin_once(url, namespace).create_topic("OT", read_queues=1, write_queues=1)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    from mq.observe import otel

    # this test's provider, not the process-wide one (which can be set once and would trace every later test)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setattr(trace, "get_tracer", lambda name, *a, **k: provider.get_tracer(name))
    assert otel.enabled()
    with Producer("op", url, namespace=namespace) as producer, tracer.start_as_current_span("checkout"):
        sent = producer.send(Message("OT", b"x", tags="paid", keys=["order-7"]))
    monkeypatch.undo()
    assert not otel.enabled()
    send = next(s for s in exporter.get_finished_spans() if s.name == "send OT")
    assert send.kind.name == "PRODUCER"
    assert send.attributes["messaging.system"] == "rocketmq"
    assert send.attributes["messaging.destination.name"] == "OT"
    assert send.attributes["messaging.message.id"] == sent.msg_id
    assert list(send.attributes["messaging.rocketmq.message.keys"]) == ["order-7"]
    assert send.attributes["messaging.rocketmq.message.tag"] == "paid"
    result = subprocess.run(
        [sys.executable, "-c", OTEL_CONSUMER, url, namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    consumed = json.loads(result.stdout.strip().splitlines()[-1])
    assert consumed["trace_id"] == send.context.trace_id
    assert consumed["parent"] == send.context.span_id
    assert consumed["kind"] == "CONSUMER"
    attrs = consumed["attributes"]
    assert attrs["messaging.consumer.group.name"] == "og" and attrs["messaging.message.id"] == sent.msg_id
    assert attrs["messaging.operation.type"] == "process" and attrs["messaging.system"] == "rocketmq"
