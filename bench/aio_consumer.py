"""``mq.aio.PushConsumer`` beside the sync push consumer and raw ``redis.asyncio`` in the same run.

Starts its own redis-server on a free loopback port, then:

- drain: ``n`` preloaded 1 KiB messages in a 16-queue topic, drained by an ``aio.PushConsumer`` with a
  no-op ``async def`` listener, by the sync ``PushConsumer`` with a no-op listener (another group, the
  same messages: ``bench.consumer.push_drain_rate``), and by a raw ``redis.asyncio`` ``XREAD COUNT 32``
  loop over the same 16 streams (no listener, no offsets: the floor of what reading costs);
  ``--rounds`` times, interleaved, median of each;
- latency: ``--rate`` msg/s (default 2000) sent by an ``aio.Producer`` paced on the loop to an idle
  ``aio.PushConsumer`` on the same loop; end-to-end latency from before the send to the listener
  call, p50/p99, beside raw ``XADD`` + ``XREAD BLOCK`` on ``redis.asyncio``.

Results go to stdout and ``bench/results/aio_consumer.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio

from bench.consumer import BODY, QUEUES, latency_summary, push_drain_rate
from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, aio
from mq.connection import Connection
from tests.servers import RedisServer


async def _preload(url: str, ns: str, topic: str, n: int) -> None:
    async with aio.Producer("p", url, namespace=ns) as producer:
        for i in range(0, n, 1000):
            await asyncio.gather(*(producer.send(Message(topic, BODY)) for _ in range(min(1000, n - i))))


async def aio_drain_rate(url: str, ns: str, topic: str, n: int) -> float:
    """Messages per second an ``aio.PushConsumer`` with a no-op async listener drains from ``topic``."""
    done = asyncio.Event()
    count = 0

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        nonlocal count
        count += len(msgs)
        if count >= n:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = aio.PushConsumer(f"aio{time.monotonic_ns()}", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    started = time.perf_counter()
    await consumer.start()
    await asyncio.wait_for(done.wait(), 300)
    rate = n / (time.perf_counter() - started)
    await consumer.shutdown()
    return rate


async def raw_drain_rate(url: str, ns: str, topic: str, n: int) -> float:
    """Messages per second a raw ``redis.asyncio`` ``XREAD COUNT 32`` loop reads from the topic's streams."""
    keys = Connection(url, ns).keys
    streams: dict[Any, Any] = {keys.queue(topic, q).log: "0-0" for q in range(QUEUES)}
    raw = redis.asyncio.Redis.from_url(url)
    started = time.perf_counter()
    seen = 0
    while seen < n:
        for stream, entries in await raw.xread(streams, count=32):
            streams[stream.decode()] = entries[-1][0]
            seen += len(entries)
    rate = n / (time.perf_counter() - started)
    await raw.aclose()
    return rate


async def drain(url: str, n: int, rounds: int) -> dict[str, float]:
    """The median drain rate of each case over ``rounds`` interleaved rounds, and the ratios."""
    ns = f"aiodrain{time.monotonic_ns()}"
    Admin(url, ns).create_topic("D", read_queues=QUEUES, write_queues=QUEUES)
    await _preload(url, ns, "D", n)
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        samples.setdefault("aio_push_consumer_msg_s", []).append(await aio_drain_rate(url, ns, "D", n))
        samples.setdefault("sync_push_consumer_msg_s", []).append(push_drain_rate(url, ns, "D", n))
        samples.setdefault("raw_aio_xread_count32_msg_s", []).append(await raw_drain_rate(url, ns, "D", n))
    med = {name: statistics.median(v) for name, v in samples.items()}
    return {
        **med,
        "aio / sync": med["aio_push_consumer_msg_s"] / med["sync_push_consumer_msg_s"],
        "aio / raw": med["aio_push_consumer_msg_s"] / med["raw_aio_xread_count32_msg_s"],
    }


async def _paced(total: int, rate: int, send: Callable[[], Awaitable[object]]) -> None:
    started = time.perf_counter()
    for i in range(total):
        wait = started + i / rate - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        await send()


async def latency(url: str, rate: int, seconds: float) -> dict[str, float]:
    """End-to-end latency percentiles (ms) at ``rate`` msg/s: ours (aio producer to aio listener) and raw."""
    ns = f"aiolat{time.monotonic_ns()}"
    Admin(url, ns).create_topic("L", read_queues=4, write_queues=4)
    samples: list[float] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        now = time.time()
        samples.extend((now - float(m.body)) * 1000 for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = aio.PushConsumer("bench", url, namespace=ns)
    consumer.subscribe("L")
    consumer.register_message_listener(listener)
    total = int(rate * seconds)
    async with consumer, aio.Producer("p", url, namespace=ns) as producer:
        await asyncio.sleep(1.5)
        await _paced(total, rate, lambda: producer.send(Message("L", repr(time.time()).encode())))
        await asyncio.sleep(0.5)
    ours = samples

    raw_samples: list[float] = []
    raw = redis.asyncio.Redis.from_url(url)
    reader = redis.asyncio.Redis.from_url(url)
    stop = asyncio.Event()

    async def read() -> None:
        last = "$"
        while not stop.is_set():
            for _, entries in await reader.xread({"lat:raw": last}, block=200) or []:
                now = time.time()
                last = entries[-1][0]
                raw_samples.extend((now - float(e[1][b"b"])) * 1000 for e in entries)

    task = asyncio.create_task(read())
    await asyncio.sleep(0.5)
    await _paced(total, rate, lambda: raw.xadd("lat:raw", {"b": repr(time.time())}))
    await asyncio.sleep(0.5)
    stop.set()
    await task
    await raw.aclose()
    await reader.aclose()
    return latency_summary(ours, raw_samples, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=50_000, help="messages to drain")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved drain rounds (median)")
    parser.add_argument("--rate", type=int, default=2000, help="messages per second for the latency run")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    async def both(url: str) -> dict[str, Any]:
        return {"drain": await drain(url, args.n, args.rounds), "latency": await latency(url, args.rate, args.seconds)}

    with RedisServer() as server:
        result = asyncio.run(both(server.url))
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "aio_consumer.json").write_text(
        json.dumps({"n": args.n, "rounds": args.rounds, "rate": args.rate, **result}, indent=2)
    )


if __name__ == "__main__":
    main()
