"""Runs a program with SIGTERM sent to itself at every line its main thread runs, for a while, once it
is up: the signal handler then runs at every point of the program's stop wait — also where the
main thread holds a lock (tests/cli/test_signals.py).

    python tests/sigterm_storm.py MARK SIGNALS (SCRIPT.py | -m MODULE) [ARG ...]

Runs ``SCRIPT.py`` (or the module) as ``__main__`` with ``ARG ...``. Once the program has printed a
line starting with ``MARK``, every line event of a function the main thread calls from then on (in any
module) sends SIGTERM to this process, ``SIGNALS`` times in all. ``os.kill`` runs the handler before it
returns to the traced line, so the handler runs at each of those lines in turn.
"""

from __future__ import annotations

import builtins
import os
import runpy
import signal
import sys
from types import FrameType
from typing import Any


def main() -> None:
    mark, limit, target, *rest = sys.argv[1:]
    module = None
    if target == "-m":
        module, *rest = rest
    left, armed = [0], [False]  # signals still to send, from when the mark was printed
    print_ = builtins.print

    def marking_print(*args: Any, **kwargs: Any) -> None:
        print_(*args, **kwargs)
        if args and str(args[0]).startswith(mark) and not armed[0]:
            armed[0], left[0] = True, int(limit)

    def local(frame: FrameType, event: str, arg: object) -> Any:
        if event == "line" and left[0] > 0:
            left[0] -= 1
            os.kill(os.getpid(), signal.SIGTERM)
        return local if left[0] > 0 else None

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if left[0] > 0 else None

    builtins.print = marking_print
    sys.argv = [module or target, *rest]
    sys.settrace(calls)
    if module is not None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
