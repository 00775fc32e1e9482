"""``mq tx list``: transactions."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_family, add_leaf, admin, print_json_lines, warn_if_memory


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq tx`` and its actions."""
    actions = add_family(commands, "tx", "transactions: list half messages rolled back after too many checks")
    listing = add_leaf(actions, "list", _list, "print discarded half messages, one JSON object a line", common)
    listing.add_argument("--topic", default=None, help="only this topic (default: every topic)")


def _list(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        print_json_lines(a.discarded_transactions(args.topic))
    return 0
