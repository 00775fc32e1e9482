"""Client CPU of the kept connections (``mq.store.lease``, D111): µs of process CPU a command.

Starts its own redis-server, then measures, on the tree it is run from:

- ``single_us``: one ``EVALSHA`` (1 KiB argument) through the sync client's try-shared lease
  (``lane.execute``: every sync send);
- ``pipe_us``: a command of 128-command rounds on a ``PipeLane`` (``send_async``), one round written
  ahead of reading the last;
- ``aio_pipe_us``: the same on an ``AioPipeLane`` (``mq.aio.Producer``).

Process CPU, not wall time, so that other load on a shared machine counts less. Compare two trees by
running it from each in turn (``cd TREE && python -m bench.lease``), several times, alternately.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from mq.store import lane
from mq.store.connection import Connection
from tests.servers import RedisServer

ROUND = 128


def measure(url: str, n: int, rounds: int) -> dict[str, float]:
    conn = Connection(url, "bench-lease")
    client = conn.client
    args = ("EVALSHA", client.script_load("return ARGV[1]"), 2, "{q}:a", "{q}:b", b"x" * 1024, "id", 12, 3.5)
    for _ in range(n // 10):  # warm-up: the lease taken, the code paths run
        lane.execute(client, *args)
    started = time.process_time()
    for _ in range(n):
        lane.execute(client, *args)
    single = (time.process_time() - started) / n

    pipe = lane.pipe_lane_of(client)
    assert pipe is not None
    started = time.process_time()
    ticket = pipe.send([args] * ROUND)
    for _ in range(rounds):
        ahead = pipe.send([args] * ROUND)
        pipe.read(ticket, ROUND)
        ticket = ahead
    pipe.read(ticket, ROUND)
    piped = (time.process_time() - started) / ((rounds + 1) * ROUND)
    pipe.close()

    async def aio() -> float:
        apipe = lane.pipe_lane_of(conn.async_client)
        assert isinstance(apipe, lane.AioPipeLane)
        started = time.process_time()
        ticket = await apipe.send([args] * ROUND)
        for _ in range(rounds):
            ahead = await apipe.send([args] * ROUND)
            await apipe.read(ticket, ROUND)
            ticket = ahead
        await apipe.read(ticket, ROUND)
        spent = (time.process_time() - started) / ((rounds + 1) * ROUND)
        await apipe.close()
        await conn.aclose()
        return spent

    return {"single_us": single * 1e6, "pipe_us": piped * 1e6, "aio_pipe_us": asyncio.run(aio()) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=20_000, help="single commands a repeat")
    parser.add_argument("--rounds", type=int, default=200, help="pipelined rounds a repeat")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    with RedisServer() as server:
        runs = [measure(server.url, options.n, options.rounds) for _ in range(options.repeats)]
    print(json.dumps({key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}))


if __name__ == "__main__":
    main()
