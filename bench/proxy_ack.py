"""Receive + ack through ``mq proxy`` with the namespace's trace off and on (``python -m bench.proxy_ack``).

Starts its own redis-server; each run is a fresh process serving an in-process endpoint and driving
it with the generated stubs: ``-n`` messages of 1 KiB sent (4 queues), then received in batches of
32 and acked with one ``AckMessage`` per batch. Reports msg/s and process CPU µs a message (endpoint
and stub client together) of the receive + ack phase. ``--old DIR`` adds runs of another checkout
(its ``mq`` importable from DIR, generated stubs included), alternating old, new off, new on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import subprocess
import sys
import time
import uuid

BODY = b"x" * 1024


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _one(url: str, trace: bool, n: int) -> tuple[float, float]:
    import grpc

    from mq import Admin
    from mq.consumer.types import ConsumeFromWhere
    from mq.proxy.pb import definition, grpc_service, service
    from mq.proxy.server import ProxyConfig, ProxyServer

    ns = f"b{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(url, ns)) as admin:
        admin.create_topic("T", read_queues=4, write_queues=4)
        admin.create_group("G", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        if trace:
            admin.set_trace(True)
    server = ProxyServer(ProxyConfig(url=url, namespace=ns, port=0))
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    stub = grpc_service.MessagingServiceStub(channel)
    for _ in range(0, n, 100):
        msgs = []
        for _ in range(100):
            m = definition.Message(body=BODY)
            m.topic.name = "T"
            m.system_properties.message_id = uuid.uuid4().hex.upper()
            m.system_properties.message_type = definition.NORMAL
            msgs.append(m)
        await stub.SendMessage(service.SendMessageRequest(messages=msgs))
    req = service.ReceiveMessageRequest(batch_size=32)
    req.group.name, req.message_queue.topic.name = "G", "T"
    req.invisible_duration.FromSeconds(30)
    req.long_polling_timeout.FromSeconds(1)
    got, began, cpu = 0, time.perf_counter(), _cpu_s()
    while got < n:
        received = [r.message async for r in stub.ReceiveMessage(req) if r.HasField("message")]
        if not received:
            break
        ack = service.AckMessageRequest(
            entries=[
                service.AckMessageEntry(
                    message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
                )
                for m in received
            ]
        )
        ack.group.name, ack.topic.name = "G", "T"
        assert (await stub.AckMessage(ack)).status.code == definition.Code.Value("OK")
        got += len(received)
    wall, cpu = time.perf_counter() - began, _cpu_s() - cpu
    await channel.close()
    await server.stop(0)
    return got / wall, cpu / got * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=4000, help="messages a run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="a checkout to compare with (trace off)")
    parser.add_argument("--run", nargs=2, metavar=("URL", "TRACE"), help=argparse.SUPPRESS)  # one run, in its own process
    args = parser.parse_args()
    if args.run:
        rate, cpu = asyncio.run(_one(args.run[0], args.run[1] == "on", args.n))
        print(f"{rate:.0f} {cpu:.1f}")
        return
    from tests.servers import RedisServer

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cases = ([("old off", args.old, "off")] if args.old else []) + [("new off", here, "off"), ("new on", here, "on")]
    with RedisServer() as server:
        for _ in range(args.rounds):
            for name, path, trace in cases:
                env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{here}"}
                out = subprocess.run(
                    [sys.executable, "-m", "bench.proxy_ack", "-n", str(args.n), "--run", server.url, trace],
                    env=env,
                    cwd=here,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                print(f"{name:8} {float(out[0]):7.0f} msg/s {float(out[1]):7.1f} µs CPU a message", flush=True)


if __name__ == "__main__":
    main()
