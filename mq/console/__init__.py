"""The web console (``mq console``, extra ``rocketredis[console]``): a Starlette app with a JSON API
under ``/api`` and HTML pages, over :class:`mq.Admin`. See docs/console.md."""

from __future__ import annotations

from mq.console.app import create_app

__all__ = ["create_app"]
