"""``mq.aio.Producer`` beside the sync producer and raw ``redis.asyncio`` in the same run.

Starts its own redis-server on a free loopback port, then times, in interleaved rounds, ``n`` 1 KiB
messages sent in waves of 1 000 at once:

- ``aio_send``: 1 000 concurrent ``await producer.send()`` (``asyncio.gather``) per wave;
- ``sync_send_async``: 1 000 ``Producer.send_async`` futures in flight per wave (the sync API's
  pipelined path);
- ``raw_aio_pipeline_128``: raw ``redis.asyncio`` ``XADD`` in pipelines of 128 (the producers'
  pipeline size), one after another.

The ratios (ours / raw, and aio / sync) are what to compare across machines. Results go to stdout
and ``bench/results/aio_producer.json``.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio

from bench.producer import BODY, rounds_main, summary
from mq import Admin, Message, Producer, aio
from mq.producer.pipeline import MAX_PIPELINE
from tests.servers import RedisServer

#: Sends in flight at once.
WAVE = 1000


async def _run(n: int, rounds: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {}
    with RedisServer() as server:
        raw = redis.asyncio.Redis.from_url(server.url)
        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        with Producer("bench", server.url, namespace="bench") as sync_producer:
            async with aio.Producer("bench", server.url, namespace="bench") as producer:
                await producer.send(Message("bench", BODY))  # connections and route
                sync_producer.send(Message("bench", BODY))

                async def aio_send() -> None:
                    for _ in range(n // WAVE):
                        await asyncio.gather(*(producer.send(Message("bench", BODY)) for _ in range(WAVE)))

                async def sync_send_async() -> None:
                    for _ in range(n // WAVE):
                        futures = [sync_producer.send_async(Message("bench", BODY)) for _ in range(WAVE)]
                        for f in futures:
                            f.result()

                async def raw_pipeline() -> None:
                    for _ in range(n // MAX_PIPELINE):
                        pipe = raw.pipeline(transaction=False)
                        for _ in range(MAX_PIPELINE):
                            pipe.xadd("raw:pipe", {"b": BODY})
                        await pipe.execute()

                cases = {"aio_send": aio_send, "sync_send_async": sync_send_async, "raw_aio_pipeline_128": raw_pipeline}
                for _ in range(rounds):
                    for name, fn in cases.items():
                        started = time.perf_counter()
                        await fn()
                        samples.setdefault(name, []).append(n / (time.perf_counter() - started))
                        await raw.delete("raw:pipe")
        await raw.aclose()
    return summary(
        samples,
        [
            ("aio_send", "sync_send_async"),
            ("aio_send", "raw_aio_pipeline_128"),
            ("sync_send_async", "raw_aio_pipeline_128"),
        ],
    )


def run(n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Run every case ``rounds`` times, interleaved; the median rate of each and the ratios."""
    return asyncio.run(_run(n, rounds))


def main() -> None:
    rounds_main(__doc__ or "", run, "aio_producer", 20_000)


if __name__ == "__main__":
    main()
