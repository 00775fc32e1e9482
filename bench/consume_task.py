"""CPU time of the sync push consumer's worker task a listener call, without Redis: a no-op listener
and the queue's cache in memory, so what is measured is the task loop (``PushConsumer._consume``
running :func:`mq.consumer.machine.consume_task`) and nothing else. Process CPU time, the median of 7
runs of 20 000 calls: steadier on a loaded machine than a drain's wall rate. Compare two checkouts
alternately (D139): ``python -m bench.consume_task [BATCH]``."""

from __future__ import annotations

import statistics
import sys
import time
import types

from mq import ConsumeConcurrentlyStatus, PushConsumer
from mq.consumer.machine import Batches
from mq.consumer.process_queue import ProcessQueue
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue

N = 20_000


def main() -> None:
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    consumer = PushConsumer("g", "memory://consume-task", namespace="bench")
    ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    consumer.register_message_listener(lambda msgs, ctx: ok)
    consumer._core = types.SimpleNamespace(puller=types.SimpleNamespace(wake=lambda: None))  # type: ignore[assignment]
    queue = MessageQueue("T", "broker-a", 0)
    msgs = [
        MessageExt("T", b"x" * 16, msg_id=f"id-{i}", queue_id=0, queue_offset=i, born_timestamp_ms=0, store_timestamp_ms=0)
        for i in range(N)
    ]
    runs = []
    for _ in range(7):
        pq = ProcessQueue(queue, 0)
        pq.add(msgs, N)
        consumer._in_flight = 1
        began = time.process_time()
        consumer._consume(pq, Batches(msgs, batch))
        runs.append((time.process_time() - began) / (N / batch) * 1e6)
        assert pq.count == 0
    print(f"batch {batch}: {statistics.median(runs):.2f} µs CPU a listener call (median of 7; {min(runs):.2f}–{max(runs):.2f})")


if __name__ == "__main__":
    main()
