"""``mq doctor``: check the store a deployment points at (see :mod:`mq.operator.doctor`)."""

from __future__ import annotations

import argparse

from mq.cli.common import Commands, add_leaf


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq doctor``."""
    help_text = (
        "check the store: eviction policy, persistence, replicas and lag, sentinel quorum, cluster slots, "
        "version, ACL; one OK/WARN/FAIL line each, exit 1 on a FAIL"
    )
    d = add_leaf(commands, "doctor", _doctor, help_text, common)
    d.add_argument(
        "--acl-user",
        default=None,
        help="check this ACL user's commands (run as an admin) (default: the user of the URL)",
    )


def _doctor(args: argparse.Namespace) -> int:
    from mq.operator.doctor import run

    return run(args.url, args.namespace, acl_user=args.acl_user)
