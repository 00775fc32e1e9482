"""``XRANGE`` replies cut into columns straight from the reply bytes: no Python object per entry.

A reply parser (hiredis) builds, for every entry, a list, a field list and a ``bytes`` object per
name and per value — about 2 µs of client CPU an entry, as much as the rest of the Spark reader's
work. Here the replies of one round trip (RESP2: ``*`` array and ``$`` bulk-string headers only)
are read as one byte string and parsed with numpy, and each field's values become one Arrow binary
array over that byte string:

1. *Headers.* Every header starts right after a line feed (or at 0) with ``$`` or ``*``, so the
   candidates are the line feeds followed by one of those; each candidate's length is its digits,
   up to the next line feed. A bulk string's content can hold such a pattern, so a candidate is
   not yet a header: but the real headers form a chain (each one's end, plus its content, is where
   the next starts), and the chain starts at 0. When candidate *i+1* is where candidate *i*'s node
   ends, for every *i*, and the last ends at the end of the bytes, every candidate is on the chain
   (by induction from 0): the reply has no header-like text in its contents, and the candidates are
   exactly its nodes. Otherwise the caller parses the bytes with hiredis (nothing is read again).
2. *Entries.* Each ``XRANGE`` reply is ``*N`` then per entry ``*2``, the id, ``*2F`` and *F*
   name/value pairs. When every entry of the round trip has the same *F* and the same field names in
   the same places (messages sent alike), entry *k*'s value of a field is node ``head_k + c``, so a
   column is one numpy gather; anything else (a different layout, an error reply) is left to hiredis.
3. *Columns.* A field's values are ranges of the reply bytes; an Arrow binary array whose offsets run
   over those ranges and the gaps between them, taken at the even positions, is the column (Arrow
   copies each value once, in C).

A repeated field name in an entry keeps its last value, as a ``dict`` of the pairs would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_hiredis: Any
try:
    import hiredis as _hiredis
except ImportError:  # redis-py's optional parser
    _hiredis = None

_LF, _CR, _DOLLAR, _STAR, _ZERO = 10, 13, 36, 42, 48

#: numpy integer arrays (positions, lengths, node indexes).
Ints = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True)
class EntryColumns:
    """The entries of one round trip's ``XRANGE`` replies, by column: ``ids`` the entry ids and
    ``fields[name]`` the values of field ``name`` (every entry has every field), all binary, in
    entry order."""

    ids: pa.BinaryArray
    fields: dict[bytes, pa.BinaryArray]

    def __len__(self) -> int:
        return len(self.ids)


def entry_columns(reply: bytes, replies: int) -> EntryColumns | None:
    """The entries of the ``replies`` ``XRANGE`` replies that ``reply`` holds (in order; the bytes
    may hold more replies after them, which are ignored), or None when the bytes are not all
    entries with one field layout (an error reply, mixed layouts, a content that looks like a
    header): parse them with hiredis then.
    """
    nodes = _nodes(reply)
    if nodes is None:
        return None
    is_bulk, size, start = nodes
    blocks, layout, at = [], 0, 0  # each reply's entries: node indexes [first, first + count * layout)
    for _ in range(replies):
        if at >= len(size) or is_bulk[at]:
            return None
        count, at = int(size[at]), at + 1
        if count == 0:
            continue
        if at + 2 >= len(size):
            return None
        layout = layout or 3 + int(size[at + 2])  # *2, id, *2F, then name, value, … (F pairs)
        if int(size[at + 2]) != layout - 3 or layout % 2 == 0 or at + layout * count > len(size):
            return None
        blocks.append((at, count))
        at += layout * count
    if not blocks:
        return EntryColumns(pa.array([], pa.binary()), {})
    # Node k of entry e is row e, column k: every entry's nodes side by side.
    bulk, sizes, starts = (
        np.concatenate([a[first : first + count * layout].reshape(count, layout) for first, count in blocks])
        for a in (is_bulk, size, start)
    )
    expect = np.ones(layout, bool)
    expect[[0, 2]] = False
    if not ((bulk == expect).all() and (sizes[:, 0] == 2).all() and (sizes[:, 2] == layout - 3).all()):
        return None
    names = sizes[:, 3::2]
    if not (names == names[0]).all():
        return None
    array = np.frombuffer(reply, np.uint8)
    columns: dict[bytes, int] = {}
    for name_at in range(3, layout, 2):
        name = reply[starts[0, name_at] : starts[0, name_at] + sizes[0, name_at]]
        if len(name) and not (array[starts[:, name_at, None] + np.arange(len(name))] == np.frombuffer(name, np.uint8)).all():
            return None
        columns[name] = name_at + 1  # a repeated name: the last value, as dict(pairs) keeps
    if len(reply) >= 2**31:
        return None
    buffer = pa.py_buffer(reply)
    return EntryColumns(
        _gather(buffer, starts[:, 1], sizes[:, 1]),
        {name: _gather(buffer, starts[:, at], sizes[:, at]) for name, at in columns.items()},
    )


def _nodes(reply: bytes) -> tuple[np.ndarray[Any, np.dtype[np.bool_]], Ints, Ints] | None:
    """Every node of the RESP2 replies in ``reply``, in order: whether it is a bulk string, its
    length (a bulk string's bytes, an array's elements) and where its content starts; None when
    the headers do not chain up exactly (see the module doc) or the bytes end mid-reply."""
    b = np.frombuffer(reply, np.uint8)
    if not len(b) or b[-1] != _LF:
        return None
    lf = np.flatnonzero(b == _LF)
    after = b[lf[:-1] + 1]
    k = np.flatnonzero((after == _DOLLAR) | (after == _STAR))
    begin = np.concatenate(([0], lf[k] + 1))  # where each candidate header starts
    end = lf[np.concatenate(([0], k + 1))]  # its line feed
    digits = end - begin - 2
    if digits.min() < 1 or digits.max() > 18 or (b[end - 1] != _CR).any():
        return None
    size = np.empty(len(begin), np.int64)
    for count in range(1, int(digits.max()) + 1):  # headers of each digit count, most digits first
        at = np.flatnonzero(digits == count)
        value = np.zeros(len(at), np.int64)
        for j in range(count):
            digit = b[begin[at] + 1 + j] - np.uint8(_ZERO)  # a byte below "0" wraps past 9
            if (digit > 9).any():
                return None
            value = value * 10 + digit
        size[at] = value
    is_bulk = b[begin] == _DOLLAR
    if not (is_bulk | (b[begin] == _STAR)).all():
        return None
    start = end + 1
    after_node = start + np.where(is_bulk, size + 2, 0)
    if not ((after_node[:-1] == begin[1:]).all() and after_node[-1] == len(b)):
        return None
    return is_bulk, size, start


def _gather(buffer: pa.Buffer, start: Ints, size: Ints) -> pa.BinaryArray:
    """A binary array of the ranges ``[start[i], start[i] + size[i])`` of ``buffer`` (in increasing,
    non-overlapping order), copied once."""
    if not len(start):
        return pa.array([], pa.binary())
    bounds = np.empty(2 * len(start), np.int32)
    bounds[0::2] = start
    bounds[1::2] = start + size
    spans = pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), buffer])
    taken: pa.BinaryArray = pc.take(spans, pa.array(np.arange(0, len(bounds), 2)))
    return taken


def parsed_entries(reply: bytes, replies: int) -> list[Any] | None:
    """The entries ``(id, [name, value, …])`` of the first ``replies`` ``XRANGE`` replies in
    ``reply``, parsed by hiredis, in order; None when one is an error reply or hiredis is missing
    (then read them the usual way)."""
    if _hiredis is None:
        return None
    reader = _hiredis.Reader()
    reader.feed(reply)
    out: list[Any] = []
    for _ in range(replies):
        entries = reader.gets()
        if not isinstance(entries, list):
            return None
        out += entries
    return out
