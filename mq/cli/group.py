"""``mq group list|progress|connections|reset-offset|create|update|delete|show``: consumer groups.

A new group action is one more ``add_leaf`` in :func:`register` and its handler here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from mq.cli.common import (
    TIME_FORMS,
    Commands,
    add_family,
    add_leaf,
    add_raw_ms,
    admin,
    parse_time_ms,
    print_table,
    warn_if_memory,
)
from mq.consumer.types import ConsumeFromWhere
from mq.model.group import GroupConfig
from mq.model.times import format_ms


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq group`` and its actions."""
    actions = add_family(
        commands, "group", "consumer groups: list, progress (lag), connections, reset offsets, configs (create … show)"
    )
    add_leaf(actions, "list", _list, "list the groups and their live member counts", common)
    progress = add_leaf(
        actions, "progress", _progress, "broker offset, consumer offset, lag and messages lost to retention per queue", common
    )
    progress.add_argument("group", help="consumer group")
    progress.add_argument("--topic", default=None, help="only this topic (default: every topic of the group)")
    connections = add_leaf(actions, "connections", _connections, "the group's live members and their subscriptions", common)
    connections.add_argument("group", help="consumer group")
    add_raw_ms(connections)
    status = add_leaf(actions, "status", _status, "members' runtime state per queue [mqadmin consumerStatus]", common)
    status.add_argument("group", help="consumer group")
    add_raw_ms(status)
    reset = add_leaf(
        actions,
        "reset-offset",
        _reset_offset,
        "move a group's offsets to a time (running members follow within a second)",
        common,
    )
    reset.add_argument("group", help="consumer group")
    reset.add_argument("topic", help="topic whose offsets move")
    when = reset.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--timestamp",
        type=parse_time_ms,
        dest="timestamp_ms",
        metavar="TIME",
        help=f"the time, as {TIME_FORMS}; 0 means from the beginning (this or --timestamp-ms is required)",
    )
    when.add_argument(
        "--timestamp-ms", type=int, dest="timestamp_ms", help="the time, epoch ms (this or --timestamp is required)"
    )
    reset.add_argument(
        "--force", action="store_true", help="reset a group the namespace does not know (default: refused, to catch typos)"
    )
    create = add_leaf(actions, "create", _create, "create or replace a group's config [mqadmin updateSubGroup]", common)
    create.add_argument("group", help="consumer group")
    _config_options(create, defaults=True)
    update = add_leaf(
        actions, "update", _update, "change some fields of a group's config (pause: --consume-enable false)", common
    )
    update.add_argument("group", help="consumer group")
    _config_options(update, defaults=False)
    delete = add_leaf(actions, "delete", _delete, "delete a group's config (its members keep their own settings)", common)
    delete.add_argument("group", help="consumer group")
    show = add_leaf(actions, "show", _show, "print a group's config as JSON", common)
    show.add_argument("group", help="consumer group")


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _config_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The GroupConfig fields as options; ``update`` leaves unset fields as they are."""
    d = GroupConfig("g")
    tail = "(default: %(default)s)" if defaults else "(default: unchanged)"

    def option(name: str, default: object, help_text: str, **kwargs: object) -> None:
        parser.add_argument(name, default=default if defaults else None, help=f"{help_text} {tail}", **kwargs)  # type: ignore[arg-type]

    option("--consume-enable", d.consume_enable, "false pauses every member within a second, true resumes", type=_bool)
    option("--retry-max-times", d.retry_max_times, "retries before the dead-letter queue", type=int)
    option(
        "--consume-from-where",
        d.consume_from_where.value,
        "where members start on queues without an offset",
        choices=[w.value for w in ConsumeFromWhere],
    )
    option("--fifo", d.fifo, "message groups consumed in order (RocketMQ 5 endpoint)", type=_bool)


def _fields(args: argparse.Namespace) -> dict[str, object]:
    names = ("consume_enable", "retry_max_times", "consume_from_where", "fifo")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _print_config(config: GroupConfig) -> None:
    print(json.dumps(dataclasses.asdict(config) | {"consume_from_where": config.consume_from_where.value}, indent=2))


def _create(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        _print_config(a.create_group(args.group, **_fields(args)))  # type: ignore[arg-type]
    return 0


def _update(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        _print_config(a.update_group(args.group, **_fields(args)))
    return 0


def _delete(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        existed = a.delete_group(args.group)
    print(f"deleted the config of group {args.group}" if existed else f"group {args.group} had no config")
    return 0 if existed else 1


def _show(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        _print_config(a.group_config(args.group))
    return 0


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
        ("TOPIC", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG", "EXPIRED"),
        [(r.message_queue.topic, r.message_queue.queue_id, r.broker_offset, r.consumer_offset, r.lag, r.expired) for r in rows],
    )
    print(f"total lag: {sum(r.lag for r in rows)}")
    expired = sum(r.expired for r in rows)
    if expired:
        print(f"expired: {expired} messages removed by retention before the group consumed them (lost to it)")
    return 0


def _connections(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        members = a.consumer_connections(args.group)
    print_table(
        ("CLIENT_ID", "HOST", "PID", "MODEL", "KIND", "SUBSCRIPTIONS", "LAST_HEARTBEAT_MS" if args.raw_ms else "LAST_HEARTBEAT"),
        [
            (
                c.client_id,
                c.host,
                c.pid,
                c.message_model,
                c.kind,
                ";".join(f"{t}={e}" for t, e in sorted(c.subscriptions.items())),
                format_ms(c.last_heartbeat_ms, raw=args.raw_ms),
            )
            for c in members
        ],
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        members = a.consumer_connections(args.group)
    rows = []
    for c in members:
        status = c.status or {}
        for queue, q in sorted((status.get("queues") or {}).items()):
            rows.append(
                (
                    c.client_id,
                    queue,
                    q.get("cached", 0),
                    q.get("cached_bytes", 0),
                    q.get("next_offset", -1),
                    q.get("committed", -1),
                    format_ms(q.get("last_pull_ms", 0), raw=args.raw_ms),
                )
            )
        if not status.get("queues"):
            rows.append((c.client_id, "-", 0, 0, "-", "-", "-"))
    last_pull = "LAST_PULL_MS" if args.raw_ms else "LAST_PULL"
    print_table(("CLIENT_ID", "QUEUE", "CACHED", "CACHED_BYTES", "NEXT_OFFSET", "COMMITTED", last_pull), rows)
    for c in members:
        status = c.status or {}
        paused = " (group paused)" if status.get("paused") else ""
        print(f"{c.client_id}: {c.kind}, {status.get('consume_tps', 0)} msg/s consumed{paused}")
    return 0


def _reset_offset(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        offsets = a.reset_offset_by_time(args.group, args.topic, args.timestamp_ms, force=args.force)
    print_table(("QUEUE", "NEW_OFFSET"), [(mq.queue_id, o) for mq, o in sorted(offsets.items())])
    return 0
