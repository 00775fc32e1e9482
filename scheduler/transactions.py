"""Transaction check-back: ask a live producer of the group about half messages whose outcome is
unknown [RocketMQ ``TransactionalMessageCheckService``].

Every ``transaction_check_interval_s`` the job takes the queues whose half messages are due (the
``{ns}:halves`` index), and per queue runs ``check-halves``: it counts one check for each due half
message and schedules the next one an interval later (atomic, so replicas never ask twice in an
interval), or rolls back and records those past ``transaction_check_max`` checks or the reserve
time. For each check the job posts a request to the producer group's ``txcheck`` stream, where any
live member picks it up, runs its checker and commits or rolls back.
"""

from __future__ import annotations

import logging
import time

from mq.errors import MQBrokerError
from mq.producer.transaction import PGROUP
from mq.store import Store
from scheduler.config import BrokerConfig
from scheduler.index import QueueIndex

log = logging.getLogger("scheduler.transactions")

#: Half messages taken per queue per round.
HALVES_PER_QUEUE = 500


class TransactionChecker:
    """The check-back job of one namespace."""

    def __init__(self, store: Store, config: BrokerConfig) -> None:
        self._store = store
        self._config = config
        self.index = QueueIndex(store, store.keys.halves, lambda keys: keys.halfidx)
        self.asked = 0
        self.discarded = 0

    def run(self) -> None:
        """One round over every queue with half messages due now."""
        c = self._config
        while True:
            now = int(time.time() * 1000)
            queues = self.index.due(now)
            if not queues:
                return
            results = self._store.check_halves(
                queues,
                now,
                int(c.transaction_check_interval_s * 1000),
                c.transaction_check_max,
                int(c.transaction_reserve_h * 3_600_000),
                HALVES_PER_QUEUE,
            )
            for (topic, qid), (_, items) in zip(queues, results):
                self._ask(topic, qid, [(half_id, checks) for kind, half_id, checks in items if kind == "c"])
                for kind, half_id, checks in items:
                    if kind == "x":
                        self.discarded += 1
                        log.warning(
                            "half message %s of %s queue %d rolled back after %d checks (listed by Admin.discarded_transactions)",
                            half_id,
                            topic,
                            qid,
                            checks,
                        )
            self.index.write_back(queues, [next_ms for next_ms, _ in results])

    def _ask(self, topic: str, qid: int, halves: list[tuple[str, int]]) -> None:
        for half_id, checks in halves:
            try:
                self._ask_one(topic, qid, half_id, checks)
            except MQBrokerError:
                raise  # the store failed: the round stops and the job runs again
            except Exception:  # one bad half message must not stop the check-backs of the others
                log.exception(
                    "check-back of half message %s of %r queue %d failed; it is asked again next interval", half_id, topic, qid
                )

    def _ask_one(self, topic: str, qid: int, half_id: str, checks: int) -> None:
        msg = self._store.read_half(topic, qid, half_id)
        if msg is None:
            return
        group = msg.system_properties.get(PGROUP)
        if not group:
            return
        self._store.ask_check(group, topic, qid, half_id, checks)
        self.asked += 1
