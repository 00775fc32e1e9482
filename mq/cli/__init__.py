"""The ``mq`` command line."""

from mq.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
