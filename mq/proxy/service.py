"""The RocketMQ 5 ``MessagingService`` over rocketredis' store (the RPC handlers of ``mq proxy``).

Every answer carries a ``Status``; a refused request changes nothing in the store (messages are
checked before the first write). Handlers are coroutines on grpc.aio; store calls go through
:class:`~mq.proxy.backend.Backend`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mq.consumer.puller import filter_args
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, HEARTBEAT_TIMEOUT_S
from mq.consumer.retry import retry_topic
from mq.consumer.simple import MAX_INVISIBLE_S, MAX_RECEIVE, MIN_INVISIBLE_S, MessageView, received_view
from mq.consumer.simple_core import EVERY_TAG, dead_letter_op, receive_round_op, seed_cursors_op
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQBrokerError, MQClientError
from mq.filter import MessageSelector
from mq.model.group import GroupConfig
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.model.recall import make_handle, parse_handle
from mq.model.topic import TopicConfig
from mq.model.validation import MAX_DELAY_MS, RETRY_PREFIX, check_group
from mq.producer.request import split_puts
from mq.producer.route import no_levels
from mq.producer.selectors import consistent_hash, java_hash
from mq.producer.tx_core import PGROUP, transaction_id, transaction_timeout_ms
from mq.proxy import convert
from mq.proxy.auth import Credentials
from mq.proxy.backend import Backend, is_outage
from mq.proxy.codes import OK, ProxyError, code_of, status
from mq.proxy.metrics import ProxyMetrics
from mq.proxy.pb import definition, service
from mq.proxy.settings import Limits, check_client_settings, client_info, reply
from mq.proxy.telemetry import Sessions
from mq.proxy.tracing import EndpointTrace, Receipt, receipt_of
from mq.store import codec
from mq.store.clock import ClockOffset

log = logging.getLogger("mq.proxy")
#: The filter the group's retry topic is read with: every message (its copies passed the filter when first read).
UNFILTERED = filter_args(EVERY_TAG)

#: The producer group of half messages sent through the endpoint (RocketMQ 5 producers have none):
#: the broker service posts their check-backs to this group, and the endpoint pushes them on.
PROXY_PRODUCER_GROUP = "rocketredis-proxy"
#: How long the store keeps a client's settings after its last Telemetry update, ms.
SETTINGS_TTL_MS = 3_600_000
#: Seconds a topic's config is reused before it is read again (a producer's route cache does the same;
#: a deleted or shrunk queue is still caught by the put script).
TOPIC_TTL_S = 1.0
#: Seconds a group's config is reused before it is read again.
GROUP_CONFIG_TTL_S = 2.0
#: Waits between empty polls of a long poll, seconds: from the first to the last, doubling, where a
#: receive cannot be woken by an arrival (a cluster, a paused group); elsewhere POLL_MAX_S bounds one
#: blocking wait for news (:meth:`MessagingService._wait_for_news`).
POLL_FIRST_S, POLL_MAX_S = 0.05, 0.5
#: Seconds kept from a ReceiveMessage's gRPC deadline to send the answer.
DEADLINE_MARGIN_S = 0.5


@dataclass
class _Write:
    """One store call of a SendMessage request: messages ``indexes`` (of the request) into one queue."""

    topic: str
    queue_id: int
    indexes: list[int]
    encoded: list[Any]
    call: str


def _encoded(item: convert.Incoming, extra: dict[str, str] | None = None) -> Any:
    system = {**item.system, **(extra or {})}
    return codec.encode(item.message, item.msg_id, item.born_ms, system_properties=system or None)


def _shared_read(
    reads: dict[tuple[str, str], asyncio.Future[Any]], key: tuple[str, str], read: Callable[[], Awaitable[Any]]
) -> Awaitable[Any]:
    """The store read of ``key`` in flight, else a new one: the calls that find a cached entry stale at
    the same moment share one read instead of each making its own (with 64 sends in flight, each expiry
    of a topic's config made up to 64 reads of it). A caller cancelled while waiting leaves the read
    running for the others."""
    future = reads.get(key)
    if future is None:
        future = reads[key] = asyncio.ensure_future(read())
        future.add_done_callback(lambda done: _read_done(reads, key, done))
    return asyncio.shield(future)


def _read_done(reads: dict[tuple[str, str], asyncio.Future[Any]], key: tuple[str, str], done: asyncio.Future[Any]) -> None:
    if reads.get(key) is done:
        del reads[key]
    if not done.cancelled():
        done.exception()  # retrieved here: a read whose callers were all cancelled ends quietly


def _level_queues(config: TopicConfig, item: convert.Incoming, writable: list[int]) -> list[int]:
    """The ids of ``writable`` (the topic's writable queues) ``item`` may go to: on a priority topic,
    those of its priority's level (D142).

    Raises:
        ProxyError: ``BAD_REQUEST`` for a priority on a topic without levels, or a FIFO message on a
            priority topic.
    """
    priority = item.message.priority
    if not config.priority_levels:
        if priority:
            raise ProxyError("BAD_REQUEST", f"message {item.msg_id}: {no_levels(config.name, priority)}")
        return writable
    if item.group is not None:
        raise ProxyError("BAD_REQUEST", f"message {item.msg_id}: topic {config.name!r} has priority levels: no FIFO messages")
    level = config.level_for(priority)
    return [q for q in writable if config.level_of(q) == level]


@dataclass
class _GroupCache:
    config: GroupConfig | None
    read_s: float


@dataclass
class RpcCall:
    """What every handler knows about the call: the headers, the client id and the RPC name."""

    rpc: str
    metadata: dict[str, str]
    client_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.client_id = self.metadata.get("x-mq-client-id", "")


def _headers(context: Any) -> dict[str, str]:
    return {k.lower(): v if isinstance(v, str) else v.decode(errors="replace") for k, v in context.invocation_metadata() or ()}


class MessagingService:
    """The handlers of ``apache.rocketmq.v2.MessagingService`` (registered by name with grpc).

    Args:
        backend: the store.
        limits: sizes, timeouts and attempts (announced in the settings reply).
        credentials: the access key pair requests must be signed with (None: no authentication).
        max_delay_ms: furthest ahead a delivery time may be.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        limits: Limits | None = None,
        credentials: Credentials | None = None,
        metrics: ProxyMetrics | None = None,
        max_delay_ms: int = MAX_DELAY_MS,
        replica_id: str = "proxy",
    ) -> None:
        self.backend = backend
        self.limits = limits or Limits()
        self.credentials = credentials
        self.metrics = metrics
        self.max_delay_ms = max_delay_ms
        self.sessions = Sessions()
        self.replica_id = replica_id
        self._turns: dict[str, itertools.count[int]] = {}
        #: Due and invisibility times are on the store's clock, not this host's (D25).
        self._clock = ClockOffset()
        self._groups: dict[str, _GroupCache] = {}
        self._seeded: set[tuple[str, str]] = set()
        self._tx_timeout_ms: int | None = None
        self._topics: dict[str, tuple[TopicConfig, float]] = {}
        #: the writable queue ids of each cached topic config (found once a config, not once a message)
        self._writable_ids: dict[str, tuple[TopicConfig, list[int]]] = {}
        #: the cache reads in flight (topic and group configs, the clock), shared by concurrent calls
        self._reads: dict[tuple[str, str], asyncio.Future[Any]] = {}
        #: groups found without a retry topic, and when (monotonic s): not read again for TOPIC_TTL_S
        self._no_retry_topic: dict[str, float] = {}
        #: The message trace of receives, acks and dead letters (D52's events), per group.
        self.trace = EndpointTrace(backend.store, replica_id, self._now_ms)

    async def close(self) -> None:
        """Write the trace events left (before the store is closed)."""
        await self.trace.close()

    # -- the frame of every RPC -----------------------------------------------------------------

    def _begin(self, rpc: str, context: Any) -> RpcCall:
        if self.metrics is not None:
            self.metrics.request(rpc)
        request = RpcCall(rpc, _headers(context))
        if self.credentials is not None:
            self.credentials.check(request.metadata)
        return request

    def _failed(self, rpc: str, error: BaseException) -> Any:
        code, message = code_of(error)
        if self.metrics is not None:
            self.metrics.errors.labels(rpc, code).inc()
        if isinstance(error, ProxyError | MQClientError):
            log.info("%s refused: %s %s", rpc, code, message)
        elif is_outage(error):
            self.backend.report_down(f"serving {rpc}", error)  # one line per outage, not a traceback per request
        else:
            log.error("%s failed: %s", rpc, message, exc_info=error)
        return status(code, message)

    async def _unary(self, rpc: str, context: Any, response: Any, body: Callable[[RpcCall], Awaitable[Any]]) -> Any:
        try:
            request = self._begin(rpc, context)
            return await body(request)
        except Exception as e:
            return response(status=self._failed(rpc, e))

    # -- routes ---------------------------------------------------------------------------------

    async def _topic(self, name: str) -> TopicConfig:
        """The topic's config, read again after :data:`TOPIC_TTL_S` (a missing topic is never cached)."""
        cached = self._topics.get(name)
        if cached is not None and time.monotonic() - cached[1] < TOPIC_TTL_S:
            return cached[0]
        config: TopicConfig = await _shared_read(self._reads, ("topic", name), lambda: self._read_topic(name))
        return config

    async def _read_topic(self, name: str) -> TopicConfig:
        config: TopicConfig | None = await self.backend.call("topic", name)
        if config is None:
            self._topics.pop(name, None)
            raise ProxyError("TOPIC_NOT_FOUND", f"topic {name!r} does not exist: create it with mq topic create")
        self._topics[name] = (config, time.monotonic())
        return config

    def _levels(self, queues: list[MessageQueue]) -> dict[str, int]:
        """Priority levels of the topics of ``queues`` that have them (from the cached configs, D142)."""
        configs = (self._topics.get(t) for t in {q.topic for q in queues})
        return {c[0].name: c[0].priority_levels for c in configs if c is not None and c[0].priority_levels}

    async def _retry_queues(self, group: str) -> list[MessageQueue]:
        """The readable queues of ``group``'s retry topic (none until a message is first sent back); its
        config, or its absence, is read again after :data:`TOPIC_TTL_S`. Dead letters resent by
        ``Admin.resend_dlq`` come back there, and a receive reads them after the topic's own queues, as
        the simple consumers do."""
        name = retry_topic(group)
        cached = self._topics.get(name)
        if cached is None or time.monotonic() - cached[1] >= TOPIC_TTL_S:
            if time.monotonic() - self._no_retry_topic.get(group, -TOPIC_TTL_S) < TOPIC_TTL_S:
                return []
            config: TopicConfig | None = await self.backend.call("topic", name)
            if config is None:
                self._no_retry_topic[group] = time.monotonic()
                return []
            self._no_retry_topic.pop(group, None)
            self._topics[name] = (config, time.monotonic())
        return await self._seed(group, name)

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            config = await self._topic(request.topic.name)
            out = service.QueryRouteResponse(status=status())
            for qid in range(config.queue_count):
                readable, writable = config.readable(qid), config.writable(qid)
                perm = "READ_WRITE" if readable and writable else "READ" if readable else "WRITE" if writable else "NONE"
                _route_queue(out.message_queues.add(), request, qid, perm, config)
            return out

        return await self._unary("QueryRoute", context, service.QueryRouteResponse, body)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            config = await self._topic(request.topic.name)
            out = service.QueryAssignmentResponse(status=status())
            for qid in range(config.queue_count):
                if not config.readable(qid):
                    continue
                _route_queue(out.assignments.add().message_queue, request, qid, "READ_WRITE", config)
            return out

        return await self._unary("QueryAssignment", context, service.QueryAssignmentResponse, body)

    # -- clients --------------------------------------------------------------------------------

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        async def body(req: RpcCall) -> Any:
            if request.HasField("group") and request.group.name and req.client_id:
                settings = await self._client_settings(req.client_id)
                await self._heartbeat(request.group.name, req.client_id, settings, context.peer())
            return service.HeartbeatResponse(status=status())

        return await self._unary("Heartbeat", context, service.HeartbeatResponse, body)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        async def body(req: RpcCall) -> Any:
            if request.HasField("group") and request.group.name and req.client_id:
                await self.backend.call("unregister_client", _group(request.group.name), req.client_id)
            self.sessions.forget(req.client_id)
            return service.NotifyClientTerminationResponse(status=status())

        return await self._unary("NotifyClientTermination", context, service.NotifyClientTerminationResponse, body)

    async def _client_settings(self, client_id: str) -> Any | None:
        """A client's settings: from its live Telemetry stream, else as the store kept them."""
        live = self.sessions.settings_of(client_id)
        if live is not None:
            return live
        raw = await self.backend.call("proxy_client", client_id)
        return definition.Settings.FromString(raw) if raw else None

    async def Telemetry(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        try:
            req = self._begin("Telemetry", context)
        except Exception as e:
            yield service.TelemetryCommand(status=self._failed("Telemetry", e))
            return
        session = self.sessions.open(req.client_id)

        async def read() -> None:
            # A client that half-closes keeps receiving commands (check-backs) until it cancels the call.
            try:
                async for command in request_iterator:
                    if command.HasField("settings"):
                        await session.put(await self._settings_command(req, command.settings))
            except Exception as e:  # the stream broke: end it, the client reconnects
                log.info("telemetry stream of %s ended: %s", req.client_id, e)
                session.close()

        reader = asyncio.create_task(read())
        beat = asyncio.create_task(self._beat(req.client_id, context.peer()))
        try:
            async for command in session.commands():
                yield command
        finally:
            reader.cancel()
            beat.cancel()
            self.sessions.close(session)

    async def _beat(self, client_id: str, peer: str) -> None:
        """While a consumer's Telemetry stream is open, keep it live in its group's registry as often as
        rocketredis' own clients beat (RocketMQ 5 clients send Heartbeat only every 10 s)."""
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            settings = self.sessions.settings_of(client_id)
            if settings is None or settings.WhichOneof("pub_sub") != "subscription" or not settings.subscription.group.name:
                continue
            try:
                await self._heartbeat(settings.subscription.group.name, client_id, settings, peer)
            except Exception as e:  # the store is down: the next beat tries again
                log.warning("heartbeat of %s failed: %s", client_id, e)

    async def _heartbeat(self, group_name: str, client_id: str, settings: Any | None, peer: str) -> None:
        info = client_info(client_id, settings, peer) if settings is not None else ""
        await self.backend.call("heartbeat", _group(group_name), client_id, info, int(HEARTBEAT_TIMEOUT_S * 1000))

    async def _settings_command(self, req: RpcCall, settings: Any) -> Any:
        try:
            check_client_settings(settings)
            is_consumer = settings.WhichOneof("pub_sub") == "subscription"
            fifo, attempts = False, self.limits.max_delivery_attempts
            if is_consumer:
                group = _group(settings.subscription.group.name)
                config = await self._group_config(group)
                fifo, attempts = self._delivery(config)
                await self.backend.call("register_group", group)
                for entry in settings.subscription.subscriptions:
                    await self._seed(group, entry.topic.name)
            answer = reply(settings, limits=self.limits, fifo=fifo, max_attempts=attempts)
            self.sessions.update(req.client_id, settings)
            await self.backend.call("save_proxy_client", req.client_id, settings.SerializeToString(), SETTINGS_TTL_MS)
            return service.TelemetryCommand(status=status(), settings=answer)
        except Exception as e:
            return service.TelemetryCommand(status=self._failed("Telemetry", e))

    async def _group_config(self, group: str) -> GroupConfig | None:
        cached = self._groups.get(group)
        if cached is not None and time.monotonic() - cached.read_s < GROUP_CONFIG_TTL_S:
            return cached.config
        config: GroupConfig | None = await _shared_read(self._reads, ("group", group), lambda: self._read_group_config(group))
        return config

    async def _read_group_config(self, group: str) -> GroupConfig | None:
        raw = await self.backend.call("group_config_json", group)
        config = GroupConfig.from_json(raw) if raw else None
        self._groups[group] = _GroupCache(config, time.monotonic())
        return config

    def _delivery(self, config: GroupConfig | None) -> tuple[bool, int]:
        """Whether a group's messages are delivered in order, and its deliveries per message (the
        endpoint's default for a group without config)."""
        if config is None:
            return False, self.limits.max_delivery_attempts
        return config.fifo, config.retry_max_times + 1

    async def _seed(self, group: str, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, after giving ``group`` a cursor on each (once per process)."""
        config = await self._topic(topic)
        queues = config.readable_queues()
        if (group, topic) not in self._seeded and queues:
            group_config = await self._group_config(group)
            where = group_config.consume_from_where if group_config is not None else ConsumeFromWhere.LAST_OFFSET
            await self.backend.run(seed_cursors_op, group, queues, where)
            self._seeded.add((group, topic))
        return queues

    async def _now_ms(self) -> int:
        """The store's time now, epoch ms (one ``TIME`` round trip a minute, shared by the calls that
        find the estimate stale at once; between them no operation is run)."""
        if not self._clock.stale():
            return self._clock.now_ms()
        now: int = await _shared_read(self._reads, ("clock", ""), lambda: self.backend.run(self._clock.now_op))
        return now

    # -- producing ------------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            if not request.messages:
                raise ProxyError("BAD_REQUEST", "a SendMessage request needs at least one message")
            now_ms = await self._now_ms()
            checked = [
                convert.incoming(m, max_body_size=self.limits.max_body_size, max_delay_ms=self.max_delay_ms, now_ms=now_ms)
                for m in request.messages
            ]
            configs = {t: await self._topic(t) for t in {c.message.topic for c in checked}}
            writes = self._plan(checked, configs)  # every refusal of the request's own is raised here, before a write
            return await self._write(checked, writes)

        return await self._unary("SendMessage", context, service.SendMessageResponse, body)

    def _plan(self, checked: list[convert.Incoming], configs: dict[str, TopicConfig]) -> list[_Write]:
        """The store calls that write ``checked``, in order (D87): the normal messages of one queue in
        one put call (one script: all or nothing; split only past a call's bounds), each delayed or
        transactional message in a call of its own. The queue of every message is chosen and every
        message encoded here, so a topic without a writable queue refuses the request before anything
        is written.

        Raises:
            ProxyError: ``FORBIDDEN`` when a message's topic has no writable queue.
        """
        normal, transaction = (convert.NORMAL, convert.PRIORITY), convert.TRANSACTION
        puts: dict[tuple[str, int], list[int]] = {}
        writes: list[_Write] = []
        batch_queue: dict[str, int] = {}
        for index, item in enumerate(checked):
            topic = item.message.topic
            writable = _level_queues(configs[topic], item, self._writable(configs[topic]))
            if not writable:
                raise ProxyError("FORBIDDEN", f"topic {topic!r} has no writable queue: nothing of the request was stored")
            batch = f"{topic}:{item.message.priority}"  # a priority topic: one queue a level (D142)
            if item.group is not None:
                qid = writable[consistent_hash(java_hash(item.group), len(writable))]  # as RocketMQ 5's proxy
            elif item.kind in normal and batch in batch_queue:
                qid = batch_queue[batch]  # a request's normal messages of a topic go to one queue, as a batch
            elif item.kind in normal:
                # the queue of its client-made message id (among its level's on a priority topic): a client's
                # retry of the request meets the same queue, where a put of a stored id stores nothing and
                # answers where it is (D140)
                qid = batch_queue[batch] = writable[consistent_hash(java_hash(item.msg_id), len(writable))]
            else:
                qid = writable[next(self._turns.setdefault(topic, itertools.count())) % len(writable)]
            if item.kind == transaction:
                writes.append(_Write(topic, qid, [index], [_encoded(item, {PGROUP: PROXY_PRODUCER_GROUP})], "put_half"))
            elif item.due_ms is not None:
                writes.append(_Write(topic, qid, [index], [_encoded(item)], "put_delayed"))
            else:
                puts.setdefault((topic, qid), []).append(index)
        for (topic, qid), indexes in puts.items():
            start = 0
            for chunk in split_puts([_encoded(checked[i]) for i in indexes]):
                writes.append(_Write(topic, qid, indexes[start : start + len(chunk)], chunk, "put"))
                start += len(chunk)
        return writes

    def _writable(self, config: TopicConfig) -> list[int]:
        """The ids of ``config``'s writable queues (kept while ``config`` is the cached one)."""
        known = self._writable_ids.get(config.name)
        if known is None or known[0] is not config:
            known = self._writable_ids[config.name] = (config, [q.queue_id for q in config.writable_queues()])
        return known[1]

    async def _write(self, checked: list[convert.Incoming], writes: list[_Write]) -> Any:
        """Run ``writes`` in order, stopping at the first that fails. The answer has an entry per
        message: its offset (or transaction id) when stored, else the error — ``MULTIPLE_RESULTS``
        when only some messages were stored; the error alone when none was.

        Raises:
            the first write's error, when it failed (nothing was stored).
        """
        entries: list[Any] = [None] * len(checked)
        for n, write in enumerate(writes):
            try:
                for index, entry in zip(write.indexes, await self._store(checked, write), strict=True):
                    entries[index] = entry
            except (ProxyError, MQClientError, MQBrokerError) as e:
                if n == 0:
                    raise
                code, message = code_of(e)
                self._failed("SendMessage", e)
                for later in writes[n:]:
                    note = "" if later is write else " (not tried: an earlier part of the request failed)"
                    for index in later.indexes:
                        entries[index] = service.SendResultEntry(
                            status=status(code, f"not stored: {message}{note}"), message_id=checked[index].msg_id
                        )
                stored = sum(1 for e in entries if e.status.code == OK)
                return service.SendMessageResponse(
                    status=status("MULTIPLE_RESULTS", f"{stored} of {len(checked)} messages stored: see each entry's status"),
                    entries=entries,
                )
        return service.SendMessageResponse(status=status(), entries=entries)

    async def _store(self, checked: list[convert.Incoming], write: _Write) -> list[Any]:
        """One store call of :meth:`_plan`: the entries of its messages."""
        topic, qid = write.topic, write.queue_id
        if write.call == "put":
            # one put a call, not rounds shared by concurrent calls: measured, sharing cost CPU (D135)
            offset, _ = await self.backend.call("put", topic, qid, write.encoded)
            return [
                service.SendResultEntry(status=status(), message_id=checked[i].msg_id, offset=offset + n)
                for n, i in enumerate(write.indexes)
            ]
        item = checked[write.indexes[0]]
        entry = service.SendResultEntry(status=status(), message_id=item.msg_id, offset=-1)
        if write.call == "put_half":
            first_check = await self._now_ms() + await self._transaction_timeout_ms()
            half_id = await self.backend.call("put_half", topic, qid, write.encoded[0], first_check)
            entry.transaction_id = transaction_id(topic, qid, half_id)
        else:
            entry_id = await self.backend.call("put_delayed", topic, qid, write.encoded[0], item.due_ms)
            entry.recall_handle = make_handle(self.backend.store.keys.namespace, topic, qid, entry_id, item.msg_id)
        return [entry]

    async def _transaction_timeout_ms(self) -> int:
        if self._tx_timeout_ms is None:
            self._tx_timeout_ms = await self.backend.run(transaction_timeout_ms)
        return self._tx_timeout_ms

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            topic, qid, half_id = convert.parse_transaction_id(request.transaction_id)
            resolution = request.resolution
            if resolution not in (definition.COMMIT, definition.ROLLBACK):
                raise ProxyError("BAD_REQUEST", "resolution must be COMMIT or ROLLBACK")
            if request.topic.name and request.topic.name != topic:
                raise ProxyError(
                    "INVALID_TRANSACTION_ID", f"transaction {request.transaction_id!r} is not of topic {request.topic.name!r}"
                )
            try:
                await self._topic(topic)
            except ProxyError:
                raise ProxyError(
                    "INVALID_TRANSACTION_ID", f"transaction {request.transaction_id!r}: topic {topic!r} does not exist"
                ) from None
            half = await self.backend.call("read_half", topic, qid, half_id)
            if half is None or (request.message_id and half.msg_id != request.message_id):
                raise ProxyError(
                    "INVALID_TRANSACTION_ID",
                    f"transaction {request.transaction_id!r} is unknown, already resolved, or not of this message",
                )
            await self.backend.call("end_transaction", topic, qid, half_id, resolution == definition.COMMIT)
            return service.EndTransactionResponse(status=status())

        return await self._unary("EndTransaction", context, service.EndTransactionResponse, body)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            handle = request.recall_handle
            try:
                target = parse_handle(handle, self.backend.store.keys.namespace)
            except MQClientError as e:
                raise ProxyError("BAD_REQUEST", str(e)) from None
            if request.topic.name and request.topic.name != target.topic:
                raise ProxyError("BAD_REQUEST", f"recall handle is of topic {target.topic!r}, not {request.topic.name!r}")
            if not await self.backend.call("recall", handle):
                # NOT_FOUND, not MESSAGE_NOT_FOUND: the official clients take the latter as success (an
                # empty receive), so a recall that removed nothing would look done
                raise ProxyError(
                    "NOT_FOUND",
                    f"message {target.msg_id} is not scheduled: delivered already, recalled already, or never stored",
                )
            return service.RecallMessageResponse(status=status(), message_id=target.msg_id)

        return await self._unary("RecallMessage", context, service.RecallMessageResponse, body)

    # -- consuming ------------------------------------------------------------------------------

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        rpc = "ReceiveMessage"
        try:
            self._begin(rpc, context)
            views, invisible_ms = await self._receive(request, context)
        except Exception as e:
            yield service.ReceiveMessageResponse(status=self._failed(rpc, e))
            return
        if not views:
            yield service.ReceiveMessageResponse(status=status("MESSAGE_NOT_FOUND", "no new message"))
            return
        yield service.ReceiveMessageResponse(status=status())
        namespace = request.message_queue.topic.resource_namespace
        for view in views:
            message = convert.outgoing(
                view,
                namespace=namespace,
                receipt_handle=receipt_of(view),
                attempt=view.delivery_attempt,
                invisible_ms=invisible_ms,
            )
            yield service.ReceiveMessageResponse(message=message)
        delivered = service.ReceiveMessageResponse()
        delivered.delivery_timestamp.GetCurrentTime()  # when the batch left: clients' receive-latency metric
        yield delivered

    async def _receive(self, request: Any, context: Any) -> tuple[list[MessageView], int]:
        group = _group(request.group.name)
        topic = request.message_queue.topic.name
        selector = _selector(request.filter_expression)
        batch = request.batch_size or 1
        if not 1 <= batch <= MAX_RECEIVE:
            raise ProxyError("BAD_REQUEST", f"batch_size must be in 1..{MAX_RECEIVE}, got {batch}")
        invisible_ms = request.invisible_duration.ToMilliseconds() if request.HasField("invisible_duration") else 30_000
        if not MIN_INVISIBLE_S * 1000 <= invisible_ms <= MAX_INVISIBLE_S * 1000:
            raise ProxyError(
                "ILLEGAL_INVISIBLE_TIME",
                f"invisible duration must be in {MIN_INVISIBLE_S:g} s .. {MAX_INVISIBLE_S:g} s, got {invisible_ms} ms",
            )
        poll_ms = request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") else 20_000
        if poll_ms < 0:
            raise ProxyError("ILLEGAL_POLLING_TIME", f"long polling timeout must not be negative, got {poll_ms} ms")
        wait_s = min(poll_ms / 1000, float(self.limits.long_polling_s))
        remaining = context.time_remaining()
        if remaining is not None:
            wait_s = max(0.0, min(wait_s, remaining - DEADLINE_MARGIN_S))
        deadline = time.monotonic() + wait_s
        queues = await self._seed(group, topic)
        config = await self._group_config(group)
        fifo, attempts = self._delivery(config)
        ftype, fdata = filter_args(selector)
        pause = POLL_FIRST_S
        turn = self._turns.setdefault(f"receive:{group}:{topic}", itertools.count())
        while True:
            every: list[MessageQueue] = []
            if config is None or config.consume_enable:  # the retry topic's queues: cached, re-read each TOPIC_TTL_S
                every = queues + await self._retry_queues(group)
                views = await self._receive_once(group, every, next(turn), batch, invisible_ms, attempts, ftype, fdata, fifo)
                if views:
                    return views, invisible_ms
            left = deadline - time.monotonic()
            if left <= 0:
                return [], invisible_ms
            await self._wait_for_news(group, every, min(pause, left), min(POLL_MAX_S, left))
            pause = min(pause * 2, POLL_MAX_S)

    async def _wait_for_news(self, group: str, queues: list[MessageQueue], pause_s: float, block_s: float) -> None:
        """After an empty receive: until a message arrives past ``group``'s cursor on one of ``queues``,
        ``block_s`` at most (D136). One ``XREAD BLOCK`` over their logs on the connection for blocking
        reads, as the asyncio simple consumer waits: a send wakes the receive at once instead of at the
        end of a 50–500 ms sleep. The cursors are read after the empty receive, so a message that
        arrived in between is past them and the wait returns at once. ``block_s`` is at most
        :data:`POLL_MAX_S`, the longest pause of the sleeps this replaces: a message whose invisibility
        ends (a redelivery: no arrival wakes anyone) is found within it, as then. On a cluster (one
        ``XREAD`` cannot span slots) or for a group whose consumption is paused, the doubling
        ``pause_s`` sleep instead."""
        if not queues or self.backend.connection.kind == "cluster":
            await asyncio.sleep(pause_s)
            return
        cursors: dict[MessageQueue, int] = await self.backend.call("read_offsets", group, queues)
        await self.backend.blocking("wait_for_any", {q: cursors.get(q, 0) for q in queues}, max(1, int(block_s * 1000)))

    async def _receive_once(
        self,
        group: str,
        queues: list[MessageQueue],
        start: int,
        want: int,
        invisible_ms: int,
        attempts: int,
        ftype: str,
        fdata: str,
        fifo: bool,
    ) -> list[MessageView]:
        views: list[MessageView] = await self.backend.run(
            receive_round_op,
            group,
            queues,
            start=start,
            want=want,
            now_ms=await self._now_ms(),
            invisible_ms=invisible_ms,
            max_attempts=attempts,
            filter_of=lambda q: UNFILTERED if q.topic.startswith(RETRY_PREFIX) else (ftype, fdata),
            fifo=fifo,
            trace=await self.trace.active(group),
            levels=self._levels(queues),
        )
        return views

    async def AckMessage(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            group = _group(request.group.name)
            out = service.AckMessageResponse()
            codes = set()
            acked: list[Receipt] = []
            for entry in request.entries:
                try:
                    receipt = _receipt(entry.receipt_handle, request.topic.name, group)
                    if not await self.backend.call(
                        "ack_simple", group, receipt.queue, receipt.offset, receipt.visible_at_ms, None
                    ):
                        raise _expired(entry.message_id)
                    acked.append(receipt)
                    result = status()
                except ProxyError as e:
                    result = self._failed("AckMessage", e)
                codes.add(result.code)
                out.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result)
            if len(codes) > 1:
                out.status.CopyFrom(status("MULTIPLE_RESULTS", "some entries failed: see each entry's status"))
            else:
                out.status.CopyFrom(out.entries[0].status if out.entries else status())
            if acked and (tracer := await self.trace.active(group)) is not None:
                await self.trace.acked(tracer, acked)
            return out

        return await self._unary("AckMessage", context, service.AckMessageResponse, body)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            group = _group(request.group.name)
            receipt = _receipt(request.receipt_handle, request.topic.name, group)
            duration_ms = request.invisible_duration.ToMilliseconds()
            if not 0 <= duration_ms <= MAX_INVISIBLE_S * 1000:
                raise ProxyError(
                    "ILLEGAL_INVISIBLE_TIME", f"invisible duration must be in 0 .. {MAX_INVISIBLE_S:g} s, got {duration_ms} ms"
                )
            new_visible_at = await self._now_ms() + duration_ms
            if not await self.backend.call(
                "ack_simple", group, receipt.queue, receipt.offset, receipt.visible_at_ms, new_visible_at
            ):
                raise _expired(request.message_id)
            handle = receipt.handle(new_visible_at)  # the same delivery: its attempt and hand-out time go on
            return service.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

        return await self._unary("ChangeInvisibleDuration", context, service.ChangeInvisibleDurationResponse, body)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        async def body(_: RpcCall) -> Any:
            group = _group(request.group.name)
            receipt = _receipt(request.receipt_handle, request.topic.name, group)
            queue, offset, visible_at = receipt.queue, receipt.offset, receipt.visible_at_ms
            found: list[MessageExt] = await self.backend.call("read_at", queue.topic, [(queue.queue_id, offset)])
            if not found:
                raise ProxyError("MESSAGE_NOT_FOUND", f"message {request.message_id} is no longer stored")
            attempt = receipt.attempt or max(1, request.delivery_attempt)  # the endpoint's record first
            view = received_view(found[0], attempt, visible_at)
            if not await self.backend.call("ack_simple", group, queue, offset, visible_at, visible_at):
                raise _expired(request.message_id)
            dlq = await self.backend.run(dead_letter_op, group, view, "forwarded by the consumer")
            if (tracer := await self.trace.active(group)) is not None:
                await self.trace.dead_lettered(tracer, queue, view, dlq)
            return service.ForwardMessageToDeadLetterQueueResponse(status=status())

        return await self._unary(
            "ForwardMessageToDeadLetterQueue", context, service.ForwardMessageToDeadLetterQueueResponse, body
        )


def _route_queue(queue: Any, request: Any, qid: int, perm: str, config: TopicConfig) -> None:
    """Fill ``queue`` (a ``MessageQueue`` of a route or an assignment) as queue ``qid`` of the request's
    topic, served at the endpoints the client asked, with permission ``perm`` (a ``Permission`` name)
    and the message types the topic takes (PRIORITY on a priority topic, D142)."""
    queue.topic.CopyFrom(request.topic)
    queue.id = qid
    queue.permission = definition.Permission.Value(perm)
    queue.broker.name = "rocketredis"
    queue.broker.endpoints.CopyFrom(request.endpoints)
    queue.accept_message_types.extend(convert.PRIORITY_TOPIC_TYPES if config.priority_levels else convert.PLAIN_TYPES)


def _expired(message_id: str) -> ProxyError:
    """The error of an ack or change whose receipt handle expired."""
    return ProxyError("INVALID_RECEIPT_HANDLE", f"receipt of {message_id} expired: the message was handed out again")


def _group(name: str) -> str:
    try:
        return check_group(name)
    except MQClientError as e:
        raise ProxyError("ILLEGAL_CONSUMER_GROUP", str(e)) from None


def _selector(expression: Any) -> MessageSelector:
    try:
        if expression.type == definition.SQL:
            return MessageSelector.by_sql(expression.expression)
        return MessageSelector.by_tag(expression.expression or "*")
    except MQClientError as e:
        raise ProxyError("ILLEGAL_FILTER_EXPRESSION", str(e)) from None


def _receipt(handle: str, topic: str, group: str) -> Receipt:
    """The receipt a client of ``group`` names with ``topic`` (see :class:`~mq.proxy.tracing.Receipt`):
    of one of that topic's queues, or of the group's retry topic (a resent dead letter shows its
    original topic, which the receipt does not record)."""
    try:
        receipt = Receipt.parse(handle)
    except MQClientError as e:
        raise ProxyError("INVALID_RECEIPT_HANDLE", str(e)) from None
    if topic and receipt.queue.topic not in (topic, retry_topic(group)):
        raise ProxyError("INVALID_RECEIPT_HANDLE", f"receipt handle {handle!r} is not of topic {topic!r}")
    return receipt
