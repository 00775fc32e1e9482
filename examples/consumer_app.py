"""A long-running example consumer: one member of a consumer group, printing what it receives.

Run: ``python examples/consumer_app.py`` consumes for 2 s and exits; on the embedded store (no
``$MQ_URL``), where no other process can send, it first sends 5 messages itself so there is something
to receive. ``--duration-s 0`` consumes until SIGTERM/SIGINT, then shuts down cleanly (commits its
offsets, leaves the group). docker/docker-compose.yml runs two of these in one group; so does
scripts/stack.py.

Output, one line each: ``assigned <queue ids>`` when its share of the topic's queues changes,
``received <body> queue <queue id> offset <offset>`` per message (``--quiet``: a count every 5 s instead),
and finally ``consumer done: received N``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence

from mq import Admin, ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer, TopicNotFoundError
from mq.cli.signals import StopSignals
from mq.store.connection import resolve_url


def build_parser() -> argparse.ArgumentParser:
    """The command line (also used by scripts/compose_check.py to check the compose file)."""
    p = argparse.ArgumentParser(prog="consumer_app.py", description="consume a topic in a consumer group")
    p.add_argument("--url", default=None, help="store URL (default: $MQ_URL, else memory://)")
    p.add_argument("--namespace", default="mq", help="key prefix of the deployment (default: mq)")
    p.add_argument("--topic", default="StackDemo", help="topic (created with --queues queues when missing)")
    p.add_argument("--queues", type=int, default=4, help="read and write queues of a topic it creates (default: 4)")
    p.add_argument("--group", default="StackConsumers", help="consumer group (default: StackConsumers)")
    p.add_argument("--duration-s", type=float, default=2.0, help="consume this long; 0 = until stopped (default: 2)")
    p.add_argument("--count", type=int, default=None, help="messages it sends itself first (default: 5 if embedded, else 0)")
    p.add_argument("--quiet", action="store_true", help="print a count every 5 s instead of a line per message")
    return p


def ensure_topic(url: str | None, namespace: str, topic: str, queues: int) -> None:
    """Create ``topic`` unless it exists, so the group can subscribe before any producer ran."""
    with Admin(url, namespace) as admin:
        try:
            admin.topic_config(topic)
        except TopicNotFoundError:
            admin.create_topic(topic, read_queues=queues, write_queues=queues)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    embedded = resolve_url(args.url).startswith("memory://")
    own_count = args.count if args.count is not None else (5 if embedded else 0)
    stop = StopSignals()  # SIGTERM, SIGINT; not a threading.Event set by a handler: that can deadlock (D66)

    lock = threading.Lock()
    received = 0

    def on_messages(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        nonlocal received
        with lock:
            for m in msgs:
                received += 1
                if not args.quiet:
                    print(f"received {m.body.decode(errors='replace')} queue {m.queue_id} offset {m.queue_offset}", flush=True)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    ensure_topic(args.url, args.namespace, args.topic, args.queues)
    consumer = PushConsumer(args.group, args.url, namespace=args.namespace)
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(on_messages)
    consumer.start()
    start = time.monotonic()
    try:
        last: list[int] | None = None
        last_count_at = start
        while not stop.wait(0.1):
            now = time.monotonic()
            if args.duration_s > 0 and now - start >= args.duration_s:
                break
            assigned = sorted(q.queue_id for q in consumer.assigned_queues() if q.topic == args.topic)  # not the retry topic
            if assigned != last:
                last = assigned
                with lock:
                    print(f"assigned {','.join(map(str, assigned))}", flush=True)
                if assigned and own_count:
                    _send_own(args, own_count)
                    own_count = 0
            if args.quiet and now - last_count_at >= 5.0:
                last_count_at = now
                with lock:
                    print(f"received so far: {received}", flush=True)
    finally:
        consumer.shutdown()
    print(f"consumer done: received {received}", flush=True)
    return 0


def _send_own(args: argparse.Namespace, count: int) -> None:
    with Producer(args.group + "Producer", args.url, namespace=args.namespace) as producer:
        for n in range(1, count + 1):
            producer.send(Message(args.topic, f"own-{n}".encode()))


if __name__ == "__main__":
    sys.exit(main())
