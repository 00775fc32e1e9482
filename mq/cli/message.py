"""``mq send``, ``mq query`` and ``mq msg``: one message in, messages out."""

from __future__ import annotations

import argparse
import json
import sys

from mq.cli.common import (
    TIME_FORMS,
    Commands,
    add_leaf,
    admin,
    message_dict,
    parse_property,
    parse_time_ms,
    print_json_lines,
    warn_if_memory,
)
from mq.model.message import Message
from mq.operator.admin import MAX_RANGE_READ
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
        "--property",
        "-p",
        action="append",
        type=parse_property,
        default=[],
        metavar="NAME=VALUE",
        help="a user property, repeatable (default: none)",
    )
    send.add_argument(
        "--sharding-key",
        default=None,
        help="send by hash of this key, for ordered messages (default: round robin over the queues)",
    )
    send.add_argument(
        "--deliver-at",
        type=parse_time_ms,
        default=None,
        metavar="TIME",
        help=f"deliver it at TIME, {TIME_FORMS}; prints a recall_handle for `mq recall` (default: at once)",
    )
    send.add_argument(
        "--priority",
        type=int,
        default=0,
        help="0..9, higher first; needs a topic created with --priority-levels (default: %(default)s)",
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
    query.add_argument(
        "--begin",
        type=parse_time_ms,
        default=None,
        dest="begin_ms",
        metavar="TIME",
        help=f"with --key: only messages stored at or after this time, {TIME_FORMS} (default: no bound)",
    )
    query.add_argument(
        "--end",
        type=parse_time_ms,
        default=None,
        dest="end_ms",
        metavar="TIME",
        help=f"with --key: only messages stored at or before this time, {TIME_FORMS} (default: no bound)",
    )

    msg = add_leaf(
        commands,
        "msg",
        _msg,
        "print messages by queue and offset range [mqadmin queryMsgByOffset/printMsg], or by id; one JSON object a line",
        common,
        epilog="examples: mq msg orders --queue 0 --from 10 --to 20 (offsets 10 to 19); mq msg --id ID; "
        "mq msg --id ID --topic orders",
    )
    msg.add_argument("topic", nargs="?", default=None, help="the topic (needed with --queue; optional with --id)")
    msg.add_argument("--topic", dest="topic_option", default=None, help="the topic, as TOPIC (default: TOPIC)")
    msg.add_argument(
        "--id",
        dest="msg_id",
        default=None,
        help="print every stored copy of this message id; without TOPIC every topic's id index is searched "
        "(one lookup per queue of the namespace, retry and dead-letter topics included) (default: by offset)",
    )
    msg.add_argument("--queue", type=int, default=None, help="queue id, with --from/--to (default: none; needed without --id)")
    msg.add_argument("--from", type=int, default=0, dest="start", help="first offset printed (default: %(default)s)")
    msg.add_argument(
        "--to",
        type=int,
        default=None,
        dest="end",
        help="offset where printing stops, not printed: the range is half-open [from, to) (default: the queue's max offset)",
    )
    msg.add_argument(
        "--max",
        type=int,
        default=64,
        dest="max_num",
        help=f"most messages printed, up to {MAX_RANGE_READ} (default: %(default)s)",
    )


def _send(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    props = dict(args.property)
    msg = Message(
        args.topic,
        args.body.encode(),
        tags=args.tags,
        keys=args.keys,
        properties=props,
        deliver_time_ms=args.deliver_at,
        priority=args.priority,
    )
    with Producer("mq-cli", args.url, namespace=args.namespace) as producer:
        selector = SelectMessageQueueByHash() if args.sharding_key else None
        r = producer.send(msg, selector=selector, arg=args.sharding_key)
    recall = f" recall_handle={r.recall_handle}" if r.recall_handle else ""
    print(f"{r.status.value} msg_id={r.msg_id} queue={r.message_queue.queue_id} offset={r.queue_offset}{recall}")
    return 0


def _query(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        if args.msg_id:
            found = a.query_message(args.topic, args.msg_id)
            messages = [found] if found else []
        else:
            messages = a.query_messages_by_key(
                args.topic, args.key, max_num=args.max_num, begin_ms=args.begin_ms, end_ms=args.end_ms
            )
    for m in messages:
        print(json.dumps(message_dict(m), ensure_ascii=False))
    if not messages:
        print("no message found", file=sys.stderr)
        return 1
    return 0


def _msg(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    if args.topic and args.topic_option and args.topic != args.topic_option:
        print(f"mq: error: two topics given: {args.topic!r} and --topic {args.topic_option!r}", file=sys.stderr)
        return 2
    args.topic = args.topic or args.topic_option
    if args.msg_id is None and (args.topic is None or args.queue is None):
        print("mq: error: give TOPIC --queue N [--from A] [--to B], or --id ID [TOPIC]", file=sys.stderr)
        return 2
    with admin(args) as a:
        if args.msg_id is not None:
            messages = a.find_message(args.msg_id, args.topic)
        else:
            messages = a.messages(args.topic, args.queue, args.start, args.end, max_num=args.max_num)
    print_json_lines(messages)
    if not messages:
        print("no message found", file=sys.stderr)
        return 1
    return 0
