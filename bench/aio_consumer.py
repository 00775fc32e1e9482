"""The asyncio push consumer beside the sync one and raw ``redis.asyncio`` in the same run.

- drain: N preloaded 1 KiB messages of a 16-queue topic drained by ``mq.aio.PushConsumer`` with a
  no-op ``async def`` listener, by the sync ``PushConsumer`` with a no-op listener, and by a raw
  ``redis.asyncio`` ``XREAD COUNT 32`` loop over the same 16 streams (no listener, no offsets: the
  floor of what reading costs) — each consumer kind first drains a small topic of its own, so that
  neither pays the process's first-drain costs in the measured run;
- latency: messages sent at a fixed rate (default 2000/s, by a sync producer in a process of its
  own: a sender thread in the consumer's process would make the event loop wait for the GIL at
  every socket call) to an idle ``mq.aio.PushConsumer``; end-to-end latency from before the send
  to the listener call, p50/p99, beside raw ``XADD`` (from a process too) + ``redis.asyncio``
  ``XREAD BLOCK``.

Run: ``.venv/bin/python -m bench.aio_consumer`` (``-n``, ``--rate``, ``--seconds``). Results go to
stdout and ``bench/results/aio_consumer.json``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from multiprocessing.process import BaseProcess

import redis
import redis.asyncio

from bench.consumer import BODY, QUEUES, _paced, latency_summary, push_drain_rate, run_cli
from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer
from mq.aio import PushConsumer
from mq.store.connection import Connection


def preload(url: str, ns: str, topic: str, n: int) -> None:
    """``n`` 1 KiB messages spread over the ``QUEUES`` queues of a new ``topic``."""
    Admin(url, ns).create_topic(topic, read_queues=QUEUES, write_queues=QUEUES)
    with Producer("p", url, namespace=ns) as producer:
        for i in range(0, n, 256):
            for f in [producer.send_async(Message(topic, BODY)) for _ in range(min(256, n - i))]:
                f.result()


async def aio_drain_rate(url: str, ns: str, topic: str, n: int) -> float:
    """Messages per second ``mq.aio.PushConsumer`` with a no-op async listener drains from ``topic``."""
    done = asyncio.Event()
    count = [0]

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        count[0] += len(msgs)
        if count[0] >= n:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"abench{time.monotonic_ns()}", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    started = time.perf_counter()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 300)
    rate = n / (time.perf_counter() - started)
    await consumer.shutdown()
    return rate


async def raw_drain_rate(url: str, ns: str, topic: str, n: int) -> float:
    """Messages per second a raw ``redis.asyncio`` XREAD COUNT 32 loop reads from the same streams."""
    keys = Connection(url, ns).keys
    streams: dict[str, str] = {keys.queue(topic, q).log: "0-0" for q in range(QUEUES)}
    raw = redis.asyncio.Redis.from_url(url)
    started = time.perf_counter()
    seen = 0
    while seen < n:
        for stream, entries in await raw.xread(streams, count=32):  # type: ignore[arg-type]
            streams[stream.decode()] = entries[-1][0]
            seen += len(entries)
    rate = n / (time.perf_counter() - started)
    await raw.aclose()
    return rate


#: Messages of the warm-up drain each consumer kind does first (on a topic of its own).
WARM_UP = 2000


def drain(url: str, n: int) -> dict[str, float]:
    """The three drain rates over the same preloaded streams, after a small drain by each consumer
    kind: what only a process's first drain pays (lazy imports, the pull script's load after
    ``NOSCRIPT``, first connections) would otherwise all fall on the asyncio drain, which runs first —
    measured, 0.93–1.00× cold against 1.05–1.13× warm in the same sitting (docs/benchmarks.md)."""
    warm = f"awarm{time.monotonic_ns()}"
    preload(url, warm, "D", WARM_UP)
    asyncio.run(aio_drain_rate(url, warm, "D", WARM_UP))
    push_drain_rate(url, warm, "D", WARM_UP)
    ns = f"adrain{time.monotonic_ns()}"
    preload(url, ns, "D", n)
    cpu = time.process_time()
    aio_rate = asyncio.run(aio_drain_rate(url, ns, "D", n))
    cpu, aio_cpu = time.process_time(), time.process_time() - cpu
    sync_rate = push_drain_rate(url, ns, "D", n)
    sync_cpu = time.process_time() - cpu
    raw_rate = asyncio.run(raw_drain_rate(url, ns, "D", n))
    return {
        "aio_push_msg_s": aio_rate,
        "sync_push_msg_s": sync_rate,
        "raw_aio_xread_count32_msg_s": raw_rate,
        "aio_vs_sync": aio_rate / sync_rate,
        "aio_vs_raw": aio_rate / raw_rate,
        # the client's CPU per message (start and shutdown included): steadier than rates on a busy machine
        "aio_push_cpu_us_per_msg": aio_cpu / n * 1e6,
        "sync_push_cpu_us_per_msg": sync_cpu / n * 1e6,
    }


def _send(url: str, ns: str, topic: str, total: int, rate: int) -> None:
    """Send ``total`` messages at ``rate`` per second (each body: its send time); ``ns`` "": raw XADD."""
    if not ns:
        writer = redis.Redis.from_url(url)
        _paced(total, rate, lambda: writer.xadd(topic, {"b": repr(time.time())}))
        writer.close()
        return
    with Producer("p", url, namespace=ns) as producer:
        _paced(total, rate, lambda: producer.send(Message(topic, repr(time.time()).encode())))


def _send_paced(url: str, ns: str, topic: str, total: int, rate: int) -> BaseProcess:
    """:func:`_send` in a process of its own (started)."""
    process = multiprocessing.get_context("spawn").Process(target=_send, args=(url, ns, topic, total, rate))
    process.start()
    return process


async def aio_latency(url: str, ns: str, rate: int, seconds: float) -> list[float]:
    """End-to-end latencies (ms) of ``mq.aio.PushConsumer`` at ``rate`` msg/s."""
    Admin(url, ns).create_topic("L", read_queues=4, write_queues=4)
    samples: list[float] = []

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        now = time.time()
        samples.extend((now - float(m.body)) * 1000 for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("bench", url, namespace=ns)
    consumer.subscribe("L")
    consumer.register_message_listener(listener)
    async with consumer:
        await asyncio.sleep(1.5)
        sender = _send_paced(url, ns, "L", int(rate * seconds), rate)
        while sender.is_alive():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    return sorted(samples)


async def raw_latency(url: str, rate: int, seconds: float) -> list[float]:
    """End-to-end latencies (ms) of raw ``XADD`` (paced, another process) + ``redis.asyncio`` ``XREAD BLOCK``."""
    samples: list[float] = []
    reader = redis.asyncio.Redis.from_url(url, socket_timeout=10)
    stop = asyncio.Event()

    async def read() -> None:
        last = "$"
        while not stop.is_set():
            for _, entries in await reader.xread({"lat:raw": last}, block=200) or []:
                now = time.time()
                last = entries[-1][0]
                samples.extend((now - float(e[1][b"b"])) * 1000 for e in entries)

    task = asyncio.create_task(read())
    await asyncio.sleep(0.5)
    sender = _send_paced(url, "", "lat:raw", int(rate * seconds), rate)
    while sender.is_alive():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    stop.set()
    await task
    await reader.aclose()
    return sorted(samples)


def latency(url: str, rate: int, seconds: float) -> dict[str, float]:
    """p50/p99 end-to-end latency (ms) at ``rate`` msg/s, ours (asyncio) and raw."""
    cpu = time.process_time()
    ours = asyncio.run(aio_latency(url, f"alat{time.monotonic_ns()}", rate, seconds))
    cpu, aio_cpu = time.process_time(), time.process_time() - cpu
    theirs = asyncio.run(raw_latency(url, rate, seconds))
    raw_cpu = time.process_time() - cpu
    summary = latency_summary(ours, theirs, int(rate * seconds), ours_name="aio", raw_name="raw_aio")
    # the client's CPU per message received (start and shutdown included)
    return summary | {
        "aio_cpu_us_per_msg": aio_cpu / max(1, len(ours)) * 1e6,
        "raw_aio_cpu_us_per_msg": raw_cpu / max(1, len(theirs)) * 1e6,
    }


def main() -> None:
    run_cli("aio_consumer", __doc__.splitlines()[0], drain, latency)


if __name__ == "__main__":
    main()
