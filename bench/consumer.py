"""Consumer benchmarks beside raw redis-py in the same run (``make bench``).

- drain: a push consumer with a no-op listener drains N preloaded 1 KiB messages from a 16-queue
  topic, beside raw ``XREAD COUNT 32`` over the same 16 streams in a loop (no listener, no offsets,
  no threads: the floor of what reading costs);
- latency: messages sent at a fixed rate (default 2000/s) to an idle consumer; end-to-end latency
  from before the send to the listener call, p50/p99, beside raw ``XADD`` + ``XREAD BLOCK``;
- idle wake-up: one message at a time (20 ms apart) to a consumer idle for 1.5 s, from before the
  send to the listener call, p50/p99 (a unit test checked a median of at most 5 ms until D67 moved
  the figure here: tests check that each send wakes the consumer, not how fast).

Results go to stdout and ``bench/results/consumer.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
from mq.store.connection import Connection
from tests.servers import RedisServer

BODY = b"x" * 1024
QUEUES = 16


def push_drain_rate(url: str, ns: str, topic: str, n: int, **consumer_options: Any) -> float:
    """Messages per second a push consumer with a no-op listener drains from ``topic`` (holding ``n``);
    the process's CPU seconds over the drain go to ``LAST_DRAIN_CPU_S[0]``."""
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            count[0] += len(msgs)
            if count[0] >= n:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    group = f"bench{time.monotonic_ns()}"
    consumer = PushConsumer(group, url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **consumer_options)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    started, cpu = time.perf_counter(), time.process_time()
    consumer.start()
    done.wait(300)
    rate = n / (time.perf_counter() - started)
    LAST_DRAIN_CPU_S[0] = time.process_time() - cpu
    consumer.shutdown()
    return rate


#: The client CPU seconds (every thread) of the last :func:`push_drain_rate`, start to last message.
LAST_DRAIN_CPU_S = [0.0]


def drain(url: str, n: int) -> dict[str, float]:
    """Messages per second drained by a push consumer and by a raw XREAD loop."""
    ns = f"drain{time.monotonic_ns()}"
    Admin(url, ns).create_topic("D", read_queues=QUEUES, write_queues=QUEUES)
    with Producer("p", url, namespace=ns) as producer:
        for i in range(0, n, 256):
            futures = [producer.send_async(Message("D", BODY)) for _ in range(min(256, n - i))]
            for f in futures:
                f.result()
    ours = push_drain_rate(url, ns, "D", n)
    ours_cpu = LAST_DRAIN_CPU_S[0]

    keys = Connection(url, ns).keys
    streams = {keys.queue("D", q).log: "0-0" for q in range(QUEUES)}
    raw = redis.Redis.from_url(url)
    started, cpu = time.perf_counter(), time.process_time()
    seen = 0
    while seen < n:
        for stream, entries in raw.xread(streams, count=32):
            streams[stream.decode()] = entries[-1][0]
            seen += len(entries)
    raw_rate = n / (time.perf_counter() - started)
    raw_cpu = time.process_time() - cpu
    raw.close()
    return {
        "push_consumer_msg_s": ours,
        "raw_xread_count32_msg_s": raw_rate,
        "ratio": ours / raw_rate,
        "push_consumer_cpu_us_per_msg": ours_cpu / n * 1e6,
        "raw_xread_cpu_us_per_msg": raw_cpu / n * 1e6,
    }


def latency(url: str, rate: int, seconds: float) -> dict[str, float]:
    """End-to-end latency percentiles (ms) at ``rate`` msg/s, ours and raw XADD + XREAD BLOCK."""
    ns = f"lat{time.monotonic_ns()}"
    Admin(url, ns).create_topic("L", read_queues=4, write_queues=4)
    samples: list[float] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        now = time.time()
        samples.extend((now - float(m.body)) * 1000 for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("bench", url, namespace=ns)
    consumer.subscribe("L")
    consumer.register_message_listener(listener)
    total = int(rate * seconds)
    with consumer, Producer("p", url, namespace=ns) as producer:
        time.sleep(1.5)
        _paced(total, rate, lambda: producer.send(Message("L", repr(time.time()).encode())))
        time.sleep(0.5)
    ours = sorted(samples)

    raw_samples: list[float] = []
    raw = redis.Redis.from_url(url)
    reader = redis.Redis.from_url(url, socket_timeout=10)
    stop = threading.Event()

    def read() -> None:
        last = "$"
        while not stop.is_set():
            for _, entries in reader.xread({"lat:raw": last}, block=1000) or []:
                now = time.time()
                last = entries[-1][0]
                raw_samples.extend((now - float(e[1][b"b"])) * 1000 for e in entries)

    t = threading.Thread(target=read)
    t.start()
    time.sleep(0.5)
    _paced(total, rate, lambda: raw.xadd("lat:raw", {"b": repr(time.time())}))
    time.sleep(0.5)
    stop.set()
    t.join()
    raw.close()
    reader.close()
    return latency_summary(ours, raw_samples, total)


def idle_wake(url: str, n: int = 60) -> dict[str, float]:
    """Wake-up latency (ms, p50/p99) of an idle consumer: ``n`` sends, each after the last delivery."""
    ns = f"wake{time.monotonic_ns()}"
    with Admin(url, ns) as admin:
        admin.create_topic("W", read_queues=4, write_queues=4)
    delivered: list[float] = []
    arrived = threading.Condition()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with arrived:
            delivered.extend(time.time() for _ in msgs)
            arrived.notify_all()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("bench-wake", url, namespace=ns)
    consumer.subscribe("W")
    consumer.register_message_listener(listener)
    samples: list[float] = []
    with consumer, Producer("p", url, namespace=ns) as producer:
        time.sleep(1.5)  # registration and first pulls: the consumer is idle, its waiters block
        for i in range(n):
            sent = time.time()
            producer.send(Message("W", b"%d" % i))
            with arrived:
                if not arrived.wait_for(lambda k=i: len(delivered) > k, 5):
                    raise RuntimeError(f"message {i} not delivered within 5 s")
            samples.append((delivered[i] - sent) * 1000)
            time.sleep(0.02)
    return {"p50_ms": _pct(samples, 50), "p99_ms": _pct(samples, 99), "n": n}


def latency_summary(
    ours: list[float], raw: list[float], sent: int, *, ours_name: str = "ours", raw_name: str = "raw"
) -> dict[str, float]:
    """p50/p99 (ms) of our latency samples and of the raw ones (keys ``{name}_p50_ms``, …), and how
    many of ``sent`` we received."""
    ours, raw = sorted(ours), sorted(raw)
    return {
        f"{ours_name}_p50_ms": _pct(ours, 50),
        f"{ours_name}_p99_ms": _pct(ours, 99),
        f"{raw_name}_p50_ms": _pct(raw, 50),
        f"{raw_name}_p99_ms": _pct(raw, 99),
        "received": len(ours),
        "sent": sent,
    }


def _paced(total: int, rate: int, send) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    for i in range(total):
        wait = started + i / rate - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        send()


def _pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else float("nan")


def run_cli(
    name: str,
    description: str,
    drain: Callable[[str, int], Any],
    latency: Callable[[str, int, float], Any],
    wake: Callable[[str], Any] | None = None,
) -> None:
    """The command line of a consumer benchmark: ``drain``, ``latency`` (and ``wake``, when given) on a
    fresh ``redis-server``, printed and written to ``bench/results/{name}.json``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("-n", type=int, default=50_000, help="messages to drain")
    parser.add_argument("--rate", type=int, default=2000, help="messages per second for the latency run")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with RedisServer() as server:
        result = {"drain": drain(server.url, args.n), "latency": latency(server.url, args.rate, args.seconds)}
        if wake is not None:
            result["idle_wake"] = wake(server.url)
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"n": args.n, "rate": args.rate, **result}, indent=2))


def main() -> None:
    run_cli("consumer", __doc__.splitlines()[0], drain, latency, idle_wake)


if __name__ == "__main__":
    main()
