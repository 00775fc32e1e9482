"""Queue selectors: the hash selector agrees with Java and across processes."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from mq import Message, MessageQueue, SelectMessageQueueByHash, SelectMessageQueueByMachineRoom
from mq.errors import MQClientError
from mq.producer.selectors import consistent_hash, java_hash, java_string_hash

# Values of String.hashCode() as the JVM computes them.
JAVA_HASHES = {
    "": 0,
    "a": 97,
    "abc": 96354,
    "hello": 99162322,
    "Aa": 2112,
    "BB": 2112,
    "polygenelubricants": -2147483648,  # Integer.MIN_VALUE: abs() of it stays negative in Java
    "order-10086": 478770544,
    "ä": 228,
    "中文": 646394,
    "😀": 1772899,  # a surrogate pair: two UTF-16 units
}


def _reference_hash(text: str) -> int:
    """An independent String.hashCode: iterate UTF-16 code units with Java int overflow."""
    units = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES.items())
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected == _reference_hash(text)


def _java_pick(key: str, n: int) -> int:
    h = _reference_hash(key)
    r = abs(h) % n  # Java: Math.abs(h % n); equal to abs(h) % n for truncating %
    return r


def test_hash_selector_matches_java_choice() -> None:
    mqs = [MessageQueue("t", "broker-a", i) for i in range(8)]
    selector = SelectMessageQueueByHash()
    for key in [*JAVA_HASHES, "order-%d" % 7, "用户-42", "x" * 1000]:
        assert selector.select(mqs, Message("t", b"x"), key).queue_id == _java_pick(key, 8)


def test_hash_selector_agrees_across_processes() -> None:
    keys = ["order-%d" % i for i in range(200)] + ["客户-%d" % i for i in range(50)] + ["ü", "😀x"]
    code = (
        "import json,sys\n"
        "from mq import Message, MessageQueue, SelectMessageQueueByHash\n"
        "mqs=[MessageQueue('t','broker-a',i) for i in range(16)]\n"
        "s=SelectMessageQueueByHash()\n"
        "keys=json.loads(sys.stdin.read())\n"
        "print(json.dumps([s.select(mqs, Message('t', b'x'), k).queue_id for k in keys]))\n"
    )
    answers = []
    for seed in ("1", "2"):  # different str hash seeds: Python's hash() would disagree
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(keys), capture_output=True, text=True, env=env, check=True, timeout=60
        )
        answers.append(json.loads(out.stdout))
    assert answers[0] == answers[1] == [_java_pick(k, 16) for k in keys]


def test_java_hash_of_numbers_and_bytes() -> None:
    assert java_hash(42) == 42
    assert java_hash(-7) == -7
    assert java_hash(2**40 + 5) == ((2**40 + 5) ^ ((2**40 + 5) >> 32)) & 0xFFFFFFFF
    assert java_hash(b"\x01\xff") == 31 * (31 * 1 + 1) + (-1)  # Arrays.hashCode over signed bytes
    with pytest.raises(MQClientError, match="str, int or bytes"):
        java_hash(3.5)


def test_machine_room_selector_falls_back() -> None:
    mqs = [MessageQueue("t", "broker-a", 0)]
    assert SelectMessageQueueByMachineRoom(["idc1"]).select(mqs, Message("t", b"x"), None) is None


def test_hash_selector_matches_the_jvm() -> None:
    """Ask the real JVM (Java 17 runs single-file programs) for hashCode and the queue it picks."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("java is not on PATH; the project needs Java 17 (see README)")
    keys = ["order-%d" % i for i in range(100)] + ["客户-%d" % i for i in range(30)] + ["😀%d" % i for i in range(5)]
    source = pathlib.Path(__file__).parents[1] / "java" / "Hash.java"
    out = subprocess.run(
        [java, str(source), "16"],
        input="\n".join(keys) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=120,
    )
    mqs = [MessageQueue("t", "broker-a", i) for i in range(16)]
    selector = SelectMessageQueueByHash()
    for key, line in zip(keys, out.stdout.splitlines(), strict=True):
        java_code, java_queue = map(int, line.split())
        assert java_string_hash(key) == java_code, key
        assert selector.select(mqs, Message("t", b"x"), key).queue_id == java_queue, key


# Guava 31.1's Hashing.consistentHash(key.hashCode(), n) for n in CONSISTENT_BUCKETS (computed with
# Debian's libguava-java; RocketMQ 5's proxy picks a FIFO message group's queue this way).
CONSISTENT_BUCKETS = (1, 2, 3, 4, 8, 16, 17, 100)
GUAVA_CONSISTENT = {
    "": [0, 0, 0, 0, 0, 0, 0, 0],
    "order-1": [0, 0, 0, 3, 3, 3, 3, 3],
    "order-2": [0, 0, 2, 2, 2, 11, 11, 46],
    "customer:42": [0, 1, 1, 1, 1, 1, 1, 50],
    "\u00e9t\u00e9": [0, 1, 1, 1, 7, 7, 7, 46],
    "\U0001f600group": [0, 0, 2, 3, 7, 7, 7, 47],
    "a-much-longer-message-group-name-for-fifo": [0, 0, 0, 0, 0, 9, 16, 66],
}


@pytest.mark.parametrize("key", list(GUAVA_CONSISTENT))
def test_consistent_hash_agrees_with_guava(key: str) -> None:
    assert [consistent_hash(java_hash(key), n) for n in CONSISTENT_BUCKETS] == GUAVA_CONSISTENT[key]


def test_consistent_hash_moves_keys_only_to_a_new_bucket() -> None:
    keys = [java_hash(f"group-{i}") for i in range(500)]
    for n in range(1, 40):
        for k in keys:
            before, after = consistent_hash(k, n), consistent_hash(k, n + 1)
            assert after in (before, n) and 0 <= after <= n
    with pytest.raises(MQClientError, match="buckets must be positive"):
        consistent_hash(1, 0)
