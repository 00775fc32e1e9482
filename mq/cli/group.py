"""``mq group list|progress|connections|reset-offset``: consumer groups.

A new group action is one more ``add_leaf`` in :func:`register` and its handler here.
"""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_family, add_leaf, admin, print_table, warn_if_memory


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq group`` and its actions."""
    actions = add_family(commands, "group", "consumer groups: list, progress (lag), connections, reset offsets")
    add_leaf(actions, "list", _list, "list the groups and their live member counts", common)
    progress = add_leaf(actions, "progress", _progress, "broker offset, consumer offset and lag per queue", common)
    progress.add_argument("group", help="consumer group")
    progress.add_argument("--topic", default=None, help="only this topic (default: every topic of the group)")
    connections = add_leaf(actions, "connections", _connections, "the group's live members and their subscriptions", common)
    connections.add_argument("group", help="consumer group")
    reset = add_leaf(actions, "reset-offset", _reset_offset, "move a (stopped) group's offsets to a time", common)
    reset.add_argument("group", help="consumer group")
    reset.add_argument("topic", help="topic whose offsets move")
    reset.add_argument("--timestamp-ms", type=int, required=True, help="epoch ms; 0 means from the beginning (required)")


def _list(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        print_table(("GROUP", "MEMBERS"), [(g, len(a.consumer_connections(g))) for g in a.groups()])
    return 0


def _progress(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        rows = a.consumer_progress(args.group, args.topic)
    print_table(
        ("TOPIC", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG"),
        [(r.message_queue.topic, r.message_queue.queue_id, r.broker_offset, r.consumer_offset, r.lag) for r in rows],
    )
    print(f"total lag: {sum(r.lag for r in rows)}")
    return 0


def _connections(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        members = a.consumer_connections(args.group)
    print_table(
        ("CLIENT_ID", "HOST", "PID", "MODEL", "KIND", "SUBSCRIPTIONS", "LAST_HEARTBEAT_MS"),
        [
            (
                c.client_id,
                c.host,
                c.pid,
                c.message_model,
                c.kind,
                ";".join(f"{t}={e}" for t, e in sorted(c.subscriptions.items())),
                c.last_heartbeat_ms,
            )
            for c in members
        ],
    )
    return 0


def _reset_offset(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        offsets = a.reset_offset_by_time(args.group, args.topic, args.timestamp_ms)
    print_table(("QUEUE", "NEW_OFFSET"), [(mq.queue_id, o) for mq, o in sorted(offsets.items())])
    return 0
