"""What every ``mq`` command shares: the connection options, leaf registration and output helpers.

A command family (``topic``, ``group``, …) is a module with ``register(commands, common)``: it adds
its parser to ``commands`` and one leaf per action with :func:`add_leaf`, each leaf taking the
shared options through ``parents=[common]`` and naming its handler with ``set_defaults(func=…)``.
Help texts state their defaults (``%(default)s`` where argparse knows the value);
tests/test_cli.py walks the parser to keep it so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from mq.admin import Admin
from mq.connection import mask_url, resolve_url
from mq.message import MessageExt

#: A leaf command's handler: parsed arguments in, exit code out.
Handler: TypeAlias = Callable[[argparse.Namespace], int]
#: What ``add_subparsers`` returns.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def connection_options() -> argparse.ArgumentParser:
    """The parent parser of every leaf: ``--url`` and ``--namespace``."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    group.add_argument(
        "--url",
        default=None,
        help="store URL: redis://, rediss://, redis+cluster:// or memory:// (default: $MQ_URL, "
        "else memory://, an in-process store that lives as long as the command)",
    )
    group.add_argument("--namespace", default="mq", help="key prefix of the deployment (default: %(default)s)")
    return common


def add_family(commands: Commands, name: str, help_text: str) -> Commands:
    """A command with subcommands (``mq NAME ACTION``); returns where its actions go."""
    family = commands.add_parser(name, help=help_text, description=help_text)
    return family.add_subparsers(dest="action", required=True, metavar="ACTION", title="actions")


def add_leaf(
    commands: Commands, name: str, handler: Handler, help_text: str, common: argparse.ArgumentParser, **kwargs: Any
) -> argparse.ArgumentParser:
    """A command that runs ``handler``, with the shared options of ``common``; returns it to add options."""
    leaf = commands.add_parser(name, help=help_text, description=help_text, parents=[common], **kwargs)
    leaf.set_defaults(func=handler)
    return leaf


def admin(args: argparse.Namespace) -> Admin:
    """The Admin of the store and namespace the command names."""
    return Admin(args.url, args.namespace)


def message_dict(m: MessageExt) -> dict[str, Any]:
    """A JSON-friendly view of a message (body as text when it is UTF-8, else hex)."""
    try:
        body: str = m.body.decode()
    except UnicodeDecodeError:
        body = "hex:" + m.body.hex()
    return {
        "msg_id": m.msg_id,
        "topic": m.topic,
        "queue_id": m.queue_id,
        "queue_offset": m.queue_offset,
        "tags": m.tags,
        "keys": list(m.keys),
        "properties": m.properties,
        "body": body,
        "born_timestamp_ms": m.born_timestamp_ms,
        "store_timestamp_ms": m.store_timestamp_ms,
        "reconsume_times": m.reconsume_times,
    }


def print_json_lines(messages: Sequence[MessageExt]) -> None:
    """One JSON object per message, with its system properties (dead letters, discarded half messages)."""
    for m in messages:
        print(json.dumps(message_dict(m) | {"system_properties": m.system_properties}, ensure_ascii=False))


def warn_if_memory(url: str | None) -> None:
    """Tell the user that a read on the embedded store sees nothing another command wrote."""
    if resolve_url(url).startswith("memory://"):
        print(
            f"note: {mask_url(resolve_url(url))} is an in-process store and empty in a new command; "
            "pass --url redis://… or set MQ_URL",
            file=sys.stderr,
        )


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print ``rows`` under ``header`` in left-aligned columns."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
