"""``mq stats``: messages in and out per topic and per group over the last minute [mqadmin statsAll]."""

from __future__ import annotations

import argparse
import json

from mq.cli.common import Commands, add_leaf, admin, print_table, warn_if_memory
from mq.model.times import format_ms
from mq.operator.admin import STATS_WINDOW_S
from mq.operator.rates import STATS_HISTORY_S, Rates


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq stats``."""
    stats = add_leaf(
        commands,
        "stats",
        _stats,
        "messages stored per topic (in) and consumed per group (out) over the last minute [mqadmin statsAll]; "
        "needs a broker service (mq broker) running for that long",
        common,
    )
    stats.add_argument(
        "--window-s",
        type=float,
        default=STATS_WINDOW_S,
        help=f"the window, seconds, at most {STATS_HISTORY_S:g} (default: %(default)s)",
    )
    stats.add_argument("--json", action="store_true", help="print one JSON object (default: tables)")


def _stats(args: argparse.Namespace) -> int:
    warn_if_memory(args.url)
    with admin(args) as a:
        rates = a.stats(window_s=args.window_s)
    if rates is None:
        print(
            f"unknown: no broker service has taken stats snapshots over the last {args.window_s:g} s "
            "(run `mq broker` against this store and namespace, and wait that long)"
        )
        return 1
    if args.json:
        print(json.dumps(_as_dict(rates)))
        return 0
    print(f"over {rates.window_s:.1f} s, from {format_ms(rates.since_ms)} to {format_ms(rates.until_ms)}")
    print_table(("TOPIC", "IN", "IN_PER_S"), [(t, r.count, f"{r.per_s:.2f}") for t, r in rates.topics_in.items()])
    print()
    print_table(("GROUP", "OUT", "OUT_PER_S"), [(g, r.count, f"{r.per_s:.2f}") for g, r in rates.groups_out.items()])
    print()
    print_table(
        ("GROUP", "TOPIC", "OUT", "OUT_PER_S"),
        [(g, t, r.count, f"{r.per_s:.2f}") for (g, t), r in rates.group_topics_out.items()],
    )
    return 0


def _as_dict(rates: Rates) -> dict[str, object]:
    return {
        "since_ms": rates.since_ms,
        "until_ms": rates.until_ms,
        "window_s": rates.window_s,
        "topics_in": {t: {"count": r.count, "per_s": r.per_s} for t, r in rates.topics_in.items()},
        "groups_out": {g: {"count": r.count, "per_s": r.per_s} for g, r in rates.groups_out.items()},
        "group_topics_out": [
            {"group": g, "topic": t, "count": r.count, "per_s": r.per_s} for (g, t), r in rates.group_topics_out.items()
        ],
    }
