"""The ``mq`` command line."""

from mq.cli.main import main

__all__ = ["main"]
