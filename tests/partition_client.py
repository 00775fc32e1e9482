"""Client processes of the partition suite (run inside a host's namespace by ``tests/partitions.py``).

- ``python -m tests.partition_client produce URL NS TOPIC OUT --rate N --sync-replicas R --stop-file F``:
  creates the topic if needed (``--queues``, 4), then sync sends at about ``N``/s until the file ``F``
  exists; one line per send to ``OUT``:
  ``<outcome> <seq> <queue> <offset> <monotonic s>`` where outcome is ``ok`` (SEND_OK),
  ``unconfirmed`` (FLUSH_SLAVE_TIMEOUT) or ``error`` (the send raised; queue and offset ``-1``).
- ``python -m tests.partition_client dump URL NS TOPIC GROUP… OUT``: the store as the sentinels'
  master has it now, as JSON: ``{"stored": [[queue, offset, body], …], "ends": {queue: end},
  "committed": {group: {queue: offset}}}``.

Bodies are ``m<seq>``: a message is known by its body wherever it is found.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from mq import Admin, Message, Producer, SendStatus
from mq.errors import MQError


def produce(args: argparse.Namespace) -> None:
    logging.basicConfig(format="%(created).4f %(name)s %(levelname)s %(message)s")  # wall time, as the servers' logs
    period = 1.0 / args.rate
    with Admin(args.url, args.namespace) as admin:
        if not admin.topic_exists(args.topic):
            admin.create_topic(args.topic, read_queues=args.queues, write_queues=args.queues)
    with (
        open(args.out, "a", buffering=1) as out,
        Producer(
            "partition", args.url, namespace=args.namespace, sync_replicas=args.sync_replicas, sync_flush=args.sync_flush
        ) as p,
    ):
        seq = 0
        next_at = time.monotonic()
        while not os.path.exists(args.stop_file):
            try:
                result = p.send(Message(args.topic, b"m%d" % seq))
                outcome = "ok" if result.status is SendStatus.SEND_OK else "unconfirmed"
                qid, offset = result.message_queue.queue_id, result.queue_offset
            except MQError as e:
                outcome, qid, offset = "error", -1, -1
                print(f"{time.time():.4f} send {seq} raised: {e}", file=sys.stderr, flush=True)
            out.write(f"{outcome} {seq} {qid} {offset} {time.monotonic():.4f}\n")
            seq += 1
            next_at = max(next_at + period, time.monotonic() - 1.0)  # catch up after a stall, not in a burst
            time.sleep(max(0.0, next_at - time.monotonic()))


def dump(args: argparse.Namespace) -> None:
    with Admin(args.url, args.namespace) as admin:
        status = admin.topic_status(args.topic)
        stored: list[tuple[int, int, str]] = []
        ends: dict[int, int] = {}
        for queue, stats in status.items():
            ends[queue.queue_id] = stats.max_offset
            start = stats.min_offset
            while start < stats.max_offset:
                batch = admin.messages(args.topic, queue.queue_id, start, stats.max_offset)
                if not batch:
                    break
                stored += [(queue.queue_id, m.queue_offset, m.body.decode()) for m in batch]
                start = batch[-1].queue_offset + 1
        committed = {
            group: {p.message_queue.queue_id: p.consumer_offset for p in admin.consumer_progress(group, args.topic)}
            for group in args.groups
        }
    with open(args.out, "w") as out:
        json.dump({"stored": stored, "ends": ends, "committed": committed}, out)


def _replicas(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("produce")
    for name in ("url", "namespace", "topic", "out"):
        pr.add_argument(name)
    pr.add_argument("--rate", type=float, default=200)
    pr.add_argument("--sync-replicas", type=_replicas, default=0, help="a number, or a mode name such as all")
    pr.add_argument("--sync-flush", action="store_true", help="WAITAOF: sends wait for the AOF fsync (Redis >= 7.2)")
    pr.add_argument("--stop-file", required=True)
    pr.add_argument("--queues", type=int, default=4, help="queues of the topic when it is created")
    du = sub.add_parser("dump")
    for name in ("url", "namespace", "topic"):
        du.add_argument(name)
    du.add_argument("groups", nargs="*")
    du.add_argument("out")
    args = p.parse_args()
    produce(args) if args.cmd == "produce" else dump(args)


if __name__ == "__main__":
    main()
