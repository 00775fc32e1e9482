"""``mq``: administer topics, send and query messages, and run the demo.

Every command takes ``--url`` (default ``$MQ_URL``, else the embedded ``memory://`` store, which
lives only as long as the command) and ``--namespace``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from mq.admin import Admin
from mq.cli import demo
from mq.connection import mask_url, resolve_url
from mq.errors import MQError
from mq.message import Message, MessageExt
from mq.producer import Producer
from mq.topic import DEFAULT_QUEUE_NUMS


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help="store URL (default: $MQ_URL, else memory://)")
    p.add_argument("--namespace", default="mq", help="key prefix of the deployment (default: mq)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mq``."""
    parser = argparse.ArgumentParser(prog="mq", description="rocketredis: RocketMQ's messaging model on Redis")
    sub = parser.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="run the end-to-end demo")
    _common(d)

    topic = sub.add_parser("topic", help="create, update, delete, list topics and show their queues")
    tsub = topic.add_subparsers(dest="action", required=True)
    for action in ("create", "update"):
        t = tsub.add_parser(action)
        _common(t)
        t.add_argument("topic")
        default = DEFAULT_QUEUE_NUMS if action == "create" else None
        t.add_argument("--read-queues", type=int, default=default)
        t.add_argument("--write-queues", type=int, default=default)
        t.add_argument("--perm", choices=("rw", "r", "w"), default="rw" if action == "create" else None)
        if action == "create":
            t.add_argument("--order", action="store_true", help="mark the topic as ordered")
    for action in ("delete", "status"):
        t = tsub.add_parser(action)
        _common(t)
        t.add_argument("topic")
    _common(tsub.add_parser("list"))

    s = sub.add_parser("send", help="send one message")
    _common(s)
    s.add_argument("topic")
    s.add_argument("body", help="message body (UTF-8 text)")
    s.add_argument("--tags")
    s.add_argument("--keys", help="business keys, separated by spaces")
    s.add_argument("--property", "-p", action="append", default=[], metavar="NAME=VALUE")
    s.add_argument("--sharding-key", help="send by hash of this key (ordered messages)")

    group = sub.add_parser("group", help="consumer groups: list, progress (lag), connections, reset offsets")
    gsub = group.add_subparsers(dest="action", required=True)
    _common(gsub.add_parser("list"))
    for action in ("progress", "connections"):
        g = gsub.add_parser(action)
        _common(g)
        g.add_argument("group")
        if action == "progress":
            g.add_argument("--topic")
    g = gsub.add_parser("reset-offset", help="move a (stopped) group's offsets to a time")
    _common(g)
    g.add_argument("group")
    g.add_argument("topic")
    g.add_argument("--timestamp-ms", type=int, required=True, help="epoch ms; 0 means from the beginning")

    b = sub.add_parser("broker", help="run the broker service (timers, retention, clean-up) or check its health")
    _common(b)
    b.add_argument("--check", action="store_true",
                   help="exit 0 when a broker service is healthy and mq doctor finds no FAIL, else 1")
    b.add_argument("--sync-replicas", type=int, default=0,
                   help="replicas that must confirm the service's writes (timer delivery, transactions); default 0")
    b.add_argument("--sync-replicas-timeout-ms", type=int, default=1000, help="how long each write waits for them (ms)")

    doc = sub.add_parser("doctor", help="check the store: eviction policy, persistence, replicas, sentinel, cluster, ACL")
    _common(doc)
    doc.add_argument("--acl-user", help="check this ACL user's commands (run as an admin); default: the URL's user")
    b.add_argument("--delay-levels", help='message_delay_level, e.g. "1s 5s 10s 30s 1m"')
    b.add_argument("--retention-h", type=float, help="file_reserved_time_h: hours messages are kept")
    b.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (/metrics)")
    b.add_argument("--metrics-addr", default="127.0.0.1", help="address of the metrics endpoint (default 127.0.0.1)")

    d = sub.add_parser("dlq", help="dead-letter queues: list and resend")
    dsub = d.add_subparsers(dest="action", required=True)
    for action in ("list", "resend"):
        x = dsub.add_parser(action)
        _common(x)
        x.add_argument("group")
        if action == "list":
            x.add_argument("--max", type=int, default=64, dest="max_num")
        else:
            x.add_argument("--id", action="append", dest="msg_ids", help="only this msg id (repeatable)")

    an = sub.add_parser("analytics", help="Spark analytics jobs: throughput, lag, dlq, skew (needs .[spark])")
    _common(an)
    an.add_argument("job", choices=("throughput", "lag", "dlq", "skew", "all"))
    an.add_argument("--out", default="analytics-out", help="folder for the tables and PNG charts")
    an.add_argument("job_args", nargs=argparse.REMAINDER, help="more options of the job (see docs/spark.md)")

    tx = sub.add_parser("tx", help="transactions: list half messages rolled back after too many checks")
    txsub = tx.add_subparsers(dest="action", required=True)
    x = txsub.add_parser("list")
    _common(x)
    x.add_argument("--topic")

    q = sub.add_parser("query", help="find messages by id or key")
    _common(q)
    q.add_argument("topic")
    how = q.add_mutually_exclusive_group(required=True)
    how.add_argument("--id", dest="msg_id")
    how.add_argument("--key")
    q.add_argument("--max", type=int, default=64, dest="max_num")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mq`` with ``argv``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            return demo.run(args.url, args.namespace)
        return _HANDLERS[args.command](args)
    except MQError as e:
        print(f"mq: error: {e}", file=sys.stderr)
        return 1


def _topic(args: argparse.Namespace) -> int:
    with Admin(args.url, args.namespace) as admin:
        if args.action == "create":
            c = admin.create_topic(args.topic, read_queues=args.read_queues, write_queues=args.write_queues,
                                   perm=args.perm, order=args.order)  # fmt: skip
            print(f"created {c.name}: read_queues={c.read_queues} write_queues={c.write_queues} perm={c.perm}")
        elif args.action == "update":
            c = admin.update_topic(args.topic, read_queues=args.read_queues, write_queues=args.write_queues,
                                   perm=args.perm)  # fmt: skip
            print(f"updated {c.name}: read_queues={c.read_queues} write_queues={c.write_queues} perm={c.perm}")
        elif args.action == "delete":
            admin.delete_topic(args.topic)
            print(f"deleted {args.topic}")
        elif args.action == "list":
            _warn_if_memory(args.url)
            _table(("TOPIC", "READ", "WRITE", "PERM", "ORDER"),
                   [(c.name, c.read_queues, c.write_queues, c.perm, "yes" if c.order else "") for c in admin.topics()])
        else:
            status = admin.topic_status(args.topic)
            _table(("QUEUE", "MIN", "MAX", "STORED", "LAST_STORE_MS"),
                   [(mq.queue_id, s.min_offset, s.max_offset, s.max_offset - s.min_offset, s.last_store_timestamp_ms)
                    for mq, s in sorted(status.items())])  # fmt: skip
    return 0


def _group(args: argparse.Namespace) -> int:
    _warn_if_memory(args.url)
    with Admin(args.url, args.namespace) as admin:
        if args.action == "list":
            _table(("GROUP", "MEMBERS"), [(g, len(admin.consumer_connections(g))) for g in admin.groups()])
        elif args.action == "progress":
            rows = admin.consumer_progress(args.group, args.topic)
            _table(("TOPIC", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG"),
                   [(r.message_queue.topic, r.message_queue.queue_id, r.broker_offset, r.consumer_offset, r.lag)
                    for r in rows])  # fmt: skip
            print(f"total lag: {sum(r.lag for r in rows)}")
        elif args.action == "connections":
            _table(("CLIENT_ID", "HOST", "PID", "MODEL", "KIND", "SUBSCRIPTIONS", "LAST_HEARTBEAT_MS"),
                   [(c.client_id, c.host, c.pid, c.message_model, c.kind,
                     ";".join(f"{t}={e}" for t, e in sorted(c.subscriptions.items())), c.last_heartbeat_ms)
                    for c in admin.consumer_connections(args.group)])  # fmt: skip
        else:
            offsets = admin.reset_offset_by_time(args.group, args.topic, args.timestamp_ms)
            _table(("QUEUE", "NEW_OFFSET"), [(mq.queue_id, o) for mq, o in sorted(offsets.items())])
    return 0


def _broker(args: argparse.Namespace) -> int:
    from scheduler import BrokerConfig, BrokerService, healthy_brokers

    if args.check:
        from mq.doctor import FAIL, check

        alive = healthy_brokers(args.url, args.namespace)
        print(f"healthy: {', '.join(alive)}" if alive else "no healthy broker service")
        failed = [f for f in check(args.url, args.namespace) if f.level == FAIL]
        for f in failed:
            print(f)
        return 0 if alive and not failed else 1
    options: dict[str, Any] = {"sync_replicas": args.sync_replicas, "sync_replicas_timeout_ms": args.sync_replicas_timeout_ms}
    if args.delay_levels:
        options["message_delay_level"] = args.delay_levels
    if args.retention_h:
        options["file_reserved_time_h"] = args.retention_h
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with BrokerService(args.url, args.namespace, BrokerConfig(**options)) as service:
        if args.metrics_port:
            from scheduler.metrics import serve_metrics

            serve_metrics(args.metrics_port, args.url, args.namespace, health_timeout_s=service.config.health_timeout_s,
                          addr=args.metrics_addr)  # fmt: skip
            print(f"metrics on http://{args.metrics_addr}:{args.metrics_port}/metrics", flush=True)
        print(f"{service!r} running; Ctrl-C to stop", flush=True)
        stop.wait()
    return 0


def _dlq(args: argparse.Namespace) -> int:
    _warn_if_memory(args.url)
    with Admin(args.url, args.namespace) as admin:
        if args.action == "list":
            for m in admin.dlq_messages(args.group, max_num=args.max_num):
                print(json.dumps(message_dict(m) | {"system_properties": m.system_properties}, ensure_ascii=False))
        else:
            print(f"resent {admin.resend_dlq(args.group, msg_ids=args.msg_ids)} message(s)")
    return 0


def _analytics(args: argparse.Namespace) -> int:
    try:
        from spark.jobs import cli as jobs
    except ImportError:
        print("mq: error: Spark analytics need the extra: pip install 'rocketredis[spark]' (and Java 17)", file=sys.stderr)
        return 1
    url = resolve_url(args.url)
    return jobs.main([args.job, "--url", url, "--namespace", args.namespace, "--out", args.out, *args.job_args])


def _tx(args: argparse.Namespace) -> int:
    _warn_if_memory(args.url)
    with Admin(args.url, args.namespace) as admin:
        for m in admin.discarded_transactions(args.topic):
            print(json.dumps(message_dict(m) | {"system_properties": m.system_properties}, ensure_ascii=False))
    return 0


def _send(args: argparse.Namespace) -> int:
    from mq.producer import SelectMessageQueueByHash

    props = dict(p.split("=", 1) for p in args.property if "=" in p)
    msg = Message(args.topic, args.body.encode(), tags=args.tags, keys=args.keys, properties=props)
    with Producer("mq-cli", args.url, namespace=args.namespace) as producer:
        selector = SelectMessageQueueByHash() if args.sharding_key else None
        r = producer.send(msg, selector=selector, arg=args.sharding_key)
    print(f"{r.status.value} msg_id={r.msg_id} queue={r.message_queue.queue_id} offset={r.queue_offset}")
    return 0


def _query(args: argparse.Namespace) -> int:
    _warn_if_memory(args.url)
    with Admin(args.url, args.namespace) as admin:
        if args.msg_id:
            found = admin.query_message(args.topic, args.msg_id)
            messages = [found] if found else []
        else:
            messages = admin.query_messages_by_key(args.topic, args.key, max_num=args.max_num)
    for m in messages:
        print(json.dumps(message_dict(m), ensure_ascii=False))
    if not messages:
        print("no message found", file=sys.stderr)
        return 1
    return 0


def message_dict(m: MessageExt) -> dict[str, Any]:
    """A JSON-friendly view of a message (body as text when it is UTF-8, else hex)."""
    try:
        body: str = m.body.decode()
    except UnicodeDecodeError:
        body = "hex:" + m.body.hex()
    return {
        "msg_id": m.msg_id, "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "tags": m.tags, "keys": list(m.keys), "properties": m.properties, "body": body,
        "born_timestamp_ms": m.born_timestamp_ms, "store_timestamp_ms": m.store_timestamp_ms,
        "reconsume_times": m.reconsume_times,
    }  # fmt: skip


def _warn_if_memory(url: str | None) -> None:
    if resolve_url(url).startswith("memory://"):
        print(f"note: {mask_url(resolve_url(url))} is an in-process store and empty in a new command; "
              "pass --url redis://… or set MQ_URL", file=sys.stderr)  # fmt: skip


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _doctor(args: argparse.Namespace) -> int:
    from mq.doctor import run

    return run(args.url, args.namespace, acl_user=args.acl_user)


_HANDLERS = {"topic": _topic, "group": _group, "broker": _broker, "dlq": _dlq, "tx": _tx, "analytics": _analytics,
             "send": _send, "query": _query, "doctor": _doctor}  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
