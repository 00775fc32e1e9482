"""``mq send`` and ``mq query``: one message in, messages out."""

from __future__ import annotations

import argparse
import json
import sys

from mq.cli.common import Commands, add_leaf, admin, message_dict, warn_if_memory
from mq.message import Message
from mq.producer import Producer, SelectMessageQueueByHash

#: Messages ``mq query --key`` prints unless told otherwise.
DEFAULT_QUERY_MAX = 64


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq send`` and ``mq query``."""
    send = add_leaf(commands, "send", _send, "send one message", common)
    send.add_argument("topic", help="topic to send to")
    send.add_argument("body", help="message body (UTF-8 text)")
    send.add_argument("--tags", default=None, help="the message's tag (default: none)")
    send.add_argument("--keys", default=None, help="business keys, separated by spaces (default: none)")
    send.add_argument(
        "--property", "-p", action="append", default=[], metavar="NAME=VALUE", help="a user property, repeatable (default: none)"
    )
    send.add_argument(
        "--sharding-key",
        default=None,
        help="send by hash of this key, for ordered messages (default: round robin over the queues)",
    )

    query = add_leaf(commands, "query", _query, "find messages by id or key", common)
    query.add_argument("topic", help="topic to search")
    how = query.add_mutually_exclusive_group(required=True)
    how.add_argument("--id", dest="msg_id", help="the message id (this or --key is required)")
    how.add_argument("--key", help="a business key (this or --id is required)")
    query.add_argument(
        "--max",
        type=int,
        default=DEFAULT_QUERY_MAX,
        dest="max_num",
        help="most messages printed for --key (default: %(default)s)",
    )


def _send(args: argparse.Namespace) -> int:
    props = dict(p.split("=", 1) for p in args.property if "=" in p)
    msg = Message(args.topic, args.body.encode(), tags=args.tags, keys=args.keys, properties=props)
    with Producer("mq-cli", args.url, namespace=args.namespace) as producer:
        selector = SelectMessageQueueByHash() if args.sharding_key else None
        r = producer.send(msg, selector=selector, arg=args.sharding_key)
    print(f"{r.status.value} msg_id={r.msg_id} queue={r.message_queue.queue_id} offset={r.queue_offset}")
    return 0


def _query(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        if args.msg_id:
            found = a.query_message(args.topic, args.msg_id)
            messages = [found] if found else []
        else:
            messages = a.query_messages_by_key(args.topic, args.key, max_num=args.max_num)
    for m in messages:
        print(json.dumps(message_dict(m), ensure_ascii=False))
    if not messages:
        print("no message found", file=sys.stderr)
        return 1
    return 0
