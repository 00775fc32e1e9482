"""Argument types for numeric command-line options: finite and in range, or a clear error.

``float("nan")``, ``float("inf")`` and out-of-range values are refused when the command line is
parsed (``mq proxy: error: argument --max-body-mib: …``), before anything starts.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(
    kind: type[int] | type[float], *, low: float, high: float = math.inf, low_open: bool = False
) -> Callable[[str], float]:
    """An argparse ``type`` that parses ``kind`` and accepts only finite values in ``low..high``
    (above ``low`` when ``low_open``)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        bounds = f"{'above' if low_open else 'at least'} {low:g}" + (f" and at most {high:g}" if high != math.inf else "")
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be a finite number {bounds}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


#: A TCP port to listen on; 0 picks a free one.
PORT = number(int, low=0, high=65535)
#: A TCP port a server is reached on (not 0).
FIXED_PORT = number(int, low=1, high=65535)
