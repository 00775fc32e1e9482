"""Lua script mechanics: headers, reload after SCRIPT FLUSH, pipelines."""

from __future__ import annotations

import re

from mq import Admin, Message, Producer
from mq.store import scripts
from tests.helpers import raw_client


def test_every_script_has_a_header_naming_its_keys_and_args() -> None:
    assert scripts.SCRIPTS, "no Lua scripts were packaged"
    for script in scripts.SCRIPTS.values():
        header = script.source.split("]]", 1)[0]
        assert header.startswith("--[["), script.name
        for i in range(1, script.numkeys + 1):
            assert f"KEYS[{i}]" in header, f"{script.name} does not document KEYS[{i}]"
        assert "Returns" in header, script.name
        used = set(re.findall(r"KEYS\[(\d+)\]", script.source.split("]]", 1)[1]))
        assert used == {str(i) for i in range(1, script.numkeys + 1)}, f"{script.name} uses keys {used}"


def test_calls_work_after_script_flush(backend_url: str, namespace: str) -> None:
    client = raw_client(backend_url)
    with Admin(backend_url, namespace) as admin, Producer("pg", backend_url, namespace=namespace) as producer:
        admin.create_topic("flush", read_queues=4, write_queues=4)
        producer.send(Message("flush", b"1"))
        client.script_flush()
        assert producer.send(Message("flush", b"2")).queue_offset in (0, 1)
        client.script_flush()
        futures = [producer.send_async(Message("flush", b"p%d" % i)) for i in range(50)]  # pipelined path
        assert len({f.result(timeout=10).msg_id for f in futures}) == 50
        client.script_flush()
        status = admin.topic_status("flush")  # pipelined stats script
    client.close()
    assert sum(s.max_offset for s in status.values()) == 52
