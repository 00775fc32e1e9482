"""``mq tier status [TOPIC]``: what the tier holds of each queue, and what Redis holds."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_family, add_leaf, admin, print_table, warn_if_memory


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq tier``."""
    actions = add_family(commands, "tier", "tiered storage: what the tier and Redis hold of each queue")
    status = add_leaf(
        actions,
        "status",
        _status,
        "per queue: tiered offsets [MIN, END), segments and bytes; Redis's offsets [FIRST, MAX); messages not tiered yet",
        common,
    )
    status.add_argument("topic", nargs="?", default=None, help="topic name (default: every topic)")


def _status(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    rows = []
    with admin(args) as a:
        print(f"tier: {a.tier_url() or 'none (the broker service runs without tier_url)'}")
        topics = [args.topic] if args.topic else [c.name for c in a.topics()]
        for name in topics:
            tiers, stats = a.tier_status(name), a.topic_status(name)
            for mq, t in sorted(tiers.items()):
                s = stats[mq]
                hot_first = max(t.tiered_end_offset, s.min_offset)
                rows.append(
                    (name, mq.queue_id, t.tiered_min_offset, t.tiered_end_offset, t.segments, t.bytes, hot_first, s.max_offset,
                     s.max_offset - t.tiered_end_offset)
                )  # fmt: skip
    print_table(("TOPIC", "QUEUE", "TIER_MIN", "TIER_END", "SEGMENTS", "BYTES", "HOT_FIRST", "MAX", "NOT_TIERED"), rows)
    return 0
