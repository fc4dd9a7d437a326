"""One connection's protocol state machine: frames in, frames out, no socket.

A :class:`Session` takes the frames its connection decoded, in order
(:meth:`Session.handle`), and writes its answers and its consumers' messages to a
:class:`Transport` (an ``asyncio.StreamWriter`` in the server, a list of bytes in a
test). It holds what the protocol gives a connection: CONNECT and its
credentials, the producers and consumers by id, each consumer's dispatch task,
and the rule that a failed command is answered in the response its client waits
for (:mod:`cursorops.wire.failures`), never by closing the connection. What each
command does is its handler's (:mod:`cursorops.wire.handlers`), passed in as a
:data:`Dispatch`; the socket, keep-alive and closing are the server's
(:mod:`cursorops.wire.server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from cursorops.core.domain.errors import BrokerFencedError, CursorMoveRefusedError, CursorOpsError
from cursorops.wire.auth import AuthenticationError
from cursorops.wire.commands import CommandType, ServerError
from cursorops.wire.consumer_loop import ConsumerLoop, stop
from cursorops.wire.errors import server_error
from cursorops.wire.failures import error_command, failure
from cursorops.wire.frames import MAX_MESSAGE_SIZE, Frame, FrameError, command, encode_frame
from cursorops.wire.non_persistent import NonPersistentConsumer
from cursorops.wire.proto import Proto
from cursorops.wire.refusal import Refusal
from cursorops.wire.service import Service
from cursorops.wire.sessions import Registry

log = logging.getLogger("cursorops.protocol")

SERVER_VERSION = "cursorops-standalone"
MAX_PROTOCOL_VERSION = 21
POLL_SECONDS = 0.1
"""How often a consumer with permits and nothing to deliver looks again."""
REFUSED_SECONDS = 5.0
"""How long a client whose credentials were refused keeps its connection without asking
anything (its client asks at once; answering pings would keep it open for ever)."""
NO_REQUEST = 2**64 - 1
"""The request id of a command that answers no request (Pulsar's -1)."""


class Transport(Protocol):
    """Where a session writes: the part of ``asyncio.StreamWriter`` it uses."""

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...

    async def drain(self) -> None: ...

    async def wait_closed(self) -> None: ...


@dataclass(frozen=True)
class Peer:
    """Who is at the other end, as the socket tells."""

    address: str
    """``host:port``, for log lines."""
    loopback: bool
    common_name: str | None = None
    """The common name of the client's verified certificate (TLS), if it showed one."""


class ConnectionRefused(Exception):
    """The connection is closed once its answer is written (a refused client's request)."""


Handler = Callable[["Session", Frame], Awaitable[None]]
"""What a command does: it answers on the session, or raises to have it answered failed."""
Dispatch = Callable[["Session", CommandType, Proto], Handler | None]
"""The handler of a command (None: not supported)."""


class Session:
    """One connection's protocol state: CONNECT, producers, consumers, their tasks."""

    _ids = itertools.count(1)

    def __init__(
        self, service: Service, transport: Transport, peer: Peer, dispatch: Dispatch
    ) -> None:
        self.service = service
        self.transport = transport
        self.peer = peer.address
        self._peer = peer
        self._dispatch = dispatch
        self.id = f"{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        self.connected = False
        self.producers: dict[int, tuple[str, str]] = {}
        """producer_id -> (partition name, producer name)."""
        self.waiting_producers: dict[int, str] = {}
        """producer_id -> partition name: WaitForExclusive producers not admitted yet."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.consumers: dict[int, ConsumerLoop] = {}
        self.non_persistent: dict[int, NonPersistentConsumer] = {}
        """Consumers of non-persistent topics (:mod:`cursorops.wire.non_persistent`)."""
        self.registry = Registry(f"{service.broker_id}/{self.id}")
        self.producer_names = itertools.count()
        self.role = service.role
        """Who the client acts as: the standalone's role, or its token's subject."""
        self.refused: str | None = None
        """Why its CONNECT was refused: every request is then answered with
        ``AuthenticationError`` (:meth:`_refuse`)."""

    # -- frames out --------------------------------------------------------------

    def send(self, cmd: Proto) -> None:
        if not self.transport.is_closing():
            self.transport.write(encode_frame(cmd))

    def fail(
        self,
        kind: CommandType,
        body: Proto,
        error: ServerError,
        message: str,
        *,
        logged: bool = False,
    ) -> None:
        """Answer a failed request; a command with no answer (an ack without a receipt) is
        logged instead, unless ``logged`` (the cursor door logged its refusal already)."""
        answer = failure(kind, body, error, message)
        if answer is not None:
            self.send(answer)
        elif not logged:
            log.warning("connection %s: %s failed: %s", self.peer, kind.name, message)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` for as long as the session lives (cancelled by :meth:`close`)."""
        self._tasks.add(task := asyncio.create_task(work))
        task.add_done_callback(self._tasks.discard)

    # -- frames in ---------------------------------------------------------------

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
        handler = self._dispatch(self, kind, body)
        if handler is None:
            request_id = body.get("request_id")
            if request_id is not None:
                self.send(
                    error_command(
                        request_id, ServerError.NotAllowedError, f"{kind.name} not supported"
                    )
                )
            else:
                log.info("connection %s: ignoring %s", self.peer, kind.name)
            return
        try:
            await handler(self, frame)
        except CursorOpsError as exc:
            logged = isinstance(exc, CursorMoveRefusedError)
            self.fail(kind, body, server_error(exc), str(exc), logged=logged)
        except Refusal as exc:
            self.fail(kind, body, exc.code, str(exc))
        except Exception as exc:
            log.exception("connection %s: %s failed", self.peer, kind.name)
            self.fail(kind, body, ServerError.UnknownError, f"{type(exc).__name__}: {exc}")

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
                    peer_cn=self._peer.common_name,
                    loopback=self._peer.loopback,
                )
            except AuthenticationError as exc:
                log.warning("connection %s: authentication failed: %s", self.peer, exc)
                self.refused = str(exc)
                asyncio.get_running_loop().call_later(REFUSED_SECONDS, self.transport.close)
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
        self.fail(kind, body, ServerError.AuthenticationError, reason)
        raise ConnectionRefused(reason)

    # -- producers ---------------------------------------------------------------

    def fence(self, producer_id: int) -> None:
        """An exclusive producer with fencing took the topic: this producer is closed, and
        its client, coming back with an older epoch, is refused as fenced."""
        if self.producers.pop(producer_id, None) is not None:
            self.send(
                command(CommandType.CLOSE_PRODUCER, producer_id=producer_id, request_id=NO_REQUEST)
            )

    # -- consumers ---------------------------------------------------------------

    def start(self, loop: ConsumerLoop) -> None:
        """Deliver to the consumer for as long as it is open and has permits."""
        loop.task = asyncio.create_task(self._dispatch_loop(loop))

    async def _dispatch_loop(self, loop: ConsumerLoop) -> None:
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
                    if not self.transport.is_closing():
                        self.transport.write(b"".join(frames))
                        await self.transport.drain()
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loop.wake.wait(), POLL_SECONDS)
        except (ConnectionError, asyncio.CancelledError):
            return
        except BrokerFencedError as exc:
            # This broker's life ended: its heartbeat closes every connection and joins again.
            log.warning("connection %s: dispatch refused: %s", self.peer, exc)
            self.transport.close()
        except Exception:
            log.exception(
                "connection %s: dispatch to consumer %d failed", self.peer, wire.consumer_id
            )
            self.transport.close()

    async def close_consumer(
        self, loop: ConsumerLoop, *, unsubscribe: bool = False, seeking: bool = False
    ) -> None:
        """``seeking``: closed by a seek, which the client follows with a new subscribe: what
        it held on this partition is released, and a reader's subscription stays."""
        wire = loop.wire
        wire.closed = True
        self.service.unwatch(loop)
        await stop(loop)
        await self.service.store.run(
            lambda: self.service.leave(
                self.role, self.registry, wire, unsubscribe=unsubscribe, seeking=seeking
            )
        )

    def resume(self, loop: ConsumerLoop) -> None:
        if not loop.wire.closed and self.consumers.get(loop.wire.consumer_id) is loop:
            self.start(loop)

    async def disconnect_for_seek(self, loop: ConsumerLoop) -> None:
        if self.consumers.get(loop.wire.consumer_id) is not loop:
            return
        del self.consumers[loop.wire.consumer_id]
        await self.close_consumer(loop, seeking=True)
        self.send(
            command(
                CommandType.CLOSE_CONSUMER,
                consumer_id=loop.wire.consumer_id,
                request_id=NO_REQUEST,
            )
        )

    # -- the end -----------------------------------------------------------------

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
                await self.close_consumer(loop)
            except BrokerFencedError:
                # This life was declared dead: the cluster released its consumers already,
                # and the new life forgets what this one kept in memory.
                log.info("connection %s: its consumers were released by the cluster", self.peer)
        self.service.connections.discard(self)
        if not self.transport.is_closing():
            self.transport.close()
        with contextlib.suppress(Exception):
            await self.transport.wait_closed()
