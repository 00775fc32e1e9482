"""Telemetry streams: one session per connected client, the commands the endpoint pushes to it, and
the pump that turns the broker service's transaction check-backs into
``RecoverOrphanedTransactionCommand``s for a producer publishing the half message's topic."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from mq.producer.tx_core import CheckRequest, transaction_id
from mq.proxy import convert
from mq.proxy.backend import is_outage
from mq.proxy.pb import service

#: This module's own random numbers: a library must not draw from (and so shift) the application's
#: global ``random`` stream, which a program may seed to repeat its runs.
_RANDOM = random.Random()

if TYPE_CHECKING:
    from mq.proxy.backend import Backend

log = logging.getLogger("mq.proxy")

#: Check-back requests read at a time, and how long one read blocks, ms.
CHECK_BATCH, CHECK_BLOCK_MS = 16, 1000
#: Commands waiting for one client before new ones are dropped (the client is not reading).
SESSION_QUEUE = 256


class Session:
    """One open Telemetry stream: the client's settings and the commands waiting to be sent to it."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.settings: Any | None = None
        self._queue: asyncio.Queue[Any | None] = asyncio.Queue(SESSION_QUEUE)

    async def put(self, command: Any) -> None:
        """Send ``command`` to the client."""
        await self._queue.put(command)

    def offer(self, command: Any) -> bool:
        """Send ``command`` unless the client is that far behind; whether it was queued."""
        try:
            self._queue.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True

    def close(self) -> None:
        """End the stream once the commands before are sent."""
        with contextlib.suppress(asyncio.QueueFull):  # full: the reader is gone; the stream ends with the call
            self._queue.put_nowait(None)

    async def commands(self) -> AsyncIterator[Any]:
        """The commands to send, until :meth:`close`."""
        while (command := await self._queue.get()) is not None:
            yield command

    def publishes(self, topic: str) -> bool:
        """Whether this client is a producer that declared ``topic``."""
        s = self.settings
        return s is not None and s.WhichOneof("pub_sub") == "publishing" and any(t.name == topic for t in s.publishing.topics)


class Sessions:
    """The open Telemetry sessions of this endpoint process, by client id."""

    def __init__(self) -> None:
        self._by_client: dict[str, Session] = {}

    def open(self, client_id: str) -> Session:
        """A new session for ``client_id`` (a reconnecting client's new stream replaces its old one)."""
        session = Session(client_id)
        old = self._by_client.get(client_id)
        if old is not None:
            session.settings = old.settings
            old.close()
        self._by_client[client_id] = session
        return session

    def update(self, client_id: str, settings: Any) -> None:
        """Keep the settings ``client_id`` sent."""
        session = self._by_client.get(client_id)
        if session is not None:
            session.settings = settings

    def settings_of(self, client_id: str) -> Any | None:
        """The settings of a client with an open stream, else None."""
        session = self._by_client.get(client_id)
        return session.settings if session is not None else None

    def close(self, session: Session) -> None:
        """Forget ``session`` (unless the client opened a newer one)."""
        if self._by_client.get(session.client_id) is session:
            del self._by_client[session.client_id]

    def forget(self, client_id: str) -> None:
        """Close and forget the stream of a client that terminated."""
        session = self._by_client.pop(client_id, None)
        if session is not None:
            session.close()

    def producer_for(self, topic: str) -> Session | None:
        """A random live producer that declared ``topic``, or None."""
        candidates = [s for s in self._by_client.values() if s.publishes(topic)]
        return _RANDOM.choice(candidates) if candidates else None


async def pump_checks(backend: Backend, sessions: Sessions, group: str, consumer: str, stop: asyncio.Event) -> None:
    """Until ``stop``: read check-back requests of producer group ``group`` (posted by the broker
    service) and push each to a producer of the half message's topic connected here. A request no
    producer here can take is acknowledged all the same: the broker asks again at its next check.
    The stream's reader group must exist (``join_checks``)."""
    rejoin = False
    while not stop.is_set():
        try:
            if rejoin:  # the store came back, perhaps without the stream's reader group (a restart without persistence)
                await backend.call("join_checks", group)
            entries = await backend.blocking("read_checks", group, consumer, CHECK_BATCH, CHECK_BLOCK_MS)
            rejoin = False
            backend.report_up()
            for entry_id, fields in entries:
                await _push_check(backend, sessions, fields)
                await backend.call("ack_check", group, entry_id)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if is_outage(e):
                backend.report_down("reading transaction check-backs", e)  # once, not every second until it is back
                rejoin = True
            else:
                log.exception("reading transaction check-backs failed; trying again in 1 s")
            await asyncio.sleep(1.0)


async def _push_check(backend: Backend, sessions: Sessions, fields: dict[bytes, bytes]) -> None:
    request = CheckRequest.parse(fields)
    session = sessions.producer_for(request.topic)
    if session is None:
        log.info(
            "check-back of half message %s of %r: no producer of the topic is connected here", request.half_id, request.topic
        )
        return
    msg = await backend.call("read_half", request.topic, request.queue_id, request.half_id)
    if msg is None:
        return  # resolved meanwhile
    command = service.TelemetryCommand()
    recover = command.recover_orphaned_transaction_command
    recover.message.CopyFrom(convert.outgoing(msg, transaction=True))
    recover.transaction_id = transaction_id(request.topic, request.queue_id, request.half_id)
    if not session.offer(command):
        log.warning("client %s is not reading its telemetry stream: check-back of %s dropped", session.client_id, request.half_id)
