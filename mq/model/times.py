"""Times as people write them: ISO 8601 in and out, epoch milliseconds inside (the ``mq`` command
and the web console read and print times with these)."""

from __future__ import annotations

from datetime import datetime, tzinfo

__all__ = ["format_ms", "iso_ms"]


def iso_ms(text: str, *, naive: tzinfo | None = None) -> int:
    """Epoch ms of the ISO 8601 time ``text`` (``Z`` or an offset; without one it is in the zone
    ``naive``, None: the local time zone); ValueError when ``text`` is not ISO 8601."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.astimezone() if naive is None else moment.replace(tzinfo=naive)
    return round(moment.timestamp() * 1000)


def format_ms(ms: int | None, *, raw: bool = False) -> str:
    """Epoch ms ``ms`` as ISO 8601 in the local time zone with its offset (``2026-05-01T09:30:00.000+08:00``),
    or as the number with ``raw``; ``-`` for no time (None or ≤ 0)."""
    if ms is None or ms <= 0:
        return "-"
    if raw:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")
