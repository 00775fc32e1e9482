"""A tier segment as the queue's manifest records it, and the manifest's invariants (sans-I/O).

A segment is one immutable Parquet file holding the messages of one queue at offsets
``[start, end)``. The manifest (``{ns:T:Q}:segments``, a sorted set scored by ``start``; see
:mod:`mq.keys`) lists a queue's segments: contiguous, no gap, no overlap, and its end is where Redis
still holds the rest (``record-segment-3.lua`` refuses anything else).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """One recorded segment.

    Attributes:
        start: first offset it holds.
        end: one past the last offset it holds.
        name: file name under the queue's folder (see :func:`mq.tier.location.queue_dir`).
        size_bytes: size of the file, bytes.
        min_store_ms: store time of its first message, epoch ms.
        max_store_ms: store time of its last message, epoch ms.
    """

    start: int
    end: int
    name: str
    size_bytes: int
    min_store_ms: int
    max_store_ms: int

    @property
    def messages(self) -> int:
        """Messages it holds (offsets are dense)."""
        return self.end - self.start

    def to_member(self) -> str:
        """The manifest member (compact JSON; Lua's cjson reads ``s`` and ``e``)."""
        return json.dumps(
            {
                "s": self.start,
                "e": self.end,
                "n": self.name,
                "b": self.size_bytes,
                "t0": self.min_store_ms,
                "t1": self.max_store_ms,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_member(cls, member: bytes | str) -> Segment:
        """The segment a manifest member describes."""
        d = json.loads(member)
        return cls(int(d["s"]), int(d["e"]), str(d["n"]), int(d["b"]), int(d["t0"]), int(d["t1"]))


def segment_name(start: int, end: int, token: str) -> str:
    """The final file name of a segment: offsets zero-padded (names sort by offset) and a token unique to
    the upload, so a re-upload of the same range after a crash never overwrites a file a reader may use."""
    return f"{start:020d}-{end:020d}-{token}.parquet"


def covering(segments: Sequence[Segment], offset: int) -> Segment | None:
    """The segment holding ``offset``, or None (``segments`` in offset order, as the manifest gives them)."""
    for seg in segments:
        if seg.start <= offset < seg.end:
            return seg
    return None
