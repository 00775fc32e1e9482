"""Rebalance allocation strategies: RocketMQ's exact algorithms (no Redis needed)."""

from __future__ import annotations

import bisect
import hashlib
import logging
import pathlib
import random
import shutil
import subprocess

import pytest

from mq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    md5_hash,
)
from mq.errors import MQClientError
from mq.model.queue import MessageQueue

GROUP = "group-a"


def _queues(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def _cids(c: int) -> list[str]:
    return ["cid-%02d" % i for i in range(c)]


def _ids(mqs: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


def _shares(strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue], cids: list[str]) -> list[list[MessageQueue]]:
    return [strategy.allocate(GROUP, cid, mqs, cids) for cid in cids]


# Values printed by a JVM (OpenJDK 17, UTF-8 platform charset) running the body of RocketMQ's
# ConsistentHashRouter.MD5Hash.hash verbatim; see JAVA_RING below for the same check done live.
JVM_MD5_HASHES = {
    "": 3558706393,  # high bit set: the value is unsigned, not a negative int
    "a": 214005177,
    "abc": 2416005272,
    "consumer-0": 946174003,
    "consumer-0-9": 3112020113,
    "消费者": 76758481,
    "😀": 704834243,
    "192.168.0.1@12345-3": 2292769729,
    "MessageQueue [topic=T, brokerName=broker-a, queueId=0]": 1630488180,
    "MessageQueue [topic=TopicTest, brokerName=idc1@broker-b, queueId=15]": 1397889758,
}


@pytest.mark.parametrize(("key", "expected"), JVM_MD5_HASHES.items())
def test_md5_hash_matches_rocketmq(key: str, expected: int) -> None:
    assert md5_hash(key) == expected


def test_averagely_ten_queues_four_clients() -> None:
    shares = _shares(AllocateMessageQueueAveragely(), _queues(10), _cids(4))
    assert [_ids(s) for s in shares] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_by_circle_ten_queues_four_clients() -> None:
    shares = _shares(AllocateMessageQueueAveragelyByCircle(), _queues(10), _cids(4))
    assert [_ids(s) for s in shares] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]


@pytest.mark.parametrize("strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle()])
def test_fewer_queues_than_clients(strategy: AllocateMessageQueueStrategy) -> None:
    shares = _shares(strategy, _queues(3), _cids(5))
    assert [_ids(s) for s in shares] == [[0], [1], [2], [], []]


def test_averagely_equal_counts() -> None:
    assert [_ids(s) for s in _shares(AllocateMessageQueueAveragely(), _queues(4), _cids(4))] == [[0], [1], [2], [3]]


STRATEGIES = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHash(virtual_node_count=1),
    AllocateMessageQueueByMachineRoom(["idc1", "idc2"]),
]


def _mixed_queues(n: int) -> list[MessageQueue]:
    """Queues over two topics and two rooms, so sorting matters."""
    return [MessageQueue("T%d" % (i % 2), "idc%d@broker-%d" % (i % 2 + 1, i % 3), i) for i in range(n)]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_unsorted_input_gives_the_same_answer(strategy: AllocateMessageQueueStrategy) -> None:
    mqs, cids = _mixed_queues(17), _cids(5)
    expected = _shares(strategy, mqs, cids)
    rng = random.Random(7)
    for _ in range(5):
        shuffled_mqs, shuffled_cids = mqs[:], cids[:]
        rng.shuffle(shuffled_mqs)
        rng.shuffle(shuffled_cids)
        assert [strategy.allocate(GROUP, cid, shuffled_mqs, shuffled_cids) for cid in cids] == expected


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_every_queue_goes_to_exactly_one_client(strategy: AllocateMessageQueueStrategy) -> None:
    for n in range(1, 26):
        for c in range(1, 9):
            mqs = _mixed_queues(n)
            got = [mq for share in _shares(strategy, mqs, _cids(c)) for mq in share]
            assert sorted(got) == sorted(mqs), (n, c)


def _reference_ring_owner(cids: list[str], v: int, key: str) -> str:
    """An independent MD5 ring: first 4 digest bytes big-endian, first node >= key, wrapping."""

    def h(text: str) -> int:
        d = hashlib.md5(text.encode("utf-8")).digest()
        return (d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]

    nodes = sorted((h("%s-%d" % (cid, j)), cid) for cid in sorted(cids) for j in range(v))
    points = [p for p, _ in nodes]
    i = bisect.bisect_left(points, h(key))
    return nodes[i % len(nodes)][1]


@pytest.mark.parametrize("v", [1, 3, 10])
def test_consistent_hash_matches_reference_ring(v: int) -> None:
    strategy = AllocateMessageQueueConsistentHash(virtual_node_count=v)
    for c in (1, 2, 5, 9):
        cids = ["192.168.1.%d@%d" % (i, 4000 + i) for i in range(c)]
        mqs = _queues(24, "TopicTest") + _queues(8, "TopicTest", "broker-b")
        for cid in cids:
            expected = [mq for mq in sorted(mqs) if _reference_ring_owner(cids, v, str(mq)) == cid]
            assert strategy.allocate(GROUP, cid, mqs, cids) == expected


# RocketMQ's ring, run by the JVM: MD5Hash.hash verbatim, VirtualNode keys "<cid>-<i>", a TreeMap ring
# and routeNode's tailMap lookup. Lines in: "H key" (print the hash), "C cid" (add a client),
# "Q key" (print the client the key routes to).
JAVA_RING = r"""
import java.io.*; import java.nio.charset.StandardCharsets; import java.security.MessageDigest; import java.util.*;
public class Ring {
  static MessageDigest instance;
  static long hash(String key) {
    instance.reset();
    instance.update(key.getBytes());
    byte[] digest = instance.digest();
    long h = 0;
    for (int i = 0; i < 4; i++) { h <<= 8; h |= ((int) digest[i]) & 0xFF; }
    return h;
  }
  public static void main(String[] a) throws Exception {
    instance = MessageDigest.getInstance("MD5");
    int v = Integer.parseInt(a[0]);
    SortedMap<Long, String> ring = new TreeMap<>();
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
    String line;
    while ((line = r.readLine()) != null) {
      String arg = line.substring(2);
      if (line.startsWith("H ")) out.println(hash(arg));
      else if (line.startsWith("C ")) { for (int i = 0; i < v; i++) ring.put(hash(arg + "-" + i), arg); }
      else {
        SortedMap<Long, String> t = ring.tailMap(hash(arg));
        out.println(ring.get(t.isEmpty() ? ring.firstKey() : t.firstKey()));
      }
    }
  }
}
"""


def test_consistent_hash_matches_the_jvm(tmp_path: pathlib.Path) -> None:
    """Ask the real JVM (Java 17 runs single-file programs) for hashes and ring owners."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("java is not on PATH; the project needs Java 17 (see README)")
    source = tmp_path / "Ring.java"
    source.write_text(JAVA_RING, encoding="utf-8")
    cids = sorted(["10.0.0.%d@pid%d" % (i, 100 + i) for i in range(6)] + ["消费者-1", "😀-client"])
    mqs = _queues(40, "TopicTest") + _queues(12, "订单", "idc1@broker-b")
    keys = list(JVM_MD5_HASHES) + ["%s-%d" % (cid, j) for cid in cids for j in range(10)]
    lines = ["H " + k for k in keys] + ["C " + cid for cid in cids] + ["Q " + str(mq) for mq in mqs]
    out = subprocess.run(
        [java, "-Dfile.encoding=UTF-8", str(source), "10"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
        timeout=120,
    )
    answers = out.stdout.splitlines()
    assert [md5_hash(k) for k in keys] == [int(x) for x in answers[: len(keys)]]
    owners = dict(zip(mqs, answers[len(keys) :], strict=True))
    strategy = AllocateMessageQueueConsistentHash()
    for cid in cids:
        assert strategy.allocate(GROUP, cid, mqs, cids) == [mq for mq in sorted(mqs) if owners[mq] == cid]


def test_consistent_hash_moves_queues_only_to_a_new_client() -> None:
    strategy = AllocateMessageQueueConsistentHash()
    mqs, cids = _queues(64), _cids(4)
    before = {mq: cid for cid in cids for mq in strategy.allocate(GROUP, cid, mqs, cids)}
    grown = [*cids, "cid-new"]
    after = {mq: cid for cid in grown for mq in strategy.allocate(GROUP, cid, mqs, grown)}
    assert {after[mq] for mq in mqs if after[mq] != before[mq]} <= {"cid-new"}


def test_consistent_hash_rejects_bad_virtual_node_count() -> None:
    for bad in (0, -1):
        with pytest.raises(MQClientError):
            AllocateMessageQueueConsistentHash(virtual_node_count=bad)


def test_by_config_gives_every_client_the_configured_queues() -> None:
    configured = [MessageQueue("T", "broker-b", 3), MessageQueue("T", "broker-a", 1)]
    strategy = AllocateMessageQueueByConfig(configured)
    for cid in ("cid-00", "cid-01", "stranger"):
        got = strategy.allocate(GROUP, cid, _queues(8), _cids(2))
        assert got == sorted(configured)
        got.clear()  # the caller's list is its own
    assert strategy.allocate(GROUP, "cid-00", [], []) == sorted(configured)
    with pytest.raises(MQClientError):
        AllocateMessageQueueByConfig(["not a queue"])  # type: ignore[list-item]


def test_by_machine_room_with_mixed_broker_names() -> None:
    mqs = (
        _queues(4, broker="idc1@broker-a")
        + _queues(3, broker="idc2@broker-b")
        + _queues(2, broker="idc3@broker-c")  # another room
        + _queues(2, broker="broker-plain")  # no room
        + _queues(1, broker="idc1@")  # Java split drops the trailing "": one part, no room
        + _queues(1, broker="idc1@x@y")  # three parts, no room
    )
    strategy = AllocateMessageQueueByMachineRoom(["idc1", "idc2"])
    cids = _cids(3)
    shares = _shares(strategy, mqs, cids)
    mine = sorted(mq for mq in mqs if mq.broker_name in ("idc1@broker-a", "idc2@broker-b"))
    # 7 queues over 3 clients: blocks of 2, then the leftover queue 6 goes to client 0.
    assert shares == [[mine[0], mine[1], mine[6]], [mine[2], mine[3]], [mine[4], mine[5]]]
    assert AllocateMessageQueueByMachineRoom(["idc9"]).allocate(GROUP, "cid-00", mqs, cids) == []
    with pytest.raises(MQClientError):
        AllocateMessageQueueByMachineRoom("idc1")


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_nothing_for_unknown_client_or_empty_lists(
    strategy: AllocateMessageQueueStrategy, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="mq.rebalance"):
        assert strategy.allocate(GROUP, "stranger", _queues(4), _cids(2)) == []
        assert "stranger" in caplog.text and "not among" in caplog.text
        caplog.clear()
        assert strategy.allocate(GROUP, "cid-00", [], _cids(2)) == []
        assert "no queues" in caplog.text
        caplog.clear()
        assert strategy.allocate(GROUP, "cid-00", _queues(4), []) == []
        assert "client list is empty" in caplog.text


@pytest.mark.parametrize("strategy", [*STRATEGIES, AllocateMessageQueueByConfig([])], ids=repr)
def test_empty_current_cid_is_an_error(strategy: AllocateMessageQueueStrategy) -> None:
    with pytest.raises(MQClientError):
        strategy.allocate(GROUP, "", _queues(4), _cids(2))


def test_names_match_rocketmq() -> None:
    assert AllocateMessageQueueAveragely().name == "AVG"
    assert AllocateMessageQueueAveragelyByCircle().name == "AVG_BY_CIRCLE"
    assert AllocateMessageQueueConsistentHash().name == "CONSISTENT_HASH"
    assert AllocateMessageQueueByConfig([]).name == "CONFIG"
    assert AllocateMessageQueueByMachineRoom([]).name == "MACHINE_ROOM"
