"""What push and pull consumers share before and around their :class:`~mq.consumer.core.ConsumerCore`:
checked settings, the connection, subscriptions, and building the core from the parts that suit
the consumer (chosen when it starts, once its kind of consumption is known). The sync consumers
build a :class:`~mq.consumer.core.ConsumerCore`, the asyncio ones (:mod:`mq.aio`) an
:class:`~mq.aio.core.AsyncConsumerCore`: the same steps, scheduled by threads or by tasks."""

from __future__ import annotations

from typing import Generic, TypeVar

from mq.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from mq.consumer.ownership import choose
from mq.consumer.parts import ConsumerSettings, Consumption
from mq.consumer.registry import ClientInfo, Registry
from mq.consumer.start import StartPolicy
from mq.consumer.steps import CoreSteps
from mq.consumer.types import ConsumeFromWhere, MessageModel
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.model.msgid import new_client_id
from mq.model.queue import MessageQueue
from mq.model.validation import check_group, check_topic
from mq.store import Store
from mq.store.connection import Connection
from mq.store.replication import SyncReplicas

#: Most messages one pull may bring per queue.
MAX_PULL_BATCH_SIZE = 1024

CoreT = TypeVar("CoreT", bound=CoreSteps)


class QueueConsumerBase(Generic[CoreT]):
    """The shared part of the push and pull consumers, sync and asyncio (``_core_type`` builds the core)."""

    _core_type: type[CoreT]

    def __init__(
        self,
        group: str,
        url: str | None,
        *,
        namespace: str,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
        allocate_strategy: AllocateMessageQueueStrategy | None,
        pull_batch_size: int,
        client_id: str | None,
        kind: str,
        sync: SyncReplicas | None = None,
    ) -> None:
        group = check_group(group)
        batch = pull_batch_size
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_PULL_BATCH_SIZE:
            raise MQClientError(f"pull_batch_size must be an int in 1..{MAX_PULL_BATCH_SIZE}, got {pull_batch_size!r}")
        try:
            model, where = MessageModel(message_model), ConsumeFromWhere(consume_from_where)
        except ValueError as e:
            raise MQClientError(f"{e}: use the MessageModel / ConsumeFromWhere enums") from None
        self._conn = Connection(url, namespace)
        self._sync = sync
        self._store = Store(self._conn, sync=sync)
        start = StartPolicy(where, consume_timestamp_ms, group_wide=model is MessageModel.CLUSTERING)
        strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self._settings = ConsumerSettings(group, client_id or new_client_id(), model, strategy, pull_batch_size, start)
        self._subscriptions: dict[str, MessageSelector] = {}
        info = ClientInfo.of_this_process(self._settings.client_id, kind=kind, message_model=model.value)
        self._registry = Registry(self._store, group, info)
        self._core: CoreT | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(group={self.group!r}, client_id={self.client_id!r}, {self._conn!r})"

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._settings.group

    @property
    def client_id(self) -> str:
        """This member's client id."""
        return self._settings.client_id

    @property
    def message_model(self) -> MessageModel:
        """CLUSTERING or BROADCASTING."""
        return self._settings.message_model

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` filtered by a tag expression (``"*"``, ``"A || B"``) or a MessageSelector
        (the last subscription of a topic wins).

        Raises:
            FilterExpressionError: the expression is malformed (with its position).
        """
        self._subscriptions[check_topic(topic)] = MessageSelector.parse(expression)
        self._subscriptions_changed()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``."""
        self._subscriptions.pop(topic, None)
        self._subscriptions_changed()

    def _subscriptions_changed(self) -> None:
        self._registry.info.subscriptions = {t: s.expression for t, s in self._subscriptions.items()}
        if self._core is not None:
            self._core.subscriptions_changed()

    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this member consumes now."""
        core = self._core
        return set() if core is None else {mq for mq, pq in list(core.process_queues.items()) if not pq.releasing}

    def _build_core(
        self, consumption: Consumption, *, orderly: bool = False, assigned: list[MessageQueue] | None = None
    ) -> CoreT:
        ownership, offsets = choose(
            self._store,
            self.group,
            self.client_id,
            self.message_model,
            orderly=orderly,
            assigned=assigned is not None,
            sync=self._sync,
        )
        self._core = self._core_type(
            self._store,
            self._settings,
            self._subscriptions,
            registry=self._registry,
            ownership=ownership,
            offsets=offsets,
            consumption=consumption,
            assigned=assigned,
        )
        return self._core
