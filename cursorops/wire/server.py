"""The asyncio server of Pulsar's binary protocol: sockets, timeouts, back-pressure.

One :class:`Connection` per socket reads frames in order and answers each
command; a bad frame closes that connection only, with a log line (nothing
was acknowledged or written for it). The broker and its stores are used from
one thread (:class:`StoreThread`), so the event loop keeps serving pings and
other connections while a commit runs.

Produce path: a ``CommandSend`` is parsed on the loop and queued to the
:class:`Appender`, which appends everything queued meanwhile in one store call
per partition (group commit) and then sends the receipts, in order. A
receipt is sent only once the entry is committed, so a receipted message
survives a crash.

Consume path: each consumer has a task that, while it has permits, asks the
dispatcher for that many messages and writes them as ``CommandMessage``
frames; with nothing to deliver it waits for a produce to its partition, or
polls (messages produced by other processes, delayed messages coming due).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cursorops.core import BrokerRecord
from cursorops.core.acks import ack_set
from cursorops.core.authz import Operation
from cursorops.core.broker import Broker
from cursorops.core.errors import (
    AlreadyExistsError,
    BrokerFencedError,
    ConflictError,
    ConsumerBusyError,
    CursorOpsError,
    InvalidArgumentError,
    NotFoundError,
    TopicNotFoundError,
)
from cursorops.core.ids.position import Position
from cursorops.core.ids.topic_name import TopicName
from cursorops.core.producer import Entry
from cursorops.core.schemas import encode_version
from cursorops.core.subscription import SubscriptionType
from cursorops.wire import schemas
from cursorops.wire.auth import AuthenticationError
from cursorops.wire.authentication import Authentication, is_loopback
from cursorops.wire.commands import (
    CommandType,
    InitialPosition,
    LookupType,
    ServerError,
    SubType,
    TopicsMode,
)
from cursorops.wire.compacted_reads import skip_compacted_away
from cursorops.wire.deduplication import Deduplication, Verdict
from cursorops.wire.entries import EntryError, entry_of_send, send_receipt_command
from cursorops.wire.errors import server_error
from cursorops.wire.frames import (
    MAX_MESSAGE_SIZE,
    Frame,
    FrameDecoder,
    FrameError,
    command,
    encode_frame,
    simple_frame,
)
from cursorops.wire.key_shared import KeySharedConsumers, requested_ranges
from cursorops.wire.listeners import BrokerUrls, UnknownListenerError
from cursorops.wire.membership import lookup_urls
from cursorops.wire.non_persistent import NonPersistentConsumer, NonPersistentTopics
from cursorops.wire.producer_access import TopicProducers, access_mode
from cursorops.wire.proto import Proto
from cursorops.wire.refusal import Refusal
from cursorops.wire.schemas import schema_of
from cursorops.wire.sessions import Registry, WireConsumer, signed64
from cursorops.wire.tls import common_name
from cursorops.wire.topic_list import topic_list

log = logging.getLogger("cursorops.protocol")

T = TypeVar("T")

SERVER_VERSION = "cursorops-standalone"
MAX_PROTOCOL_VERSION = 21
KEEPALIVE_SECONDS = 30.0
"""Pulsar's ``keepAliveIntervalSeconds``: a silent connection is pinged, then dropped."""
POLL_SECONDS = 0.1
"""How often a consumer with permits and nothing to deliver looks again."""
_INT64_MAX = 2**63 - 1
_NO_REQUEST = 2**64 - 1
"""The request id of an error that answers no request (Pulsar's -1)."""
_NO_ID = 2**64 - 1
"""Ledger and entry id -1 on the wire: the receipt of a duplicate, stored nothing."""
NON_PERSISTENT = "non-persistent://"
_NON_PERSISTENT_COMMANDS = frozenset(
    {
        CommandType.SUBSCRIBE,
        CommandType.FLOW,
        CommandType.ACK,
        CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES,
        CommandType.CLOSE_CONSUMER,
        CommandType.UNSUBSCRIBE,
        CommandType.SEEK,
        CommandType.GET_LAST_MESSAGE_ID,
    }
)
"""Commands a non-persistent consumer's connection sends about it."""
REFUSED_SECONDS = 5.0
"""How long a client whose credentials were refused keeps its connection without asking
anything (its client asks at once; answering pings would keep it open for ever)."""
RENEW_SECONDS = 5.0
"""How often live connections renew their consumers' leases in the registry."""

_SUB_TYPES = {
    SubType.Exclusive: SubscriptionType.EXCLUSIVE,
    SubType.Shared: SubscriptionType.SHARED,
    SubType.Failover: SubscriptionType.FAILOVER,
    SubType.Key_Shared: SubscriptionType.KEY_SHARED,
}


class ConnectionRefused(Exception):
    """The connection is closed once its answer is written (a refused client's request)."""


class StoreThread:
    """The one thread that uses the broker and its stores."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cursorops-store")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass
class _Pending:
    role: str
    topic: str
    entry: Entry
    done: Callable[[Position | None, BaseException | None], None]


class Appender:
    """Group commit: what is queued while one append runs goes in the next, together."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._queue: list[_Pending] = []
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def submit(self, item: _Pending) -> None:
        self._queue.append(item)
        self._ready.set()

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            items, self._queue = self._queue, []
            if not items:
                continue
            try:
                results = await self.service.store.run(self._append, items)
            except Exception as exc:
                # Nothing of the group was receipted: every send of it fails, and the
                # appender goes on (a dead appender would leave every producer waiting).
                log.exception("group commit of %d entries failed", len(items))
                results = [(None, exc)] * len(items)
            touched = set()
            for item, (position, error) in zip(items, results, strict=True):
                try:
                    item.done(position, error)
                except Exception:
                    log.exception("answering a send failed")
                if error is None:
                    touched.add(item.topic)
            for topic in touched:
                self.service.wake(topic)

    async def drain(self) -> None:
        """Append what is queued (at shutdown), then stop."""
        if self._task is not None:
            while self._queue:
                await asyncio.sleep(0.01)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _append(self, items: list[_Pending]) -> list[tuple[Position | None, BaseException | None]]:
        by_topic: dict[tuple[str, str], list[int]] = {}
        for number, item in enumerate(items):
            by_topic.setdefault((item.role, item.topic), []).append(number)
        results: list[tuple[Position | None, BaseException | None]] = [(None, None)] * len(items)
        service = self.service
        for (role, topic), numbers in by_topic.items():
            try:
                positions = service.broker.append_entries(
                    role, topic, [items[n].entry for n in numbers]
                )
            except (CursorOpsError, ValueError) as exc:
                for n in numbers:
                    results[n] = (None, exc)
                continue
            for n, position in zip(numbers, positions, strict=True):
                results[n] = (position, None)
        return results


@dataclass(eq=False)
class _ConsumerLoop:
    """The loop side of a wire consumer: its permits and its dispatch task."""

    wire: WireConsumer
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Service:
    """What every connection shares: the broker, its thread, the appender, the consumers."""

    def __init__(
        self,
        broker: Broker,
        store: StoreThread,
        urls: BrokerUrls,
        role: str,
        authentication: Authentication | None = None,
        keepalive_s: float = KEEPALIVE_SECONDS,
        broker_id: str = "",
    ) -> None:
        self.broker = broker
        self.slot = broker_id
        """This broker's id in the cluster: its slot on its home
        (:mod:`cursorops.wire.broker_identity`)."""
        self.broker_id = broker_id
        """Every consumer id this process registers starts with it: the slot and the
        life (``<slot>.<epoch>``, set by :func:`cursorops.wire.membership.join`)."""
        self.authentication = authentication or Authentication(role)
        self.keepalive_s = keepalive_s
        self.store = store
        self.urls = urls
        """What lookups answer (set once the ports are bound)."""
        self.role = role
        self.appender = Appender(self)
        self.deduplication = Deduplication()
        self.non_persistent = NonPersistentTopics()
        self.connections: set[Connection] = set()
        self._consumers: dict[str, set[_ConsumerLoop]] = {}
        self.producers: dict[str, TopicProducers[tuple[Connection, int]]] = {}
        """Each topic's (or partition's) connected producers: names, access modes, epoch."""
        self.key_shared = KeySharedConsumers()
        """Key_Shared modes and sticky ranges (touched on the store thread only)."""
        self.non_durable: set[tuple[str, str]] = set()
        """(base topic, subscription) of the readers' subscriptions this process made:
        they live as long as their readers (touched on the store thread only)."""
        self.live: list[BrokerRecord] = []
        """The cluster's members (brokers not declared dead) as the last heartbeat saw
        them (:mod:`cursorops.wire.membership`): a lookup answers the owner among them."""

    def forget_connections_state(self) -> None:
        """After every connection closed for a new life: nothing of the last one is
        remembered (the store holds what lasts)."""
        self.deduplication = Deduplication()
        self.producers.clear()

    def wake(self, topic: str) -> None:
        for loop in self._consumers.get(topic, ()):
            loop.wake.set()

    def watch(self, loop: _ConsumerLoop) -> None:
        self._consumers.setdefault(loop.wire.topic, set()).add(loop)

    def producers_of(self, topic: str) -> TopicProducers[tuple[Connection, int]]:
        return self.producers.setdefault(topic, TopicProducers())

    def producer_gone(self, topic: str, key: tuple[Connection, int]) -> None:
        producers = self.producers.get(topic)
        if producers is not None:
            producers.remove(key)
            if producers.empty and producers.epoch is None:
                # A topic's epoch stays for the process's life, as Pulsar keeps it with the topic.
                del self.producers[topic]

    def consumers_of(self, topic: str, subscription: str) -> list[tuple[Connection, _ConsumerLoop]]:
        """Every connection's consumers of ``subscription`` on one partition (or topic)."""
        return [
            (connection, loop)
            for connection in self.connections
            for loop in connection.consumers.values()
            if loop.wire.topic == topic and loop.wire.subscription == subscription
        ]

    def unwatch(self, loop: _ConsumerLoop) -> None:
        watchers = self._consumers.get(loop.wire.topic)
        if watchers is not None:
            watchers.discard(loop)
            if not watchers:
                del self._consumers[loop.wire.topic]

    # -- store-thread helpers ---------------------------------------------------

    def ensure_topic(self, role: str, name: TopicName, operation: Operation) -> tuple[str, int]:
        """(base topic, partition or -1); creates a missing non-partitioned topic for a role
        allowed ``operation`` on it (Pulsar's auto-creation)."""
        base = name.base
        try:
            info = self.broker.authorized_topic(role, Operation.LOOKUP, base)
        except TopicNotFoundError:
            if name.is_partition:
                raise
            try:
                info = self.broker.auto_create_topic(role, str(base), operation)
            except AlreadyExistsError:
                info = self.broker.authorized_topic(role, Operation.LOOKUP, base)
        if name.is_partition:
            if name.partition_index >= info.partitions:
                raise TopicNotFoundError(f"Topic {name} not found")
            return info.name, name.partition_index
        return info.name, -1

    def partitions(self, role: str, topic: str) -> int:
        """A topic's partitions; 0 for a non-partitioned or missing one (created on use).
        Refused unless ``role`` may look the topic up (``canLookup``)."""
        name = TopicName.parse(topic)
        try:
            info = self.broker.authorized_topic(role, Operation.LOOKUP, name.base)
        except TopicNotFoundError:
            return 0
        # A partition is a topic of its own to a client, as in Pulsar: not partitioned.
        return 0 if name.is_partition else info.partitions

    def subscription_type(self, role: str, topic: str, name: str) -> SubscriptionType | None:
        """The type of the topic's subscription ``name``; None when there is none."""
        for info in self.broker.list_subscriptions(role, topic):
            if info.name == name:
                return info.type
        return None


class Connection:
    """One client socket: frames in, commands answered, messages pushed."""

    _ids = itertools.count(1)

    def __init__(
        self, service: Service, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.loopback = isinstance(peer, tuple) and is_loopback(str(peer[0]))
        self.tls = writer.get_extra_info("ssl_object") is not None
        self.peer_cn = common_name(writer.get_extra_info("peercert"))
        """The common name of the client's verified certificate (TLS), if it showed one."""
        self.id = f"{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        self.decoder = FrameDecoder()
        self.connected = False
        self.producers: dict[int, tuple[str, str]] = {}
        """producer_id -> (partition name, producer name)."""
        self.waiting_producers: dict[int, str] = {}
        """producer_id -> partition name: WaitForExclusive producers not admitted yet."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.consumers: dict[int, _ConsumerLoop] = {}
        self.non_persistent: dict[int, NonPersistentConsumer] = {}
        """Consumers of non-persistent topics (:mod:`cursorops.wire.non_persistent`)."""
        self.registry = Registry(f"{service.broker_id}/{self.id}")
        self.last_received = time.monotonic()
        self._producer_names = itertools.count()
        self.role = service.role
        """Who the client acts as: the standalone's role, or its token's subject."""
        self.refused: str | None = None
        """Why its CONNECT was refused: every request is then answered with
        ``AuthenticationError`` (:meth:`_refuse`)."""

    # -- plumbing ----------------------------------------------------------------

    def send(self, cmd: Proto) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode_frame(cmd))

    async def serve(self) -> None:
        self.service.connections.add(self)
        keepalive = asyncio.create_task(self._keepalive())
        try:
            while True:
                data = await self.reader.read(256 * 1024)
                if not data:
                    if self.decoder.pending:
                        log.warning(
                            "connection %s closed with a frame cut short (%d bytes)",
                            self.peer,
                            self.decoder.pending,
                        )
                    break
                self.last_received = time.monotonic()
                for frame in self.decoder.feed(data):
                    await self.handle(frame)
                await self.writer.drain()
        except FrameError as exc:
            log.warning("closing connection %s: bad frame: %s", self.peer, exc)
        except ConnectionRefused:
            with contextlib.suppress(ConnectionError):
                await self.writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("connection %s lost: %s", self.peer, exc)
        finally:
            keepalive.cancel()
            await self.close()

    async def _keepalive(self) -> None:
        while True:
            interval = self.service.keepalive_s
            await asyncio.sleep(interval / 2)
            silent = time.monotonic() - self.last_received
            if silent > 2 * interval:
                log.warning("closing connection %s: no answer to ping", self.peer)
                self.writer.close()
                return
            if silent > interval:
                self.send(command(CommandType.PING))

    async def close(self) -> None:
        """Free what the connection held at once: its consumers' messages and slots."""
        loops = list(self.consumers.values())
        self.consumers.clear()
        for consumer in self.non_persistent.values():
            self.service.non_persistent.leave(consumer)
        self.non_persistent.clear()
        for producer_id, (topic, _) in list(self.producers.items()):
            self.service.producer_gone(topic, (self, producer_id))
        self.producers.clear()
        for producer_id, topic in list(self.waiting_producers.items()):
            self.service.producer_gone(topic, (self, producer_id))
        self.waiting_producers.clear()
        for task in list(self._tasks):
            task.cancel()
        for loop in loops:
            try:
                await self._close_consumer(loop)
            except BrokerFencedError:
                # This life was declared dead: the cluster released its consumers already,
                # and the new life forgets what this one kept in memory.
                log.info("connection %s: its consumers were released by the cluster", self.peer)
        self.service.connections.discard(self)
        if not self.writer.is_closing():
            self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    # -- commands ----------------------------------------------------------------

    async def handle(self, frame: Frame) -> None:
        kind = frame.type
        body = frame.body
        if log.isEnabledFor(logging.DEBUG):
            log.debug("connection %s: %s %s", self.peer, kind.name, body)
        if kind is CommandType.CONNECT:
            await self._connect(body)
            return
        if self.refused is not None:
            self._refuse(kind, body, self.refused)
            return
        if not self.connected:
            raise FrameError(f"{kind.name} before CONNECT")
        handler = self._handlers.get(kind)
        if kind in _NON_PERSISTENT_COMMANDS and self._non_persistent_command(kind, body):
            handler = Connection._non_persistent_consumer
        if handler is None:
            request_id = body.get("request_id")
            if request_id is not None:
                self._error(request_id, ServerError.NotAllowedError, f"{kind.name} not supported")
            else:
                log.info("connection %s: ignoring %s", self.peer, kind.name)
            return
        try:
            await handler(self, frame)
        except CursorOpsError as exc:
            self._fail(kind, body, server_error(exc), str(exc))
        except Refusal as exc:
            self._fail(kind, body, exc.code, str(exc))
        except Exception as exc:
            log.exception("connection %s: %s failed", self.peer, kind.name)
            self._fail(kind, body, ServerError.UnknownError, f"{type(exc).__name__}: {exc}")

    def _fail(self, kind: CommandType, body: Proto, error: ServerError, message: str) -> None:
        request_id = body.get("request_id")
        if kind is CommandType.SEND:
            self.send(
                command(
                    CommandType.SEND_ERROR,
                    producer_id=body.get("producer_id", 0),
                    sequence_id=body.get("sequence_id", 0),
                    error=int(error),
                    message=message,
                )
            )
        elif kind is CommandType.LOOKUP and request_id is not None:
            self._lookup_failed(request_id, error, message)
        elif kind is CommandType.PARTITIONED_METADATA and request_id is not None:
            self._partitions_failed(request_id, error, message)
        elif kind is CommandType.ACK and request_id is not None:
            self.send(
                command(
                    CommandType.ACK_RESPONSE,
                    consumer_id=body.get("consumer_id", 0),
                    request_id=request_id,
                    error=int(error),
                    message=message,
                )
            )
        elif request_id is not None:
            self._error(request_id, error, message)
        else:
            log.warning("connection %s: %s failed: %s", self.peer, kind.name, message)

    def _error(self, request_id: int, error: ServerError, message: str) -> None:
        self.send(
            command(CommandType.ERROR, request_id=request_id, error=int(error), message=message)
        )

    async def _connect(self, body: Proto) -> None:
        """Answered CONNECTED, refused credentials too. Pulsar answers those with a
        CommandError and closes; the C++ client (and the Python and Node.js clients on it)
        reads any answer but CONNECTED as a dropped connection, retries, and reports TimeOut
        after its operation timeout. Connected, a refused client has its first request
        answered with ``AuthenticationError``, a result it gives up on at once; then the
        connection is closed, after :data:`REFUSED_SECONDS` at the latest
        (docs/decisions/2026-12-07-wire-errors-a-client-can-act-on.md)."""
        if self.connected or self.refused is not None:
            raise FrameError("CONNECT twice")
        authentication = self.service.authentication
        if authentication.enabled:
            try:
                # In a thread: a bcrypt check takes a while, and the loop serves others.
                self.role = await asyncio.to_thread(
                    authentication.role,
                    str(body.get("auth_method_name", "")),
                    bytes(body.get("auth_data", b"")),
                    peer_cn=self.peer_cn,
                    loopback=self.loopback,
                )
            except AuthenticationError as exc:
                log.warning("connection %s: authentication failed: %s", self.peer, exc)
                self.refused = str(exc)
                asyncio.get_running_loop().call_later(REFUSED_SECONDS, self.writer.close)
        self.connected = self.refused is None
        version = min(int(body.get("protocol_version", 0)), MAX_PROTOCOL_VERSION)
        self.send(
            command(
                CommandType.CONNECTED,
                server_version=SERVER_VERSION,
                protocol_version=version,
                max_message_size=MAX_MESSAGE_SIZE,
            )
        )

    def _refuse(self, kind: CommandType, body: Proto, reason: str) -> None:
        """A command on a connection whose credentials were refused: a ping is answered, a
        request gets ``AuthenticationError`` in the response its client waits for, and the
        connection is closed (ConnectionRefused) after that answer."""
        if kind is CommandType.PING:
            self.send(command(CommandType.PONG))
            return
        if kind is CommandType.PONG:
            return
        self._fail(kind, body, ServerError.AuthenticationError, reason)
        raise ConnectionRefused(reason)

    async def _ping(self, frame: Frame) -> None:
        self.send(command(CommandType.PONG))

    async def _pong(self, frame: Frame) -> None:
        return None

    async def _lookup(self, frame: Frame) -> None:
        """The topic partition's owner among the live brokers
        (:func:`~cursorops.core.broker.cluster.owner_of`): this broker answers Connect
        with its own URLs, another's a Redirect to that broker's (of the advertised
        listener the client names), which the client then asks with ``authoritative``,
        and an authoritative lookup is answered Connect here. Errors are answered in
        the lookup response (the client waits for that, not for a CommandError)."""
        body = frame.body
        request_id = body["request_id"]
        listener = body.get("advertised_listener_name")
        try:
            name = TopicName.parse(body.get("topic", ""))
            urls, kind = self.service.urls, LookupType.Connect
            if not body.get("authoritative"):
                urls, redirect = lookup_urls(self.service, str(name))
                kind = LookupType.Redirect if redirect else LookupType.Connect
            url, url_tls = urls.for_listener(listener)
            await self.service.store.run(self.service.partitions, self.role, body["topic"])
        except UnknownListenerError as exc:
            self._lookup_failed(request_id, ServerError.ServiceNotReady, str(exc))
            return
        except CursorOpsError as exc:
            self._lookup_failed(request_id, server_error(exc), str(exc))
            return
        self.send(
            command(
                CommandType.LOOKUP_RESPONSE,
                brokerServiceUrl=url,
                brokerServiceUrlTls=url_tls,
                response=int(kind),
                request_id=request_id,
                authoritative=True,
            )
        )

    def _lookup_failed(self, request_id: int, error: ServerError, message: str) -> None:
        self.send(
            command(
                CommandType.LOOKUP_RESPONSE,
                response=int(LookupType.Failed),
                request_id=request_id,
                error=int(error),
                message=message,
            )
        )

    def _partitions_failed(self, request_id: int, error: ServerError, message: str) -> None:
        # Pulsar's LookupType of this response: 0 Success, 1 Failed.
        self.send(
            command(
                CommandType.PARTITIONED_METADATA_RESPONSE,
                request_id=request_id,
                response=1,
                error=int(error),
                message=message,
            )
        )

    async def _partitioned_metadata(self, frame: Frame) -> None:
        body = frame.body
        request_id = body["request_id"]
        try:
            TopicName.parse(body.get("topic", ""))
            partitions = await self.service.store.run(
                self.service.partitions, self.role, body["topic"]
            )
        except CursorOpsError as exc:
            self._partitions_failed(request_id, server_error(exc), str(exc))
            return
        self.send(
            command(
                CommandType.PARTITIONED_METADATA_RESPONSE,
                partitions=partitions,
                request_id=request_id,
                response=0,
            )
        )

    # -- producers ---------------------------------------------------------------

    async def _producer(self, frame: Frame) -> None:
        body = frame.body
        producer_id = body["producer_id"]
        if producer_id in self.producers or producer_id in self.waiting_producers:
            raise Refusal(ServerError.ProducerBusy, f"Producer {producer_id} is already open")
        name = TopicName.parse(body["topic"])
        service = self.service
        mode = access_mode(body.get("producer_access_mode", 0))

        schema = schema_of(body)

        producer_name = body.get("producer_name") or (
            f"standalone-{self.id}-{next(self._producer_names)}"
        )

        def open_producer() -> tuple[str, int | None, int | None]:
            base, _ = service.ensure_topic(self.role, name, Operation.PRODUCE)
            service.broker.authorized_topic(self.role, Operation.PRODUCE, base)
            version = None
            if schema is not None:
                version = service.broker.put_schema(self.role, str(name), schema)
            last = None
            if service.broker.deduplication(str(name)):
                last = service.broker.last_sequence_id(self.role, str(name), producer_name)
            return str(name), version, last

        topic, schema_version, last_stored = await service.store.run(open_producer)
        if producer_id in self.producers or producer_id in self.waiting_producers:
            raise Refusal(ServerError.ProducerBusy, f"Producer {producer_id} is already open")
        key = (self, producer_id)
        epoch, fenced, admitted = service.producers_of(topic).admit(
            key, producer_name, mode, body.get("topic_epoch")
        )
        for connection, other_id in fenced:
            connection._fence(other_id)
        if admitted is None:
            self._producer_ready(body, topic, producer_name, epoch, schema_version, last_stored)
            return
        # WaitForExclusive: answered "not ready" now, and ready once it takes the topic;
        # the connection goes on serving meanwhile.
        self.waiting_producers[producer_id] = topic
        self.send(
            command(
                CommandType.PRODUCER_SUCCESS,
                request_id=body["request_id"],
                producer_name=producer_name,
                producer_ready=False,
            )
        )

        async def wait() -> None:
            try:
                epoch = await admitted
            except Refusal as exc:
                if self.waiting_producers.pop(producer_id, None) is not None:
                    self._fail(CommandType.PRODUCER, body, exc.code, str(exc))
                return
            if self.waiting_producers.pop(producer_id, None) is not None:
                self._producer_ready(body, topic, producer_name, epoch, schema_version, last_stored)

        self._tasks.add(task := asyncio.create_task(wait()))
        task.add_done_callback(self._tasks.discard)

    def _producer_ready(
        self,
        body: Proto,
        topic: str,
        producer_name: str,
        epoch: int | None,
        schema_version: int | None,
        last_stored: int | None,
    ) -> None:
        deduplication = self.service.deduplication
        if last_stored is None:
            deduplication.forget(topic, producer_name)
        else:
            deduplication.track(topic, producer_name, last_stored)
        self.producers[body["producer_id"]] = (topic, producer_name)
        self.send(
            command(
                CommandType.PRODUCER_SUCCESS,
                request_id=body["request_id"],
                producer_name=producer_name,
                last_sequence_id=deduplication.last_persisted(topic, producer_name),
                producer_ready=True,
                **({} if epoch is None else {"topic_epoch": epoch}),
                **(
                    {}
                    if schema_version is None
                    else {"schema_version": encode_version(schema_version)}
                ),
            )
        )

    def _fence(self, producer_id: int) -> None:
        """An exclusive producer with fencing took the topic: this producer is closed, and
        its client, coming back with an older epoch, is refused as fenced."""
        if self.producers.pop(producer_id, None) is not None:
            self.send(
                command(CommandType.CLOSE_PRODUCER, producer_id=producer_id, request_id=_NO_REQUEST)
            )

    async def _send(self, frame: Frame) -> None:
        body = frame.body
        producer_id = body["producer_id"]
        sequence_id = body["sequence_id"]
        producer = self.producers.get(producer_id)
        if producer is None:
            self._fail(CommandType.SEND, body, ServerError.UnknownError, "no such producer")
            return
        if frame.metadata is None:
            raise FrameError("SEND without a payload")
        try:
            entry = entry_of_send(frame.metadata, frame.payload, frame.raw_metadata)
        except EntryError as exc:
            log.warning("connection %s: unreadable message: %s", self.peer, exc)
            self._fail(CommandType.SEND, body, ServerError.UnknownError, str(exc))
            return
        highest = body.get("highest_sequence_id")
        topic, producer_name = producer
        if topic.startswith(NON_PERSISTENT):
            self._publish_non_persistent(topic, frame, producer_id, sequence_id, highest)
            return
        deduplication = self.service.deduplication
        verdict = deduplication.check(topic, producer_name, sequence_id, highest or sequence_id)
        if verdict is Verdict.DUPLICATE:
            self.writer.write(
                simple_frame(
                    send_receipt_command(producer_id, sequence_id, _NO_ID, _NO_ID, highest)
                )
            )
            return
        if verdict is Verdict.IN_FLIGHT:
            self._fail(
                CommandType.SEND,
                body,
                ServerError.PersistenceError,
                f"Message {sequence_id} of {producer_name} is being written: send it again",
            )
            return

        def done(position: Position | None, error: BaseException | None) -> None:
            if error is not None or position is None:
                deduplication.failed(topic, producer_name)
                self._fail(CommandType.SEND, body, server_error(error or Exception()), str(error))
                return
            deduplication.persisted(topic, producer_name, sequence_id, highest or sequence_id)
            if not self.writer.is_closing():
                self.writer.write(
                    simple_frame(
                        send_receipt_command(
                            producer_id,
                            sequence_id,
                            position.ledger_id,
                            position.entry_id,
                            highest,
                        )
                    )
                )

        self.service.appender.submit(_Pending(self.role, topic, entry, done))

    def _publish_non_persistent(
        self, topic: str, frame: Frame, producer_id: int, sequence_id: int, highest: int | None
    ) -> None:
        """Receipted at once with (0, 0), as Pulsar does, and handed to the consumers
        connected now (:mod:`cursorops.wire.non_persistent`)."""
        metadata = frame.metadata or {}
        key = metadata.get("ordering_key") or metadata.get("partition_key", "").encode() or None
        self.service.non_persistent.publish(
            topic,
            frame.raw_metadata,
            frame.payload,
            max(1, int(metadata.get("num_messages_in_batch", 1))),
            key,
        )
        self.writer.write(
            simple_frame(send_receipt_command(producer_id, sequence_id, 0, 0, highest))
        )

    def _non_persistent_command(self, kind: CommandType, body: Proto) -> bool:
        """True when the command is a non-persistent consumer's (or subscribes one)."""
        if kind is CommandType.SUBSCRIBE:
            return str(body.get("topic", "")).startswith(NON_PERSISTENT)
        return body.get("consumer_id") in self.non_persistent

    async def _non_persistent_consumer(self, frame: Frame) -> None:
        """A non-persistent consumer's commands: nothing is stored, acknowledged, or
        delivered again; a seek or a redelivery has nothing to act on."""
        kind, body = frame.type, frame.body
        service = self.service
        if kind is CommandType.SUBSCRIBE:
            if body.get("read_compacted"):
                raise InvalidArgumentError("readCompacted only valid on persistent topics")
            name = TopicName.parse(body["topic"])
            consumer_id = body["consumer_id"]
            if consumer_id in self.non_persistent:
                self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
                return
            await service.store.run(service.ensure_topic, self.role, name, Operation.SUBSCRIBE)
            consumer = NonPersistentConsumer(
                consumer_id,
                str(name),
                body["subscription"],
                SubType(body.get("subType", 0)),
                name.partition_index if name.is_partition else -1,
                body.get("priority_level", 0),
                body.get("consumer_name") or f"consumer-{consumer_id}",
                self.writer.write,
            )
            service.non_persistent.subscribe(consumer)
            self.non_persistent[consumer_id] = consumer
            self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
            return
        consumer = self.non_persistent[body["consumer_id"]]
        if kind is CommandType.FLOW:
            consumer.permits += body.get("messagePermits", 0)
        elif kind is CommandType.ACK:
            if body.get("request_id") is not None:
                self.send(
                    command(
                        CommandType.ACK_RESPONSE,
                        consumer_id=consumer.consumer_id,
                        request_id=body["request_id"],
                    )
                )
        elif kind in (CommandType.CLOSE_CONSUMER, CommandType.UNSUBSCRIBE):
            service.non_persistent.leave(consumer)
            del self.non_persistent[consumer.consumer_id]
            self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
        elif kind is CommandType.SEEK:
            self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
        elif kind is CommandType.GET_LAST_MESSAGE_ID:
            raise InvalidArgumentError("GetLastMessageId is not supported on non-persistent topics")

    async def _close_producer(self, frame: Frame) -> None:
        body = frame.body
        producer_id = body["producer_id"]
        producer = self.producers.pop(producer_id, None)
        topic = (
            producer[0] if producer is not None else self.waiting_producers.pop(producer_id, None)
        )
        if topic is not None:
            self.service.producer_gone(topic, (self, producer_id))
        self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

    # -- consumers ---------------------------------------------------------------

    async def _subscribe(self, frame: Frame) -> None:
        body = frame.body
        consumer_id = body["consumer_id"]
        if consumer_id in self.consumers:
            # The client retries a subscribe it gave up waiting for: already done.
            self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
            return
        name = TopicName.parse(body["topic"])
        subscription = body["subscription"]
        sub_type = _SUB_TYPES[SubType(body.get("subType", 0))]
        consumer_name = body.get("consumer_name") or f"consumer-{consumer_id}"
        start = body.get("initialPosition", InitialPosition.Latest)
        start_id: Proto | None = body.get("start_message_id")
        durable = body.get("durable", True)
        service = self.service
        # A reader of a partitioned topic is one consumer per partition, each with a name of
        # its own: its subscription is its own, so they are one identity (as for a consumer).
        registry_key = (
            str(name.base if name.is_partition else name),
            subscription,
            consumer_name if durable else "",
        )

        schema = schema_of(body)
        read_compacted = bool(body.get("read_compacted"))
        if read_compacted and sub_type not in (
            SubscriptionType.EXCLUSIVE,
            SubscriptionType.FAILOVER,
        ):
            raise InvalidArgumentError(
                "readCompacted only allowed on failover or exclusive subscriptions"
            )

        def open_consumer() -> WireConsumer:
            base, partition = service.ensure_topic(self.role, name, Operation.SUBSCRIBE)
            broker = service.broker
            if schema is not None:
                broker.check_consumer_schema(self.role, base, schema)
            existing = service.subscription_type(self.role, base, subscription)
            if (
                not durable
                and existing is not None
                and (base, subscription) not in (service.non_durable)
            ):
                # A reader's cursor moves freely (seek); where a durable one's is gated, a
                # subscription this process did not make for a reader is durable to it. On
                # other namespaces a reader takes it (as one coming back after a restart).
                if broker.authorized_topic(self.role, Operation.LOOKUP, base).approval_required:
                    raise ConflictError(
                        f"Durable subscription with the same name already exists: {subscription}"
                    )
                service.non_durable.add((base, subscription))
            if existing is None:
                initial = "earliest" if start == InitialPosition.Earliest else "latest"
                after = None
                if start_id is not None:
                    ledger, entry = signed64(start_id["ledgerId"]), signed64(start_id["entryId"])
                    if ledger < 0:
                        initial = "earliest"
                    elif ledger == _INT64_MAX:
                        initial = "latest"
                    else:
                        # At the id's entry, as Pulsar's broker starts a non-durable cursor
                        # (every start id is a batch id to it): the client drops what its
                        # start excludes (the id itself unless inclusive, a batch's earlier
                        # indexes).
                        after = Position(ledger, entry - 1)
                try:
                    existing = broker.create_subscription(
                        self.role,
                        base,
                        subscription,
                        sub_type,
                        initial_position=initial,
                        start_after=after,
                    ).type
                    if not durable:
                        service.non_durable.add((base, subscription))
                except AlreadyExistsError:
                    existing = service.subscription_type(self.role, base, subscription)
            if existing is not sub_type:
                raise ConsumerBusyError(
                    f"Subscription {subscription} is of a different type"
                    f" ({existing.value if existing else 'deleted'})"
                )
            dispatcher = broker.dispatcher(
                self.role, base, subscription, partition=partition if partition >= 0 else None
            )
            ranges = None
            if sub_type is SubscriptionType.KEY_SHARED:
                ranges = requested_ranges(body.get("keySharedMeta"))
            identity = self.registry.join(registry_key)
            try:
                if sub_type is SubscriptionType.KEY_SHARED:
                    service.key_shared.join(base, subscription, identity.consumer_id, ranges)
                core = dispatcher.subscribe(
                    consumer_name,
                    priority=body.get("priority_level", 0),
                    consumer_id=identity.consumer_id,
                    epoch=body.get("consumer_epoch"),
                    hash_ranges=ranges,
                )
            except BaseException:
                if self.registry.leave(registry_key):
                    service.key_shared.leave(base, subscription, identity.consumer_id)
                raise
            wire = WireConsumer(
                consumer_id,
                str(name),
                base,
                subscription,
                sub_type,
                partition,
                dispatcher,
                core,
                identity,
                registry_key,
                durable=durable,
            )
            if read_compacted:
                skip_compacted_away(broker, self.role, wire)
            return wire

        wire = await service.store.run(open_consumer)
        loop = _ConsumerLoop(wire)
        self.consumers[consumer_id] = loop
        service.watch(loop)
        self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))
        loop.task = asyncio.create_task(self._dispatch_loop(loop))

    async def _dispatch_loop(self, loop: _ConsumerLoop) -> None:
        wire = loop.wire
        store = self.service.store
        try:
            while not wire.closed:
                if wire.permits <= 0:
                    await loop.wake.wait()
                    loop.wake.clear()
                    continue
                loop.wake.clear()
                frames, count = await store.run(wire.dispatch, wire.permits)
                if wire.closed:
                    return
                if count:
                    wire.permits -= count
                    if not self.writer.is_closing():
                        self.writer.write(b"".join(frames))
                        await self.writer.drain()
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loop.wake.wait(), POLL_SECONDS)
        except (ConnectionError, asyncio.CancelledError):
            return
        except BrokerFencedError as exc:
            # This broker's life ended: its heartbeat closes every connection and joins again.
            log.warning("connection %s: dispatch refused: %s", self.peer, exc)
            self.writer.close()
        except Exception:
            log.exception(
                "connection %s: dispatch to consumer %d failed", self.peer, wire.consumer_id
            )
            self.writer.close()

    async def _flow(self, frame: Frame) -> None:
        body = frame.body
        loop = self.consumers.get(body["consumer_id"])
        if loop is not None:
            loop.wire.permits += body.get("messagePermits", 0)
            loop.wake.set()

    def _consumer(self, body: Proto) -> _ConsumerLoop:
        loop = self.consumers.get(body["consumer_id"])
        if loop is None:
            raise NotFoundError(f"Consumer {body['consumer_id']} not found")
        return loop

    async def _ack(self, frame: Frame) -> None:
        body = frame.body
        loop = self._consumer(body)
        await self.service.store.run(loop.wire.acknowledge, body)
        request_id = body.get("request_id")
        if request_id is not None:
            self.send(
                command(
                    CommandType.ACK_RESPONSE,
                    consumer_id=body["consumer_id"],
                    request_id=request_id,
                )
            )

    async def _redeliver(self, frame: Frame) -> None:
        body = frame.body
        loop = self._consumer(body)
        await self.service.store.run(loop.wire.redeliver, body)
        loop.wake.set()

    async def _close_consumer_command(self, frame: Frame) -> None:
        body = frame.body
        loop = self.consumers.pop(body["consumer_id"], None)
        if loop is not None:
            await self._close_consumer(loop)
        self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

    async def _close_consumer(
        self, loop: _ConsumerLoop, *, unsubscribe: bool = False, seeking: bool = False
    ) -> None:
        """``seeking``: closed by a seek, which the client follows with a new subscribe: what
        it held on this partition is released, and a reader's subscription stays."""
        wire = loop.wire
        wire.closed = True
        self.service.unwatch(loop)
        await _stop(loop)
        registry = self.registry
        service = self.service

        def leave() -> None:
            if seeking:
                wire.release_held()
            if registry.leave(wire.registry_key):
                service.key_shared.leave(
                    wire.base_topic, wire.subscription, wire.identity.consumer_id
                )
                wire.core.close()
                if not wire.durable and not seeking:
                    service.non_durable.discard((wire.base_topic, wire.subscription))
                    # A reader's subscription lives as long as the reader (non-durable).
                    with contextlib.suppress(CursorOpsError):
                        self.service.broker.end_reader_subscription(
                            self.role, wire.base_topic, wire.subscription
                        )
                    return
            if unsubscribe:
                self.service.broker.delete_subscription(
                    self.role, wire.base_topic, wire.subscription
                )

        await self.service.store.run(leave)

    async def _unsubscribe(self, frame: Frame) -> None:
        body = frame.body
        loop = self._consumer(body)
        del self.consumers[body["consumer_id"]]
        await self._close_consumer(loop, unsubscribe=True)
        self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

    async def _get_last_message_id(self, frame: Frame) -> None:
        """The last entry, and the subscription's mark-delete position (the client compares
        them: a reader at the last entry, inclusive, has a message available)."""
        body = frame.body
        wire = self._consumer(body).wire
        broker = self.service.broker

        def last() -> tuple[Position, Position]:
            state = broker.cursor_state(self.role, wire.topic, wire.subscription)
            return broker.last_position(self.role, wire.topic), state.mark_delete

        position, mark_delete = await self.service.store.run(last)

        def message_id(at: Position) -> Proto:
            mid: Proto = {"ledgerId": at.ledger_id, "entryId": at.entry_id, "batch_index": -1}
            if wire.partition >= 0:
                mid["partition"] = wire.partition
            return mid

        self.send(
            command(
                CommandType.GET_LAST_MESSAGE_ID_RESPONSE,
                last_message_id=message_id(position),
                consumer_mark_delete_position=message_id(mark_delete),
                request_id=body["request_id"],
            )
        )

    async def _seek(self, frame: Frame) -> None:
        """Pulsar 4's seek: the subscription's consumers on this partition stop, its cursor
        is reset, and they are disconnected (``CommandCloseConsumer``); each client
        subscribes again and reads from the new position. A refused seek (an
        approval namespace's durable subscription, an unknown id) changes nothing."""
        body = frame.body
        wire = self._consumer(body).wire
        service = self.service
        mid: Proto | None = body.get("message_id")
        publish_time: int | None = body.get("message_publish_time")
        if mid is None and publish_time is None:
            raise InvalidArgumentError("A seek needs a message id or a publish time")
        position = None
        bits = None
        if mid is not None:
            position = Position(signed64(mid["ledgerId"]), signed64(mid["entryId"]))
            if mid.get("ack_set"):
                bits = ack_set.from_words(mid["ack_set"])
            publish_time = None
        affected = service.consumers_of(wire.topic, wire.subscription)
        for _, loop in affected:
            await _stop(loop)

        def seek() -> None:
            service.broker.seek(
                self.role,
                wire.topic,
                wire.subscription,
                position=position,
                timestamp_ms=publish_time,
                ack_bits=bits,
                non_durable=not wire.durable,
            )

        try:
            await service.store.run(seek)
        except BaseException:
            for connection, loop in affected:
                connection._resume(loop)
            raise
        for connection, loop in affected:
            await connection._disconnect_for_seek(loop)
        self.send(command(CommandType.SUCCESS, request_id=body["request_id"]))

    def _resume(self, loop: _ConsumerLoop) -> None:
        if not loop.wire.closed and self.consumers.get(loop.wire.consumer_id) is loop:
            loop.task = asyncio.create_task(self._dispatch_loop(loop))

    async def _disconnect_for_seek(self, loop: _ConsumerLoop) -> None:
        if self.consumers.get(loop.wire.consumer_id) is not loop:
            return
        del self.consumers[loop.wire.consumer_id]
        await self._close_consumer(loop, seeking=True)
        self.send(
            command(
                CommandType.CLOSE_CONSUMER,
                consumer_id=loop.wire.consumer_id,
                request_id=_NO_REQUEST,
            )
        )

    async def _get_topics_of_namespace(self, frame: Frame) -> None:
        """The namespace's topics (partitions for a partitioned topic) for a regex or
        multi-topic consumer; an unchanged list (same hash) is answered without names."""
        body = frame.body
        namespace = body.get("namespace", "")
        TopicName.parse(f"{namespace}/x")
        try:
            mode = TopicsMode(body.get("mode", TopicsMode.PERSISTENT))
        except ValueError as exc:
            raise InvalidArgumentError(f"Unknown topics mode {body.get('mode')}") from exc
        infos = await self.service.store.run(self.service.broker.list_topics, self.role, namespace)
        partitions = [name for info in infos for name in info.partition_names()]
        listed = topic_list(partitions, mode, body.get("topics_pattern"))
        changed = body.get("topics_hash") != listed.hash
        self.send(
            command(
                CommandType.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                request_id=body["request_id"],
                topics=listed.topics if changed else [],
                filtered=listed.filtered,
                topics_hash=listed.hash,
                changed=changed,
            )
        )

    _handlers: dict[CommandType, Callable[[Connection, Frame], Any]] = {
        CommandType.PING: _ping,
        CommandType.PONG: _pong,
        CommandType.LOOKUP: _lookup,
        CommandType.PARTITIONED_METADATA: _partitioned_metadata,
        CommandType.PRODUCER: _producer,
        CommandType.SEND: _send,
        CommandType.CLOSE_PRODUCER: _close_producer,
        CommandType.SUBSCRIBE: _subscribe,
        CommandType.FLOW: _flow,
        CommandType.ACK: _ack,
        CommandType.REDELIVER_UNACKNOWLEDGED_MESSAGES: _redeliver,
        CommandType.CLOSE_CONSUMER: _close_consumer_command,
        CommandType.UNSUBSCRIBE: _unsubscribe,
        CommandType.GET_LAST_MESSAGE_ID: _get_last_message_id,
        CommandType.SEEK: _seek,
        CommandType.GET_SCHEMA: schemas.get_schema,
        CommandType.GET_OR_CREATE_SCHEMA: schemas.get_or_create_schema,
        CommandType.GET_TOPICS_OF_NAMESPACE: _get_topics_of_namespace,
    }


async def _stop(loop: _ConsumerLoop) -> None:
    """Stop the consumer's dispatch task (its permits stay; it may be resumed)."""
    task, loop.task = loop.task, None
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def renew_leases(service: Service) -> None:
    """Keep live connections' consumers registered (their leases would lapse when idle)."""
    while True:
        await asyncio.sleep(RENEW_SECONDS)
        wires = [
            loop.wire
            for connection in list(service.connections)
            for loop in connection.consumers.values()
        ]

        def renew(wires: list[WireConsumer]) -> None:
            seen: set[str] = set()
            for wire in wires:
                if wire.closed or wire.identity.consumer_id in seen:
                    continue
                seen.add(wire.identity.consumer_id)
                with contextlib.suppress(CursorOpsError):
                    wire.dispatcher.renew(wire.core)

        await service.store.run(renew, wires)
