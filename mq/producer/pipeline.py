"""The pipelined sender's decisions, written once for the sync ``send_async`` thread
(:mod:`mq.producer.async_sender`) and the ``mq.aio.Producer`` task (:mod:`mq.aio.sender`).

Sans-I/O: no thread, no event loop, no store. A driver holds the pending sends and the rounds it
wrote; it asks :meth:`SendPipeline.step` what to do next, takes a round's share of the pending sends
with :meth:`SendPipeline.take`, turns them into put calls with :meth:`SendPipeline.plan`, writes the
round's :attr:`Round.puts` with the store, and learns what the replies mean for each send with
:meth:`SendPipeline.settle`. Resolving futures, retrying through the normal path and logging are
the driver's.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from mq.errors import MQBrokerError, ReplicaAckTimeout, StoreEvictedError
from mq.model.message import Duplicate, SendResult, SendStatus
from mq.model.queue import MessageQueue
from mq.producer.request import SendRequest, split_ends

#: Most sends one round of the sync sender carries (the asyncio one carries twice as many, D56).
MAX_PIPELINE = 128

T = TypeVar("T")


class Ready(Protocol):
    """A prepared send, as the core sees it: what to store and where its pipelined attempt goes.
    Whoever waits for it is the driver's business (the core never touches a future)."""

    request: SendRequest
    target: MessageQueue


#: A driver's kind of prepared send (the core reads only what :class:`Ready` says).
S = TypeVar("S", bound=Ready)


@dataclass(slots=True)
class Pending:
    """A send waiting for its round (a :class:`Ready` once its ``target`` is set).

    Attributes:
        request: what to store.
        future: what its caller waits on, for the driver to resolve; None for a oneway send (nobody
            waits: it is not retried and its failure is only logged).
        target: where its pipelined attempt goes, set by whoever chooses it (the sync sender's
            thread, or the caller of the asyncio one).
    """

    request: SendRequest
    future: Any
    target: MessageQueue = field(init=False)


@dataclass(slots=True)
class PutCall(Generic[S]):
    """One put script call of a round: the queue and the sends it stores, in order (consecutive offsets)."""

    queue: MessageQueue
    sends: list[S]


@dataclass(slots=True)
class Round(Generic[S]):
    """One pipeline of put calls: its sends, its calls and, once written ahead on a connection of
    the sender's own, the handle its replies are read with."""

    sends: list[S]
    calls: list[PutCall[S]]
    handle: Any = None

    @property
    def puts(self) -> list[tuple[str, int, list[Sequence[Any]]]]:
        """The :meth:`~mq.store.Store.put_many` arguments of the round's calls."""
        return [(c.queue.topic, c.queue.queue_id, [p.request.fields for p in c.sends]) for c in self.calls]


@dataclass(slots=True)
class Settled(Generic[S]):
    """What a round's replies mean (:meth:`SendPipeline.settle`).

    Attributes:
        sends, outcomes: each send someone waits for and, at the same index, its result or error,
            for the driver to complete (two lists, no pair a send: a round's sends are many objects
            for the garbage collector already, D64).
        retries: the sends to retry through the normal path.
        oneway_failed: the oneway sends that failed, with their errors, for the driver to log.
    """

    sends: list[S]
    outcomes: list[SendResult | BaseException]
    retries: list[S]
    oneway_failed: list[tuple[S, BaseException]]


class Step(enum.Enum):
    """What a driver does next."""

    #: take a round's share of the pending sends and write it
    WRITE = "write"
    #: read the oldest round written (or, with rounds each in a task of its own, wait for one to end)
    READ = "read"
    #: wait until a send is queued
    WAIT = "wait"
    #: nothing pending, nothing written and the producer is closing: end
    STOP = "stop"


class SendPipeline:
    """How many sends a round carries and how many rounds are in flight at once.

    Args:
        max_round: most sends one round carries (its sends to one queue go in one put call).
        rounds_in_flight: most rounds written and not read at once: while one waits for its replies
            the next is packed and written (D57).
    """

    __slots__ = ("max_round", "rounds_in_flight")

    def __init__(self, max_round: int, rounds_in_flight: int) -> None:
        self.max_round = max_round
        self.rounds_in_flight = rounds_in_flight

    def step(self, pending: int, written: int, closing: bool) -> Step:
        """The next step with ``pending`` sends queued and ``written`` rounds not read: write while
        there is something to write and room in flight, else read the oldest round, else end (when
        closing) or wait. Pending sends are written before the driver stops, so a shutdown sends what
        was queued before it."""
        if pending and written < self.rounds_in_flight:
            return Step.WRITE
        if written:
            return Step.READ
        return Step.STOP if closing else Step.WAIT

    def take(self, pending: list[T]) -> tuple[list[T], list[T]]:
        """The next round's share of ``pending`` (the oldest, at most ``max_round``), and the rest."""
        if len(pending) <= self.max_round:
            return pending, []
        return pending[: self.max_round], pending[self.max_round :]

    @staticmethod
    def plan(sends: list[S]) -> Round[S] | None:
        """The round of ``sends``: those bound for the same queue grouped (in send order, consecutive
        offsets) into put calls of bounded size; None when there is nothing to send."""
        if not sends:
            return None
        groups: dict[MessageQueue, list[S]] = {}
        calls: list[PutCall[S]] = []
        for p in sends:
            if p.request.dedup is None:
                groups.setdefault(p.target, []).append(p)
            else:  # its put may store nothing (a duplicate): a call of its own (D140)
                calls.append(PutCall(p.target, [p]))
        for mq, group in groups.items():
            start = 0
            for end in split_ends([p.request.fields for p in group]):
                calls.append(PutCall(mq, group if start == 0 and end == len(group) else group[start:end]))
                start = end
        return Round(sends, calls)

    @staticmethod
    def settle(round_: Round[S], results: Sequence[Any]) -> Settled[S]:
        """What the round's replies (one a put call: its first offset, or an error) mean for each of
        its sends, in one pass: the results and errors of those someone waits for (not oneway), the sends to retry
        through the normal path (a store failure of a send someone waits for: there it may go to
        another queue or node), and the failed oneway sends (not retried, as in RocketMQ: logged)."""
        settled: Settled[S] = Settled([], [], [], [])
        send_of, outcome_of = settled.sends.append, settled.outcomes.append
        retries, oneway = settled.retries.append, settled.oneway_failed.append
        for call, result in zip(round_.calls, results):
            if isinstance(result, Exception) and not isinstance(result, ReplicaAckTimeout):
                # evicted keys are the operator's to fix: another queue would hide them (as the sync path)
                retried = isinstance(result, MQBrokerError) and not isinstance(result, StoreEvictedError)
                unsure = call.queue if isinstance(result, MQBrokerError) and retried and not result.answered else None
                for p in call.sends:
                    if p.request.oneway:
                        oneway((p, result))
                    elif retried:
                        p.request.unsure = unsure  # its retry looks there first (D140)
                        retries(p)
                    else:
                        send_of(p)
                        outcome_of(result)
                continue
            if isinstance(result, ReplicaAckTimeout):  # stored, not confirmed: not retried (no second copy)
                status, offset, result = SendStatus.FLUSH_SLAVE_TIMEOUT, result.result[0], result.result
            else:
                status, offset = SendStatus.SEND_OK, result[0]
            mq = call.queue
            if result.__class__ is Duplicate:  # a dedup id seen in the window: the first send's (D140)
                p = call.sends[0]
                if not p.request.oneway:
                    send_of(p)
                    outcome_of(SendResult(status, result.msg_id, mq, offset, duplicate=True))
                continue
            for p in call.sends:
                request = p.request
                if not request.oneway:  # a oneway send's result is nobody's
                    send_of(p)
                    outcome_of(SendResult(status, request.msg_id, mq, offset))
                offset += 1
        return settled

    @staticmethod
    def lost(round_: Round[Any], error: BaseException) -> list[BaseException]:
        """The replies of a round whose pipeline failed whole (a lost connection): ``error`` for each
        call, so that :meth:`settle` retries what it may."""
        return [error] * len(round_.calls)
