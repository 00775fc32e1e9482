"""``mq dlq list|resend|purge``: dead-letter queues."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_family, add_leaf, admin, print_json_lines, warn_if_memory

#: Dead letters ``mq dlq list`` prints unless told otherwise.
DEFAULT_LIST_MAX = 64


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq dlq`` and its actions."""
    actions = add_family(commands, "dlq", "dead-letter queues: list, resend to their group, purge")
    listing = add_leaf(
        actions, "list", _list, "a group's oldest dead letters, one JSON object a line (RESENT once resent)", common
    )
    listing.add_argument("group", help="consumer group whose dead letters to show")
    listing.add_argument(
        "--max", type=int, default=DEFAULT_LIST_MAX, dest="max_num", help="most letters printed (default: %(default)s)"
    )
    resend = add_leaf(actions, "resend", _resend, "deliver a group's dead letters again, to that group only, once each", common)
    resend.add_argument("group", help="consumer group whose dead letters to resend")
    resend.add_argument(
        "--id",
        action="append",
        dest="msg_ids",
        default=None,
        help="only this msg id, repeatable (default: every letter not resent before)",
    )

    purge = add_leaf(actions, "purge", _purge, "remove every dead letter of a group", common)
    purge.add_argument("group", help="consumer group whose dead letters to remove")


def _list(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        print_json_lines(a.dlq_messages(args.group, max_num=args.max_num))
    return 0


def _resend(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        print(f"resent {a.resend_dlq(args.group, msg_ids=args.msg_ids)} message(s)")
    return 0


def _purge(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with admin(args) as a:
        print(f"removed {a.purge_dlq(args.group)} dead letter(s) of group {args.group}")
    return 0
