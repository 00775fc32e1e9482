"""The console's Jinja2 environment: templates shipped in ``mq/console/templates`` (autoescaped), and
the filters pages use to show times, lags and sizes the same way everywhere."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from starlette.templating import Jinja2Templates

#: Where the page templates are (package data).
TEMPLATE_DIR = Path(__file__).parent / "templates"
#: Where the CSS, JavaScript and vendored htmx / uPlot files are (package data, served at ``/static``).
STATIC_DIR = Path(__file__).parent / "static"


def format_ms(ms: int | None) -> str:
    """An epoch-ms time as ``2026-11-23 21:33:35.120 UTC``; ``never`` for None or 0 (nothing stored yet)."""
    if not ms:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def iso_ms(ms: int | None) -> str:
    """An epoch-ms time as ISO 8601 in UTC (``2026-11-23T21:33:35Z``), for form fields; empty for None."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_lag(lag: int | None) -> str:
    """A lag in messages; ``unknown`` when it cannot be known (never 0 or -1 for that)."""
    return "unknown" if lag is None else f"{lag:,}"


def format_rate(per_s: float | None) -> str:
    """Messages per second with two decimals; ``unknown`` without a broker service's snapshots."""
    return "unknown" if per_s is None else f"{per_s:,.2f}"


def format_bytes(size: int) -> str:
    """A size in bytes, KiB or MiB."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024 / 1024:.1f} MiB"


def message_url(topic: str, msg_id: str) -> str:
    """The path of a message's page, every character of the id that means something in a URL (``/``,
    ``?``, ``#``, ``%``, …) percent-encoded; in the query (``/messages/TOPIC/?id=..``) when the id is
    ``.`` or ``..``, which a browser would resolve as a path step however it is encoded."""
    if msg_id in (".", ".."):
        return f"/messages/{quote(topic, safe='')}/?" + urlencode({"id": msg_id})
    return f"/messages/{quote(topic, safe='')}/{quote(msg_id, safe='')}"


def message_field_url(topic: str, msg_id: str, name: str) -> str:
    """The API path that downloads one field of a message whole (a page cuts long ones, D99)."""
    query = {"field": name} if msg_id not in (".", "..") else {"id": msg_id, "field": name}
    path_id = "" if msg_id in (".", "..") else quote(msg_id, safe="")
    return f"/api/topics/{quote(topic, safe='')}/messages/{path_id}?" + urlencode(query)


def make_templates() -> Jinja2Templates:
    """The console's templates with its filters registered."""
    templates = Jinja2Templates(directory=str(TEMPLATE_DIR))
    env = templates.env
    env.filters.update(ms=format_ms, iso=iso_ms, lag=format_lag, rate=format_rate, size=format_bytes)
    env.globals["message_url"] = message_url
    env.globals["message_field_url"] = message_field_url
    env.trim_blocks = True
    env.lstrip_blocks = True
    return templates
