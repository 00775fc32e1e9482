"""``mq topic create|update|delete|list|lite|status|recover``."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_family, add_leaf, add_raw_ms, admin, print_table, warn_if_memory
from mq.model.times import format_ms
from mq.model.topic import DEFAULT_DEDUP_WINDOW_S, DEFAULT_QUEUE_NUMS, TopicConfig

PERMS = ("rw", "r", "w")


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq topic`` and its actions."""
    actions = add_family(commands, "topic", "create, update, delete, list, recover topics and show their queues")
    create = add_leaf(actions, "create", _create, "create a topic (or update it when it exists, as mqadmin updateTopic)", common)
    create.add_argument("topic", help="topic name")
    create.add_argument(
        "--read-queues", type=int, default=DEFAULT_QUEUE_NUMS, help="queues consumers read (default: %(default)s)"
    )
    create.add_argument(
        "--write-queues", type=int, default=DEFAULT_QUEUE_NUMS, help="queues producers write (default: %(default)s)"
    )
    create.add_argument("--perm", choices=PERMS, default="rw", help="r: readable, w: writable (default: %(default)s)")
    create.add_argument("--order", action="store_true", help="mark the topic as ordered (default: not ordered)")
    create.add_argument(
        "--dedup-window-s",
        type=int,
        default=DEFAULT_DEDUP_WINDOW_S,
        help="how long a message's dedup id is remembered, seconds (default: %(default)s)",
    )
    create.add_argument("--lite", action="store_true", help="a parent of lite topics, created on first send (default: no)")
    create.add_argument(
        "--lite-expiration-s", type=int, default=None, help="a lite topic expires this long after its last write (default: 600)"
    )
    create.add_argument(
        "--priority-levels",
        type=int,
        default=None,
        help="make a priority topic of N levels, 2..10: messages of priority 0..9 go to the queues of their "
        "level, consumers take higher levels first; needs at least N queues (default: no priority)",
    )

    update = add_leaf(actions, "update", _update, "change an existing topic's queue counts, perm or dedup window", common)
    update.add_argument("topic", help="topic name")
    update.add_argument("--read-queues", type=int, default=None, help="queues consumers read (default: unchanged)")
    update.add_argument("--write-queues", type=int, default=None, help="queues producers write (default: unchanged)")
    update.add_argument("--perm", choices=PERMS, default=None, help="r: readable, w: writable (default: unchanged)")
    update.add_argument(
        "--dedup-window-s",
        type=int,
        default=None,
        help="how long a message's dedup id is remembered, seconds (default: unchanged)",
    )

    delete = add_leaf(actions, "delete", _delete, "delete a topic and every message it stores", common)
    delete.add_argument("topic", help="topic name")
    add_leaf(actions, "list", _list, "list the topics of the namespace", common)
    status = add_leaf(actions, "status", _status, "show each queue's offsets [MIN, MAX) (half-open) and last store time", common)
    status.add_argument("topic", help="topic name")
    add_raw_ms(status)
    lite = add_leaf(actions, "lite", _lite, "list the live lite topics of a lite parent, by prefix, a page at a time", common)
    lite.add_argument("topic", help="the lite parent")
    lite.add_argument("--prefix", default="", help="only lite topics whose names start with this (default: all)")
    lite.add_argument("--count", type=int, default=100, help="about this many names a page (default: %(default)s)")
    lite.add_argument("--cursor", type=int, default=0, help="the cursor a previous page printed (default: the first page)")
    recover = add_leaf(
        actions,
        "recover",
        _recover,
        "rebuild topic configs and queue metas Redis evicted (maxmemory-policy other than noeviction) "
        "from the stored queue streams; offsets are never lowered (see docs/operations.md, Eviction)",
        common,
    )
    recover.add_argument("topic", nargs="*", help="topics to recover (default: every topic with a stored queue)")


def _describe(verb: str, c: TopicConfig) -> None:
    lite = f" lite (expires after {c.lite_expiration_ms // 1000} s idle)" if c.lite else ""
    levels = f" priority_levels={c.priority_levels}" if c.priority_levels else ""
    print(
        f"{verb} {c.name}: read_queues={c.read_queues} write_queues={c.write_queues} perm={c.perm} "
        f"dedup_window_s={c.dedup_window_s}{levels}{lite}"
    )


def _create(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    queues = {"read_queues": args.read_queues, "write_queues": args.write_queues}
    with admin(args) as a:
        existed = a.topic_exists(args.topic)
        lite = {"lite": True, "lite_expiration_s": args.lite_expiration_s} if args.lite else {}
        config = a.create_topic(
            args.topic,
            **queues,
            perm=args.perm,
            order=args.order,
            priority_levels=args.priority_levels,
            dedup_window_s=args.dedup_window_s,
            **lite,
        )
    _describe("updated" if existed else "created", config)
    return 0


def _update(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    queues = {"read_queues": args.read_queues, "write_queues": args.write_queues}
    with admin(args) as a:
        _describe("updated", a.update_topic(args.topic, **queues, perm=args.perm, dedup_window_s=args.dedup_window_s))
    return 0


def _delete(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        a.delete_topic(args.topic)
    print(f"deleted {args.topic}")
    return 0


def _list(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        topics = a.topics()
    print_table(
        ("TOPIC", "READ", "WRITE", "PERM", "ORDER", "DEDUP_S", "PRIORITY_LEVELS"),
        [
            (c.name, c.read_queues, c.write_queues, c.perm, "yes" if c.order else "", c.dedup_window_s, c.priority_levels or "")
            for c in topics
        ],
    )
    return 0


def _lite(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        page = a.list_lite_topics(args.topic, args.prefix, cursor=args.cursor, count=args.count)
    for name in page.names:
        print(name)
    print(f"next page: --cursor {page.cursor}" if page.cursor else "(last page)")
    return 0


def _status(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        status = a.topic_status(args.topic)
    print_table(
        ("QUEUE", "MIN", "MAX", "STORED", "LAST_STORE_MS" if args.raw_ms else "LAST_STORE_TIME"),
        [
            (
                mq.queue_id,
                s.min_offset,
                s.max_offset,
                s.stored,
                format_ms(s.last_store_timestamp_ms, raw=args.raw_ms),
            )
            for mq, s in sorted(status.items())
        ],
    )
    return 0


def _recover(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        done = a.recover_topics(args.topic or None)
    print_table(
        ("TOPIC", "CONFIG", "QUEUES_RESTORED"),
        [(r.topic, "rebuilt" if r.config_rebuilt else "kept", ",".join(map(str, r.queues_restored)) or "-") for r in done],
    )
    return 0
