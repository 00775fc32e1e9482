"""What every ``mq`` command shares: the connection options, leaf registration and output helpers.

A command family (``topic``, ``group``, …) is a module with ``register(commands, common)``: it adds
its parser to ``commands`` and one leaf per action with :func:`add_leaf`, each leaf taking the
shared options through ``parents=[common]`` and naming its handler with ``set_defaults(func=…)``.
Help texts state their defaults (``%(default)s`` where argparse knows the value);
tests/cli/test_cli.py walks the parser to keep it so.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from mq.model.message import MessageExt
from mq.model.times import iso_ms
from mq.operator.admin import Admin
from mq.store.connection import mask_url, resolve_url

#: A leaf command's handler: parsed arguments in, exit code out.
Handler: TypeAlias = Callable[[argparse.Namespace], int]
#: What ``add_subparsers`` returns.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def connection_options(
    *, namespace_default: str | None = "mq", namespace_help: str = "key prefix of the deployment (default: %(default)s)"
) -> argparse.ArgumentParser:
    """The parent parser of every leaf: ``--url`` and ``--namespace`` (a command with a namespace of
    its own, ``mq demo``, passes its default and help)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    group.add_argument(
        "--url",
        default=None,
        help="store URL: redis://, rediss://, redis+cluster://, redis+sentinel:// or memory:// (default: $MQ_URL, "
        "else memory://, an in-process store that lives as long as the command)",
    )
    group.add_argument("--namespace", default=namespace_default, help=namespace_help)
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


def warn_if_memory(url: str | None, *, writes: bool = False) -> None:
    """Warn on stderr when the command runs on the embedded ``memory://`` store: a read sees nothing
    another command wrote; a write (``writes=True``) is lost when the command ends."""
    resolved = resolve_url(url)
    if not resolved.startswith("memory://"):
        return
    if writes:
        print(
            f"warning: {mask_url(resolved)} is an in-process store: nothing this command writes persists "
            "after it ends; pass --url redis://… or set MQ_URL",
            file=sys.stderr,
        )
    else:
        print(
            f"note: {mask_url(resolved)} is an in-process store and empty in a new command; pass --url redis://… or set MQ_URL",
            file=sys.stderr,
        )


#: What the help of an option that takes a time says about the forms it accepts.
TIME_FORMS = "ISO 8601 (2026-05-01T09:30:00+08:00, or without a zone: local time) or epoch ms"


def parse_time_ms(text: str) -> int:
    """A time given on the command line as epoch ms (digits) or ISO 8601 (with a zone, or naive = the
    local time zone), as epoch ms; an :class:`argparse.ArgumentTypeError` saying the accepted forms
    otherwise."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        return iso_ms(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a time as {TIME_FORMS}, got {text!r}") from None


def add_raw_ms(parser: argparse.ArgumentParser) -> None:
    """The ``--raw-ms`` option of commands that print times."""
    parser.add_argument(
        "--raw-ms",
        action="store_true",
        help="print times as epoch ms (default: ISO 8601 in the local time zone, with its offset)",
    )


def parse_property(text: str) -> tuple[str, str]:
    """A ``NAME=VALUE`` option as a pair; an :class:`argparse.ArgumentTypeError` for anything else."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print ``rows`` under ``header`` in left-aligned columns."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
