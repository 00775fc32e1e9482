"""What compiling the hot modules with mypyc gives (``python -m bench.mypyc``): an experiment, not a build.

``build DIR`` copies ``mq/``, ``spark/``, ``tests/`` and ``pyproject.toml`` into ``DIR`` (a new
temporary directory by default; never the checkout), applies the few source changes mypyc needs
(``EXPERIMENT_PATCHES``, in the copy only) and compiles ``SEND_MODULES`` and ``DECODE_MODULES`` there
in place (``.so`` files beside the ``.py`` ones; CPython loads the extension first). Then:

- ``send DIR``: ``Producer.send_async`` of 1 KiB messages against raw redis-py pipelined ``XADD`` of
  128 (the issue-19 ratio), interpreted (this checkout) and compiled (``DIR`` first on the path)
  alternating, each run a fresh process with its own redis-server; CPU a message is the process's
  (``time.process_time``: the caller and the sender thread);
- ``decode DIR``: ``spark.columns.entries_batch`` (every column) over saved 4 000-entry round trips
  (``read_page_entries``' replies, pickled once), interpreted and compiled alternating, process CPU
  µs a row, best of ``--rounds``.

Run the tests against the compiled copy from inside it, e.g.
``cd DIR && PYTHONPATH=$PWD $CHECKOUT/.venv/bin/pytest -p no:cacheprovider tests/test_spark_columns.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The modules on ``send_async``'s path (py-spy over ``send_async`` of 1 KiB messages) that compile.
#: Left interpreted: ``mq/store/ops.py`` (an ``if TYPE_CHECKING:`` block in the ``operation`` class
#: body: "Unsupported statement in class body"), ``mq/message.py`` (compiles, but the codec makes a
#: ``MessageExt`` with ``MessageExt.__new__(MessageExt)`` and sets attributes; a native class's
#: ``__new__`` runs ``__init__``: "missing required argument 'topic'", every entry skipped as foreign)
#: and ``mq/store/store.py`` (``Store`` inherits eight
#: operation mixins and a runner: "Multiple inheritance is not supported (except for traits)").
SEND_MODULES = (
    "mq/producer/core.py",
    "mq/producer/request.py",
    "mq/producer/futures.py",
    "mq/producer/async_sender.py",
    "mq/producer/producer.py",
    "mq/producer/route.py",
    "mq/store/codec.py",
    "mq/store/lane.py",
    "mq/validation.py",
    "mq/msgid.py",
    "mq/otel.py",
    "mq/trace.py",
)
#: The Spark reader's decode (``mq/store/codec.py``, shared with the send path, is in the set above).
DECODE_MODULES = ("spark/columns.py", "spark/schema.py")

#: ``(file, old, new)`` replacements in the copy, each what mypyc refuses otherwise:
#: - an attribute named ``_thread`` becomes the C struct field ``__thread``, a GCC keyword (the C does not compile);
#: - ``os.environ.encodekey`` is typed ``str -> str`` but gives bytes on POSIX, and compiled code checks
#:   the declared type at run time (``TypeError`` on import), so it is called through ``Any``;
#: - ``SyncSendCore(SendCore, SyncRunner)`` / ``AsyncSendCore(SendCore, AsyncRunner)``: multiple
#:   inheritance, so the send cores become non-native (plain Python) classes with compiled methods;
#: - (no patch since 9275504: an entry was typed ``tuple[bytes, Any]`` but redis-py gives ``[id, fields]``
#:   lists, and compiled code checked each element — ``FieldColumns`` raised ``TypeError``, which
#:   ``entries_batch`` took for a foreign entry and decoded message by message, 19× slower; main now
#:   types an entry ``Sequence[Any]``);
#: - ``ProducerSettings``, ``Producer`` and ``TraceEvents`` have interpreted subclasses (the asyncio
#:   producer, the transaction producers, ``AsyncTracer``): "interpreted classes cannot inherit from
#:   compiled" at run time unless marked ``allow_interpreted_subclasses``.
EXPERIMENT_PATCHES = (
    ("mq/producer/async_sender.py", "self._thread", "self._worker_thread"),
    ("mq/trace.py", "self._thread", "self._worker_thread"),
    ("mq/otel.py", "_ENVIRON_KEY: Any = (", "_ENVIRON_ANY: Any = os.environ\n_ENVIRON_KEY: Any = ("),
    ("mq/otel.py", "os.environ.encodekey(", "_ENVIRON_ANY.encodekey("),
    ("mq/producer/core.py", "from mq import metrics\n", "from mypy_extensions import mypyc_attr\n\nfrom mq import metrics\n"),
    ("mq/producer/core.py", "\nclass SendCore:", "\n@mypyc_attr(native_class=False)\nclass SendCore:"),
    ("mq/producer/core.py", "\nclass SyncSendCore(", "\n@mypyc_attr(native_class=False)\nclass SyncSendCore("),
    ("mq/producer/core.py", "\nclass AsyncSendCore(", "\n@mypyc_attr(native_class=False)\nclass AsyncSendCore("),
    (
        "mq/producer/core.py",
        "\nclass ProducerSettings",
        "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass ProducerSettings",
    ),
    ("mq/producer/producer.py", "import time\n", "import time\n\nfrom mypy_extensions import mypyc_attr\n"),
    ("mq/producer/producer.py", "\nclass Producer(", "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass Producer("),
    ("mq/trace.py", "import json\n", "import json\n\nfrom mypy_extensions import mypyc_attr\n"),
    ("mq/trace.py", "\nclass TraceEvents:", "\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass TraceEvents:"),
)

PIPELINE = 128
ENTRIES = 4000


def build(target: pathlib.Path) -> None:
    """Copy the sources into ``target``, patch the copy and compile the modules in place."""
    for name in ("mq", "spark", "tests"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    for path, old, new in EXPERIMENT_PATCHES:
        file = target / path
        text = file.read_text()
        if old not in text:
            raise SystemExit(f"{path}: {old!r} not found; update EXPERIMENT_PATCHES")
        file.write_text(text.replace(old, new))
    mypyc = pathlib.Path(sys.executable).with_name("mypyc")
    started = time.perf_counter()
    subprocess.run([str(mypyc), *SEND_MODULES, *DECODE_MODULES], cwd=target, check=True, stdout=subprocess.DEVNULL)
    print(f"compiled in {time.perf_counter() - started:.0f} s into {target}")


def _env(compiled: pathlib.Path | None) -> dict[str, str]:
    """The environment with ``compiled`` (if any) then the checkout as ``PYTHONPATH``."""
    paths = [str(compiled)] if compiled else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)])}


def _child(args: list[str], compiled: pathlib.Path | None) -> dict[str, Any]:
    """Run this module's ``args`` in a fresh process, ``compiled`` (if any) first on the path (``-P``:
    not the working directory); its last line of output, parsed."""
    out = subprocess.run(
        [sys.executable, "-P", "-m", "bench.mypyc", *args],
        cwd=ROOT,
        env=_env(compiled),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def _load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3]) if os.path.exists("/proc/loadavg") else "?"


def send_once(n: int, rounds: int) -> dict[str, Any]:
    """Raw pipelined ``XADD`` and ``send_async`` alternating ``rounds`` times in this process; medians
    (rate, process CPU µs a message, and for ``send_async`` the calling thread's share of it)."""
    import redis

    import mq.producer.producer
    from bench.producer import raw_pipelined_xadd, send_async_all
    from mq import Admin, Producer
    from tests.servers import RedisServer

    runs: dict[str, list[tuple[float, float]]] = {"raw": [], "ours": []}
    caller_us: list[float] = []
    with RedisServer() as server:
        raw = redis.Redis.from_url(server.url)
        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        with Producer("bench", server.url, namespace="bench") as producer:
            for _ in range(rounds):
                for kind in ("raw", "ours"):
                    cpu, wall = time.process_time(), time.perf_counter()
                    if kind == "raw":
                        raw_pipelined_xadd(raw, n, PIPELINE)
                    else:
                        caller = time.thread_time()
                        send_async_all(producer, n)
                        caller_us.append(1e6 * (time.thread_time() - caller) / n)
                    runs[kind].append((n / (time.perf_counter() - wall), 1e6 * (time.process_time() - cpu) / n))
                raw.delete("raw:pipe")
        raw.close()
    out: dict[str, Any] = {"compiled": mq.producer.producer.__file__.endswith(".so")}
    for kind, values in runs.items():
        out[f"{kind}_rate"] = statistics.median(r for r, _ in values)
        out[f"{kind}_cpu_us"] = statistics.median(c for _, c in values)
    out["ours_caller_cpu_us"] = statistics.median(caller_us)  # the rest is the sender thread's
    out["ratio"] = statistics.median(o[0] / r[0] for o, r in zip(runs["ours"], runs["raw"]))
    return out


def save_round_trips(path: pathlib.Path, trips: int) -> None:
    """Fill one queue with ``trips`` × 4 000 messages (tags, a key, a property, 256-byte bodies, as
    ``bench.spark``) and pickle ``read_page_entries``' replies, one per round trip."""
    from mq import Admin, Message, Producer
    from mq.connection import Connection
    from mq.store import Store
    from tests.servers import RedisServer

    with RedisServer() as server:
        Admin(server.url, "bench").create_topic("Bench", read_queues=1, write_queues=1)
        with Producer("bench", server.url, namespace="bench") as producer:
            futures = [
                producer.send_async(
                    Message("Bench", b"b" * 256, tags="t", keys=[f"k{i % 1000}"], properties={"amount": str(i % 100)})
                )
                for i in range(trips * ENTRIES)
            ]
            for f in futures:
                f.result(timeout=60)
        store = Store(Connection(server.url, "bench"))
        replies = [store.read_page_entries("Bench", 0, [(t * ENTRIES, (t + 1) * ENTRIES - 1)]) for t in range(trips)]
    path.write_bytes(pickle.dumps(replies))


def decode_once(path: pathlib.Path, rounds: int) -> dict[str, Any]:
    """Best of ``rounds`` CPU µs a row of ``entries_batch`` (every column) over the saved round trips."""
    from spark import columns
    from spark.schema import MESSAGES, arrow_schema

    replies = pickle.loads(path.read_bytes())
    schema = arrow_schema(MESSAGES)
    rows = sum(map(len, replies))
    best = float("inf")
    for _ in range(rounds):
        cpu = time.process_time()
        for entries in replies:
            columns.entries_batch("Bench", 0, entries, schema)
        best = min(best, time.process_time() - cpu)
    return {"compiled": columns.__file__.endswith(".so"), "cpu_us_a_row": 1e6 * best / rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="copy, patch and compile into DIR (default: a new temporary directory)")
    b.add_argument("dir", nargs="?", type=pathlib.Path)
    s = sub.add_parser("send", help="send_async against pipelined XADD, interpreted and compiled alternating")
    s.add_argument("dir", type=pathlib.Path)
    s.add_argument("--n", type=int, default=20_000, help="messages a timed round")
    s.add_argument("--rounds", type=int, default=3, help="timed rounds a process (medians)")
    s.add_argument("--pairs", type=int, default=4, help="interpreted/compiled process pairs")
    d = sub.add_parser("decode", help="entries_batch CPU a row, interpreted and compiled alternating")
    d.add_argument("dir", type=pathlib.Path)
    d.add_argument("--trips", type=int, default=8, help="saved 4 000-entry round trips")
    d.add_argument("--rounds", type=int, default=9, help="timed passes a process (best)")
    d.add_argument("--pairs", type=int, default=4, help="interpreted/compiled process pairs")
    for name in ("_send", "_decode"):
        c = sub.add_parser(name)
        c.add_argument("args", nargs="*")
    args = parser.parse_args()
    if args.command == "build":
        build(args.dir.resolve() if args.dir else pathlib.Path(tempfile.mkdtemp(prefix="mq-mypyc-")))
    elif args.command == "_send":
        print(json.dumps(send_once(int(args.args[0]), int(args.args[1]))))
    elif args.command == "_decode":
        print(json.dumps(decode_once(pathlib.Path(args.args[0]), int(args.args[1]))))
    elif args.command == "send":
        runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for _ in range(args.pairs):
            for compiled in (None, args.dir.resolve()):
                load = _load()
                run = _child(["_send", str(args.n), str(args.rounds)], compiled)
                runs[run["compiled"]].append(run)
                print(json.dumps({"load": load, **run}), flush=True)
        for compiled, done in runs.items():
            print(
                "compiled" if compiled else "interpreted",
                *(f"{key} {statistics.median(r[key] for r in done):.2f}" for key in done[0] if key != "compiled"),
                f"ours/raw CPU {statistics.median(r['ours_cpu_us'] / r['raw_cpu_us'] for r in done):.2f} (medians)",
            )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            saved = pathlib.Path(tmp) / "trips.pickle"
            save_round_trips(saved, args.trips)
            for _ in range(args.pairs):
                for compiled in (None, args.dir.resolve()):
                    load = _load()
                    print(json.dumps({"load": load, **_child(["_decode", str(saved), str(args.rounds)], compiled)}), flush=True)


if __name__ == "__main__":
    main()
