"""``mq recall``: remove a delayed or timer message before it is due."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_leaf, warn_if_memory
from mq.producer import Producer

#: Exit status of ``mq recall`` when there was nothing to recall (delivered already, or unknown):
#: apart from 1 (an error) so a script can tell "too late" from "failed".
NOT_RECALLED = 3


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq recall``."""
    leaf = add_leaf(
        commands,
        "recall",
        _recall,
        "remove a delayed or timer message before it is delivered (exit 0: removed; "
        f"{NOT_RECALLED}: delivered already or unknown; 1: error)",
        common,
    )
    leaf.add_argument("handle", help="the recall_handle `mq send --deliver-at` (or SendResult.recall_handle) gave")


def _recall(args: argparse.Namespace) -> int:
    warn_if_memory(args.url, writes=True)
    with Producer("mq-cli", args.url, namespace=args.namespace) as producer:
        recalled = producer.recall(args.handle)
    if recalled:
        print("recalled: it was still scheduled and will not be delivered")
        return 0
    print("not recalled: it was delivered already, or recalled already, or the handle names no stored message")
    return NOT_RECALLED
