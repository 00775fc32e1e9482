"""The parts a :class:`~mq.consumer.core.ConsumerCore` is composed of besides ownership, offsets, the
puller and the long poller: what identifies a member, what its kind of consumption tells the core,
and how timed jobs report failures."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.start import StartPolicy
from mq.consumer.types import MessageModel
from mq.model.message import MessageExt

log = logging.getLogger("mq.consumer")


class Consumption(Protocol):
    """How a consumer kind hands messages on and what it lets the core commit."""

    @property
    def max_span(self) -> int | None:
        """Flow-control offset span of cached messages (None: no limit)."""
        ...

    @property
    def drains_on_release(self) -> bool:
        """Whether a queue being released first waits for its cached messages to be consumed."""
        ...

    #: Whether a queue's starting offset is stored for the group at once (False: only commits store offsets).
    seeds_start: bool

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """New messages of ``pq`` (``[]``: a queue handed back before release goes on)."""
        ...

    def commit_offset(self, pq: ProcessQueue) -> int | None:
        """The offset that may be committed for ``pq`` now; None: nothing to commit."""
        ...


@dataclass
class ConsumerSettings:
    """What identifies a member and how it reads."""

    group: str
    client_id: str
    message_model: MessageModel
    strategy: AllocateMessageQueueStrategy
    pull_batch_size: int
    start: StartPolicy


def logged_job(fn: Callable[[], None], job_id: str, group: str) -> Callable[[], None]:
    """A job body that logs any exception at ERROR instead of losing it in the scheduler."""

    def job() -> None:
        try:
            fn()
        except Exception:
            log.exception("job %s of consumer group %s failed (it runs again at its next interval)", job_id, group)

    return job
