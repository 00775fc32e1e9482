"""A long-running example producer: creates the topic if missing, then sends numbered messages.

Run: ``python examples/producer_app.py`` sends 10 messages to ``$MQ_URL`` (else the embedded store)
and exits. ``--count 0`` sends until SIGTERM/SIGINT or ``--duration-s``; ``--rate`` paces the sends
(messages per second). docker/docker-compose.yml and scripts/stack.py run it; each message prints
``sent <n> <body> <msg id> queue <queue id> offset <offset>``, and the last line is
``producer done: sent N failed F``. Exits 0 when every send succeeded.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from mq import Admin, Message, MQError, Producer, TopicNotFoundError
from mq.cli.signals import StopSignals


def build_parser() -> argparse.ArgumentParser:
    """The command line (also used by scripts/compose_check.py to check the compose file)."""
    p = argparse.ArgumentParser(prog="producer_app.py", description="send numbered messages")
    p.add_argument("--url", default=None, help="store URL (default: $MQ_URL, else memory://)")
    p.add_argument("--namespace", default="mq", help="key prefix of the deployment (default: mq)")
    p.add_argument("--topic", default="StackDemo", help="topic (created with --queues queues when missing)")
    p.add_argument("--queues", type=int, default=4, help="read and write queues of a topic it creates (default: 4)")
    p.add_argument("--group", default="StackProducer", help="producer group (default: StackProducer)")
    p.add_argument("--count", type=int, default=10, help="messages to send; 0 = until stopped (default: 10)")
    p.add_argument("--rate", type=float, default=0.0, help="messages per second; 0 = as fast as possible (default)")
    p.add_argument("--duration-s", type=float, default=0.0, help="stop after this many seconds; 0 = no limit (default)")
    p.add_argument("--prefix", default="message", help="bodies are PREFIX-<n> (default: message)")
    return p


def ensure_topic(url: str | None, namespace: str, topic: str, queues: int) -> None:
    """Create ``topic`` unless it exists (an existing topic keeps its queue counts)."""
    with Admin(url, namespace) as admin:
        try:
            admin.topic_config(topic)
        except TopicNotFoundError:
            admin.create_topic(topic, read_queues=queues, write_queues=queues)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = StopSignals()  # SIGTERM, SIGINT; not a threading.Event set by a handler: that can deadlock (D66)

    ensure_topic(args.url, args.namespace, args.topic, args.queues)
    sent = failed = 0
    start = time.monotonic()
    with Producer(args.group, args.url, namespace=args.namespace) as producer:
        n = 0
        while not stop.is_set() and (args.count <= 0 or n < args.count):
            if args.duration_s > 0 and time.monotonic() - start >= args.duration_s:
                break
            if args.rate > 0 and stop.wait(max(0.0, start + n / args.rate - time.monotonic())):
                break
            n += 1
            body = f"{args.prefix}-{n}"
            try:
                r = producer.send(Message(args.topic, body.encode(), keys=[body]))
            except MQError as e:  # a store outage: report and carry on with the next message
                failed += 1
                print(f"send {n} failed: {e}", file=sys.stderr, flush=True)
                stop.wait(1.0)
                continue
            sent += 1
            print(f"sent {n} {body} {r.msg_id} queue {r.message_queue.queue_id} offset {r.queue_offset}", flush=True)
    print(f"producer done: sent {sent} failed {failed} in {time.monotonic() - start:.1f} s", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
