"""``mq``: administer topics, send and query messages, run the broker service and the demo.

The parser is assembled from one module per command family (:data:`FAMILIES`); each leaf command
names its handler with ``set_defaults(func=…)`` and takes ``--url`` (default ``$MQ_URL``, else the
embedded ``memory://`` store, which lives only as long as the command) and ``--namespace`` through
a shared parent parser (:func:`mq.cli.common.connection_options`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import mq
from mq.cli import analytics, broker, console, demo, dlq, doctor, group, message, proxy, recall, stats, tier, topic, trace, tx
from mq.cli.common import Handler, connection_options
from mq.errors import MQError

#: The command families, in the order ``mq --help`` lists them; each has ``register(commands, common)``.
FAMILIES = (demo, topic, message, recall, group, stats, trace, broker, tier, proxy, doctor, dlq, analytics, tx, console)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mq``."""
    parser = argparse.ArgumentParser(prog="mq", description="rocketredis: RocketMQ's messaging model on Redis")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {mq.__version__}", help="print the package version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    common = connection_options()
    for family in FAMILIES:
        family.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mq`` with ``argv``; returns the exit code."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except MQError as e:
        print(f"mq: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
