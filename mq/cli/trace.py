"""``mq trace TOPIC MSG_ID`` and ``mq trace --enable|--disable``: the message trace [mqadmin
queryMsgTraceById]."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_leaf, add_raw_ms, admin, print_table, warn_if_memory
from mq.model.times import format_ms


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq trace``."""
    leaf = add_leaf(
        commands, "trace", _trace, "what happened to a message: its send, each group's consumptions and retries", common
    )
    leaf.add_argument("topic", nargs="?", help="the topic the message was sent to")
    leaf.add_argument("msg_id", nargs="?", help="the message id")
    switch = leaf.add_mutually_exclusive_group()
    switch.add_argument(
        "--enable",
        dest="enabled",
        action="store_const",
        const=True,
        help="record traces for every producer and consumer of the namespace, seen within 30 s "
        "(default: off; clients may also pass trace=True)",
    )
    switch.add_argument(
        "--disable",
        dest="enabled",
        action="store_const",
        const=False,
        help="stop recording traces for the namespace; clients with trace=True go on (default: off)",
    )
    add_raw_ms(leaf)


def _trace(args: argparse.Namespace) -> int:
    if args.enabled is not None:
        return _switch(args)
    if not (args.topic and args.msg_id):
        raise SystemExit("mq trace: give TOPIC and MSG_ID, or --enable / --disable")
    warn_if_memory(args.url)
    with admin(args) as a:
        events = a.message_trace(args.topic, args.msg_id)
    if not events:
        print(f"no trace of {args.msg_id} in {args.topic} (tracing off when it was sent and consumed?)")
        return 1
    print_table(
        ("TIME_MS" if args.raw_ms else "TIME", "EVENT", "GROUP", "CLIENT", "HOST", "COST_MS", "STATUS", "ATTEMPT", "WHERE"),
        [
            (
                format_ms(e.time_ms, raw=args.raw_ms),
                e.kind,
                e.group,
                e.client_id,
                e.host,
                e.cost_ms,
                e.status,
                e.attempt,
                f"{e.topic}:{e.queue_id}@{e.offset}",
            )
            for e in events
        ],
    )
    return 0


def _switch(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        a.set_trace(args.enabled)
    print(f"message trace {'on' if args.enabled else 'off'} for namespace {args.namespace}")
    return 0
