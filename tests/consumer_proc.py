"""A consumer process for multi-process tests: ``python -m tests.consumer_proc URL NS GROUP TOPIC OUT``.

Consumes ``TOPIC`` in ``GROUP`` and appends one line per message to ``OUT``:
``consume <queue_id> <offset> <body>``; every 100 ms it appends ``assigned <ids>`` when its queues
change. SIGTERM shuts down cleanly (commits, releases, unregisters) and appends ``bye <wall time>``.
Options: ``--broadcast``, ``--client-id ID``, ``--first`` (FIRST_OFFSET), ``--sleep-ms N`` per message,
``--orderly`` (an orderly listener; lines then end with the wall time of the call), ``--aio`` (the
member is an ``mq.aio.PushConsumer`` on an asyncio loop, with async listeners).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, MessageModel, PushConsumer
from mq.cli.signals import StopSignals


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("url", "namespace", "group", "topic", "out"):
        p.add_argument(name)
    p.add_argument("--broadcast", action="store_true")
    p.add_argument("--client-id")
    p.add_argument("--first", action="store_true")
    p.add_argument("--sleep-ms", type=float, default=0)
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--aio", action="store_true")
    args = p.parse_args()

    out = open(args.out, "a", buffering=1)  # noqa: SIM115 - line-buffered log kept open for the process
    lock = threading.Lock()
    stop = StopSignals((signal.SIGTERM,))  # not a threading.Event set by a handler: that can deadlock (D66)

    def listener(msgs, ctx, *, slept=False):
        if args.sleep_ms and not slept:
            time.sleep(args.sleep_ms / 1000)
        with lock:
            for m in msgs:
                out.write(f"consume {m.queue_id} {m.queue_offset} {m.body.decode()}\n")
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def orderly(msgs, ctx, *, slept=False):
        # the time recorded is when the batch began: one running when the process was paused (SIGSTOP)
        # began under its lease, though its --sleep-ms ends after the pause
        with lock:
            for m in msgs:
                out.write(f"consume {m.queue_id} {m.queue_offset} {m.body.decode()} {time.time():.6f}\n")
        if args.sleep_ms and not slept:
            time.sleep(args.sleep_ms / 1000)
        return ConsumeOrderlyStatus.SUCCESS

    options = {
        "namespace": args.namespace,
        "client_id": args.client_id,
        "message_model": MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING,
        "consume_from_where": ConsumeFromWhere.FIRST_OFFSET if args.first else ConsumeFromWhere.LAST_OFFSET,
    }

    def write(line: str) -> None:
        with lock:
            out.write(line + "\n")

    if args.aio:
        asyncio.run(_run_aio(args, options, orderly if args.orderly else listener, write, stop))
    else:
        consumer = PushConsumer(args.group, args.url, **options)
        consumer.subscribe(args.topic)
        if args.orderly:
            consumer.register_orderly_listener(orderly)
        else:
            consumer.register_message_listener(listener)
        consumer.start()
        write(f"registered {time.time():.3f}")
        last: list[int] = []
        while not stop.wait(0.1):
            _report_assigned(consumer, last, write, args.topic)
        consumer.shutdown()
    write(f"bye {time.time():.3f}")  # the clean shutdown (commit, release, unregister) is done
    out.close()
    sys.exit(0)


def _report_assigned(consumer, last: list[int], write, topic: str) -> None:  # type: ignore[no-untyped-def]
    """Write an ``assigned`` line when the consumer's queues of ``topic`` (not of the group's retry
    topic) differ from ``last`` (updated)."""
    now = sorted(q.queue_id for q in consumer.assigned_queues() if q.topic == topic)
    if now != last:
        last[:] = now
        write(f"assigned {time.time():.3f} {','.join(map(str, now))}")


async def _run_aio(args, options, plain, write, stop) -> None:  # type: ignore[no-untyped-def]
    """The member as an ``mq.aio.PushConsumer`` whose listener is ``plain`` run as an ``async def``
    (its ``--sleep-ms`` pause awaited, not blocking the loop)."""
    from mq import aio

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        if args.sleep_ms:
            await asyncio.sleep(args.sleep_ms / 1000)
        return plain(msgs, ctx, slept=True)

    consumer = aio.PushConsumer(args.group, args.url, **options)
    consumer.subscribe(args.topic)
    if args.orderly:
        consumer.register_orderly_listener(listener)
    else:
        consumer.register_message_listener(listener)
    await consumer.start()
    write(f"registered {time.time():.3f}")
    last: list[int] = []
    while not stop.is_set():
        await asyncio.sleep(0.1)
        _report_assigned(consumer, last, write, args.topic)
    await consumer.shutdown()


if __name__ == "__main__":
    main()
