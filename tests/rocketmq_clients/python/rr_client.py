"""Small programs of ours on the official RocketMQ 5 Python client (rocketmq-python-client), run in
their own process by tests/proxy_clients.py. Output: one JSON object per line.

    rr_client.py produce ENDPOINT TOPIC SPEC_JSON        send the messages SPEC_JSON lists (a spec's "recalls": N
                                                         recalls it N times after sending)
    rr_client.py fifo ENDPOINT TOPIC GROUPS PER_GROUP    send GROUPS × PER_GROUP FIFO messages, interleaved
    rr_client.py bench ENDPOINT TOPIC COUNT SIZE         send COUNT messages of SIZE bytes, print the rate
    rr_client.py consume ENDPOINT TOPIC GROUP COUNT SECONDS [--no-ack] [--change S] [--tag EXPR] [--sql EXPR] [--sleep S]
"""

import argparse
import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def config(endpoint, ak="", sk=""):
    return ClientConfiguration(endpoint, Credentials(ak, sk) if ak else Credentials())


def emit(**fields):
    print(json.dumps(fields), flush=True)


def view(m):
    return {
        "message_id": m.message_id,
        "body": m.body.hex(),
        "tag": m.tag,
        "keys": sorted(m.keys),
        "properties": dict(m.properties),
        "message_group": m.message_group,
        "delivery_attempt": m.delivery_attempt,
        "receipt_handle": m.receipt_handle,
        "topic": m.topic,
        "priority": m.priority,
    }


def produce(args):
    producer = Producer(config(args.endpoint, args.ak, args.sk), (args.topic,))
    producer.startup()
    try:
        for spec in json.loads(args.spec):
            msg = Message()
            msg.topic = args.topic
            msg.body = bytes.fromhex(spec["body"])
            if spec.get("tag"):
                msg.tag = spec["tag"]
            for key in spec.get("keys", []):
                msg.keys = key  # the setter adds one key at a time
            for k, v in spec.get("properties", {}).items():
                msg.add_property(k, v)
            if spec.get("message_group"):
                msg.message_group = spec["message_group"]
            if spec.get("delivery_timestamp"):
                msg.delivery_timestamp = spec["delivery_timestamp"]
            if spec.get("priority") is not None:
                msg.priority = spec["priority"]
            try:
                receipt = producer.send(msg)
                emit(ok=True, message_id=receipt.message_id, recall_handle=receipt.recall_handle)
                for _ in range(spec.get("recalls", 0)):  # recall it that many times, one line each
                    try:
                        emit(ok=True, recalled=producer.recall_message(args.topic, receipt.recall_handle))
                    except Exception as e:
                        emit(ok=False, error=type(e).__name__, code=getattr(e, "code", None), text=str(e))
            except Exception as e:
                emit(ok=False, error=type(e).__name__, code=getattr(e, "code", None), text=str(e))
    finally:
        producer.shutdown()


def fifo(args):
    producer = Producer(config(args.endpoint), (args.topic,))
    producer.startup()
    try:
        for i in range(args.per_group):
            for g in range(args.groups):
                msg = Message()
                msg.topic = args.topic
                msg.body = f"{g}:{i}".encode()
                msg.message_group = f"group-{g}"
                receipt = producer.send(msg)
                emit(group=f"group-{g}", seq=i, message_id=receipt.message_id)
    finally:
        producer.shutdown()


def bench(args):
    producer = Producer(config(args.endpoint), (args.topic,))
    producer.startup()
    try:
        body = b"x" * args.size
        for _ in range(min(50, args.count)):  # warm-up: channel, route
            msg = Message()
            msg.topic, msg.body = args.topic, body
            producer.send(msg)
        began = time.perf_counter()
        for _ in range(args.count):
            msg = Message()
            msg.topic, msg.body = args.topic, body
            producer.send(msg)
        elapsed = time.perf_counter() - began
        emit(count=args.count, seconds=elapsed, rate=args.count / elapsed)
    finally:
        producer.shutdown()


def consume(args):
    if args.sql:
        from rocketmq.grpc_protocol import FilterType

        expression = FilterExpression(args.sql, FilterType.SQL)
    else:
        expression = FilterExpression(args.tag) if args.tag else FilterExpression()
    consumer = SimpleConsumer(config(args.endpoint, args.ak, args.sk), args.group, {args.topic: expression}, await_duration=5)
    consumer.startup()
    got = 0
    deadline = time.monotonic() + args.seconds
    try:
        while got < args.count and time.monotonic() < deadline:
            try:
                messages = consumer.receive(args.batch, args.invisible)
            except Exception as e:  # as the official example does: report and receive again
                print(f"receive raised {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                time.sleep(0.5)
                continue
            for m in messages or []:
                got += 1
                record = view(m)
                if args.change:
                    old = m.receipt_handle
                    consumer.change_invisible_duration(m, args.change)
                    record["changed_from"] = old
                    record["receipt_handle"] = m.receipt_handle
                if args.sleep:
                    time.sleep(args.sleep)
                if not args.no_ack:
                    consumer.ack(m)
                    record["acked"] = True
                    record["acked_at"] = time.time()
                emit(**record)
    finally:
        consumer.shutdown()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "fifo", "bench", "consume"):
        s = sub.add_parser(name)
        s.add_argument("endpoint")
        s.add_argument("topic")
        s.add_argument("--ak", default="")
        s.add_argument("--sk", default="")
        if name == "produce":
            s.add_argument("spec")
        elif name == "fifo":
            s.add_argument("groups", type=int)
            s.add_argument("per_group", type=int)
        elif name == "bench":
            s.add_argument("count", type=int)
            s.add_argument("size", type=int)
        else:
            s.add_argument("group")
            s.add_argument("count", type=int)
            s.add_argument("seconds", type=float)
            s.add_argument("--batch", type=int, default=16)
            s.add_argument("--invisible", type=int, default=15)
            s.add_argument("--no-ack", action="store_true")
            s.add_argument("--change", type=int, default=0)
            s.add_argument("--tag", default="")
            s.add_argument("--sql", default="")
            s.add_argument("--sleep", type=float, default=0)
    args = p.parse_args()
    {"produce": produce, "fifo": fifo, "bench": bench, "consume": consume}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
