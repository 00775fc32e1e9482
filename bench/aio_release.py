"""How long an ``mq.aio.PushConsumer`` shutdown takes to finish once the orderly batch it waits for
ends (D107): an orderly listener held by an event, the shutdown started and waiting to give the
queue up, then the event set; the time from ``set()`` to the shutdown's return (the release, the
commit, leaving the group, closing the connections).

Run: ``.venv/bin/python -m bench.aio_release [-n RUNS]``. Results go to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from mq import Admin, ConsumeFromWhere, ConsumeOrderlyStatus, Message, Producer
from mq.aio import PushConsumer
from tests.servers import RedisServer

#: Seconds the shutdown is left waiting for the batch before it ends (its release has settled to waiting).
SETTLE_S = 0.05


async def once(url: str, ns: str) -> float:
    """Milliseconds from the batch's end to the shutdown's return, one consumer of a one-queue topic."""
    Admin(url, ns).create_topic("O", read_queues=1, write_queues=1)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        entered.set()
        await gate.wait()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("O")
    consumer.register_orderly_listener(listener)
    await consumer.start()
    with Producer("p", url, namespace=ns) as producer:
        producer.send(Message("O", b"x"))
    await entered.wait()
    core = consumer._core
    assert core is not None
    shutdown = asyncio.create_task(consumer.shutdown())
    while not (core.stopped and core._lock.locked()):  # the releases run under the core's lock
        await asyncio.sleep(0.005)
    await asyncio.sleep(SETTLE_S)
    started = time.perf_counter()
    gate.set()
    await shutdown
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="shutdowns to time")
    args = parser.parse_args()
    with RedisServer() as server:
        ms = [asyncio.run(once(server.url, f"release{i}")) for i in range(args.n)]
    print(json.dumps({"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms)}, indent=2))


if __name__ == "__main__":
    main()
