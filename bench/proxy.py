"""The official RocketMQ 5 clients through ``mq proxy`` beside ``mq.Producer`` on the same store, in one
run (``python -m bench.proxy``).

Starts its own redis-server, then times in interleaved rounds:

- ``mq_producer_sync``: ``mq.Producer.send`` one at a time; ``mq_producer_send_async``: ``send_async``
  with every send in flight, then every result awaited (both on the same store);
- ``node_c{C}_p{P}``: the official Node.js producer (``rocketmq-client-nodejs``,
  bench/clients/node_producer.cjs) with C sends in flight, through ``mq proxy --workers P``, one client
  process; ``node2_c{C}_p{P}``: two client processes with C/2 in flight each (gRPC keeps one
  connection per client, and ``SO_REUSEPORT`` spreads connections, not calls, over the endpoint
  processes: one client process only ever reaches one of them);
- ``python_c1_p1``: the official Python producer's sync ``send`` (tests/proxy_clients.py's rr_client);
- ``floor_c64``: the Node.js producer at 64 in flight through ``bench.proxy_floor``, one endpoint
  process whose SendMessage answers OK and stores nothing: what gRPC's server and the client cost
  with a handler that costs nothing (the ceiling of any change to our handler).

For each endpoint case also the endpoint's CPU per message (µs: user + system time of the endpoint's
processes over the case, its warm-up included, divided by the messages), the Node.js client's own CPU
per timed send (µs, the median of its processes: one Node.js process runs on one core, so its rate
is at most 10⁶ / that; for ``mq_producer_sync`` this process's CPU a send) and the clients' p50/p99
send latency (ms). Messages are 1 KiB, the topic has 8 queues. Ratios are what to compare across
machines. Results go to stdout and ``bench/results/proxy.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.producer import BODY, rate, send_async_all
from mq import Admin, Message, Producer
from tests.proxy_clients import ProxyProcess, node_client, rr_client
from tests.servers import RedisServer

NODE_PRODUCER = pathlib.Path(__file__).parent / "clients" / "node_producer.cjs"
#: Sends each Node.js client makes before its timed ones (routes, connections, the endpoint's caches).
WARMUP = 300


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and of its children still running."""
    ticks = 0
    pids = [pid]
    with contextlib.suppress(OSError):  # the process ended
        pids += [int(c) for c in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        try:
            fields = pathlib.Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def _node(endpoint: str, n: int, inflight: int, clients: int) -> dict[str, float]:
    """``clients`` Node.js producers at once, ``inflight`` sends in flight in all; their total rate
    over their common window and the median of their p50 and p99 latencies."""
    env = {**os.environ, "NODE_PATH": str(node_client() / "node_modules")}
    each = max(1, inflight // clients)
    procs = [
        subprocess.Popen(
            ["node", str(NODE_PRODUCER), endpoint, "bench", str(n // clients), str(each), str(len(BODY)), str(WARMUP)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(clients)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"the Node.js producer exited {proc.returncode}: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    window_s = (max(r["end_ms"] for r in results) - min(r["start_ms"] for r in results)) / 1000
    return {
        "rate": sum(r["sent"] for r in results) / window_s,
        "p50_ms": statistics.median(r["p50_ms"] for r in results),
        "p99_ms": statistics.median(r["p99_ms"] for r in results),
        "client_cpu_us_per_msg": statistics.median(r["cpu_us_per_msg"] for r in results),
        "messages": float(n + WARMUP * clients),
    }


def _with_cpu(n: int, timed: Callable[[], float]) -> dict[str, float]:
    """The rate ``timed`` returns and this process's CPU per message over it (µs): what sending one
    message costs ``mq.Producer``, beside what it costs the Node.js client."""
    before = time.process_time()
    sent = timed()
    return {"rate": sent, "client_cpu_us_per_msg": (time.process_time() - before) / n * 1e6}


def run(n: int, rounds: int, python_n: int, workers: list[int]) -> dict[str, Any]:
    """Every case ``rounds`` times, interleaved; per case the medians of its figures and its ratio to
    ``mq_producer_sync`` (``x_sync``)."""
    samples: dict[str, list[dict[str, float]]] = {}
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        Admin(server.url, "bench").create_topic("bench", read_queues=8, write_queues=8)
        proxies = {
            p: ProxyProcess(server.url, "bench", pathlib.Path(tmp) / f"proxy{p}.log", *(["--workers", str(p)] if p > 1 else []))
            for p in workers
        }
        # key 0: the floor endpoint (bench.proxy_floor), one process
        proxies[0] = ProxyProcess(server.url, "bench", pathlib.Path(tmp) / "floor.log", command=("bench.proxy_floor",))
        first = workers[0]
        try:
            with Producer("bench", server.url, namespace="bench") as producer:

                def sync() -> None:
                    for _ in range(n):
                        producer.send(Message("bench", BODY))

                def through(p: int, case: Callable[[], dict[str, float]]) -> dict[str, float]:
                    before = _cpu_s(proxies[p].proc.pid)
                    result: dict[str, float] = case()
                    result["cpu_us_per_msg"] = (_cpu_s(proxies[p].proc.pid) - before) / result.pop("messages") * 1e6
                    return result

                def python_case() -> dict[str, float]:
                    [out] = rr_client("bench", proxies[first].endpoint, "bench", str(python_n), str(len(BODY)), timeout_s=900)
                    return {"rate": float(out["rate"]), "messages": float(python_n + 50)}

                cases: dict[str, Any] = {
                    "mq_producer_sync": lambda: _with_cpu(n, lambda: rate(n, sync)),
                    "mq_producer_send_async": lambda: {"rate": rate(n, lambda: send_async_all(producer, n))},
                }
                for p in workers:
                    for c in (1, 16, 64):
                        cases[f"node_c{c}_p{p}"] = lambda p=p, c=c: through(p, lambda: _node(proxies[p].endpoint, n, c, 1))
                    cases[f"node2_c64_p{p}"] = lambda p=p: through(p, lambda: _node(proxies[p].endpoint, n, 64, 2))
                cases[f"python_c1_p{first}"] = lambda: through(first, python_case)
                cases["floor_c64"] = lambda: through(0, lambda: _node(proxies[0].endpoint, n, 64, 1))
                for _ in range(rounds):
                    for name, case in cases.items():
                        samples.setdefault(name, []).append(case())
                        print(name, samples[name][-1], flush=True)
        finally:
            for proxy in proxies.values():
                proxy.stop()
    table = {name: {k: statistics.median(s[k] for s in runs) for k in runs[0]} for name, runs in samples.items()}
    sync_rate = table["mq_producer_sync"]["rate"]
    for row in table.values():
        row["x_sync"] = row["rate"] / sync_rate
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=5_000, help="messages per case and round")
    parser.add_argument("--python-n", type=int, default=500, help="messages of the official Python producer per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", default="1,2", help="endpoint processes of the endpoint cases (default: %(default)s)")
    args = parser.parse_args()
    table = run(args.n, args.rounds, args.python_n, [int(w) for w in args.workers.split(",")])
    print(f"{'case':24} {'msg/s':>9} {'x sync':>7} {'p50 ms':>8} {'p99 ms':>8} {'CPU us/msg':>11} {'client us/msg':>14}")
    for name, row in table.items():
        cells = [f"{row[k]:>8.1f}" if k in row else f"{'':>8}" for k in ("p50_ms", "p99_ms")]
        cpu = f"{row['cpu_us_per_msg']:>11.0f}" if "cpu_us_per_msg" in row else f"{'':>11}"
        client = f"{row['client_cpu_us_per_msg']:>14.0f}" if "client_cpu_us_per_msg" in row else f"{'':>14}"
        print(f"{name:24} {row['rate']:>9,.0f} {row['x_sync']:>7.2f} {cells[0]} {cells[1]} {cpu} {client}")
    out = pathlib.Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "proxy.json").write_text(json.dumps({"n": args.n, "rounds": args.rounds, "table": table}, indent=2) + "\n")


if __name__ == "__main__":
    main()
