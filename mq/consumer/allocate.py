"""Queue allocation strategies for clustering rebalance [RocketMQ ``AllocateMessageQueueStrategy``].

Every client of a group runs the same strategy over the same inputs, so the shares agree without
any coordination. Inputs are deduplicated and sorted inside (queues by :class:`MessageQueue` order,
client ids lexicographically), as RocketMQ's ``RebalanceImpl`` sorts them before allocating.

Differences from RocketMQ, on purpose: an empty queue or client list returns ``[]`` and logs (RocketMQ
throws ``IllegalArgumentException``); errors in the call raise :class:`~mq.errors.MQClientError`.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from mq.errors import MQClientError
from mq.model.queue import MessageQueue

log = logging.getLogger("mq.rebalance")

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "md5_hash",
]


def md5_hash(key: str) -> int:
    """RocketMQ's default consistent-hash function (``ConsistentHashRouter.MD5Hash.hash``).

    The Java code is::

        instance.update(key.getBytes());            // platform charset: UTF-8 on Linux and on JDK 18+
        byte[] digest = instance.digest();
        long h = 0;
        for (int i = 0; i < 4; i++) { h <<= 8; h |= ((int) digest[i]) & 0xFF; }

    The ``& 0xFF`` undoes the sign extension of each ``byte``, and ``h`` is a ``long`` so nothing
    overflows: the result is the first 4 digest bytes read as a big-endian unsigned 32-bit number.
    """
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueStrategy(ABC):
    """How a group's queues are shared among its live clients.

    Subclasses set :attr:`name` and implement :meth:`allocate`; :meth:`sorted_inputs` does the
    argument checks and the sorting every built-in strategy shares.
    """

    #: The strategy's name, as RocketMQ's ``getName()`` reports it.
    name: str = ""

    @abstractmethod
    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """Return the queues client ``current_cid`` of ``group`` should consume, in queue order.

        Args:
            group: the consumer group (used in log messages).
            current_cid: this client's id; must be a non-empty string.
            mq_all: every readable queue of the subscribed topic, in any order.
            cid_all: every live client id of the group, in any order.

        Raises:
            MQClientError: ``current_cid`` is empty or not a string.
        """

    def sorted_inputs(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> tuple[list[MessageQueue], list[str]] | None:
        """Check the arguments like RocketMQ's ``AbstractAllocateMessageQueueStrategy.check``.

        Returns the deduplicated, sorted ``(queues, client ids)``, or ``None`` (after logging why to
        the ``mq.rebalance`` logger) when this client gets nothing: no queues, no clients, or
        ``current_cid`` is not among the clients.

        Raises:
            MQClientError: ``current_cid`` is empty or not a string.
        """
        _check_cid(current_cid)
        mqs = sorted(set(mq_all))
        cids = sorted(set(cid_all))
        if not mqs:
            log.info("group %s: no queues to allocate to client %s", group, current_cid)
            return None
        if not cids:
            log.info("group %s: client list is empty, nothing allocated to client %s", group, current_cid)
            return None
        if current_cid not in cids:
            log.info("group %s: client %s is not among the group's clients %s, nothing allocated", group, current_cid, cids)
            return None
        return mqs, cids

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _check_cid(current_cid: str) -> None:
    if not isinstance(current_cid, str) or not current_cid:
        raise MQClientError(f"current_cid is empty: {current_cid!r}")


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous blocks, the first ``n % c`` clients one queue larger (the default, ``AVG``).

    10 queues over 4 clients: ``{0,1,2} {3,4,5} {6,7} {8,9}``. With fewer queues than clients the
    first ``n`` clients get one queue each and the rest nothing.
    """

    name = "AVG"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See :meth:`AllocateMessageQueueStrategy.allocate`."""
        inputs = self.sorted_inputs(group, current_cid, mq_all, cid_all)
        if inputs is None:
            return []
        mqs, cids = inputs
        n, c, index = len(mqs), len(cids), cids.index(current_cid)
        mod = n % c
        bigger = mod > 0 and index < mod  # the first n % c clients take one queue more
        size = 1 if n <= c else (n // c + 1 if bigger else n // c)
        start = index * size if bigger else index * size + mod
        count = min(size, n - start)  # may be <= 0: this client gets nothing
        return mqs[start : start + max(count, 0)]


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Round robin: queue ``k`` goes to client ``k % c`` (``AVG_BY_CIRCLE``)."""

    name = "AVG_BY_CIRCLE"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See :meth:`AllocateMessageQueueStrategy.allocate`."""
        inputs = self.sorted_inputs(group, current_cid, mq_all, cid_all)
        if inputs is None:
            return []
        mqs, cids = inputs
        return mqs[cids.index(current_cid) :: len(cids)]


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """Consistent hashing on an MD5 ring (``CONSISTENT_HASH``); few queues move when clients come and go.

    Each client puts ``virtual_node_count`` nodes on the ring, keyed ``"<cid>-<j>"`` for
    ``j = 0 .. v-1`` (RocketMQ's ``VirtualNode.getKey()``), at :func:`md5_hash` of the key. A queue,
    keyed ``str(mq)`` (RocketMQ's ``MessageQueue.toString()``), belongs to the first node whose hash is
    ``>=`` its own, wrapping round to the smallest. When two virtual nodes collide the one added last
    wins, as with RocketMQ's ``TreeMap.put`` (clients are added in sorted order).

    RocketMQ accepts ``virtualNodeCnt == 0`` and then allocates nothing to anyone; here it is an error.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10) -> None:
        """Raises :class:`MQClientError` when ``virtual_node_count`` is not an int ``>= 1``."""
        if isinstance(virtual_node_count, bool) or not isinstance(virtual_node_count, int) or virtual_node_count < 1:
            raise MQClientError(f"illegal virtual_node_count: {virtual_node_count!r} (must be >= 1)")
        self.virtual_node_count = virtual_node_count

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See :meth:`AllocateMessageQueueStrategy.allocate`."""
        inputs = self.sorted_inputs(group, current_cid, mq_all, cid_all)
        if inputs is None:
            return []
        mqs, cids = inputs
        ring: dict[int, str] = {}
        for cid in cids:
            for j in range(self.virtual_node_count):
                ring[md5_hash(f"{cid}-{j}")] = cid  # a collision: the later node replaces the earlier
        points = sorted(ring)
        result = []
        for mq in mqs:
            pos = bisect.bisect_left(points, md5_hash(str(mq)))  # first point >= the queue's hash
            if ring[points[pos % len(points)]] == current_cid:
                result.append(mq)
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}(virtual_node_count={self.virtual_node_count})"


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """A fixed list of queues, the same for every client (``CONFIG``).

    As in RocketMQ the queue and client lists are ignored: every caller gets the configured queues
    (sorted), whether or not they currently exist or the caller is among the clients.
    """

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        """Raises :class:`MQClientError` when an item is not a :class:`MessageQueue`."""
        items = list(queues)
        for mq in items:
            if not isinstance(mq, MessageQueue):
                raise MQClientError(f"AllocateMessageQueueByConfig takes MessageQueue items, got {mq!r}")
        self.queues: tuple[MessageQueue, ...] = tuple(sorted(set(items)))

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See :meth:`AllocateMessageQueueStrategy.allocate`; returns a fresh list of the configured queues."""
        _check_cid(current_cid)
        return list(self.queues)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.queues)!r})"


def _machine_room(broker_name: str) -> str | None:
    """The ``idc`` of a broker named ``idc@name``, split like Java's ``brokerName.split("@")``.

    Java drops trailing empty strings and RocketMQ then requires exactly two parts, so ``"idc@"``
    and ``"a@b@c"`` have no room while ``"@name"`` is in room ``""``.
    """
    parts = broker_name.split("@")
    while parts and parts[-1] == "":
        parts.pop()
    return parts[0] if len(parts) == 2 else None


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Only queues of brokers named ``idc@name`` with ``idc`` in ``consumer_idcs`` (``MACHINE_ROOM``).

    With ``m`` such queues and ``c`` clients, client ``i`` gets the block ``[i*(m//c), (i+1)*(m//c))``
    plus queue ``i + (m//c)*c`` when ``i < m % c``. Queues of other brokers go to nobody.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str]) -> None:
        """Raises :class:`MQClientError` when ``consumer_idcs`` is a bare string (a likely mistake)."""
        if isinstance(consumer_idcs, str):
            raise MQClientError("consumer_idcs must be a collection of room names, not a string")
        self.consumer_idcs: frozenset[str] = frozenset(consumer_idcs)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """See :meth:`AllocateMessageQueueStrategy.allocate`."""
        inputs = self.sorted_inputs(group, current_cid, mq_all, cid_all)
        if inputs is None:
            return []
        mqs, cids = inputs
        mine = [mq for mq in mqs if _machine_room(mq.broker_name) in self.consumer_idcs]
        c, index = len(cids), cids.index(current_cid)
        block, rem = divmod(len(mine), c)
        result = mine[index * block : (index + 1) * block]
        if index < rem:
            result.append(mine[index + block * c])
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.consumer_idcs)!r})"
