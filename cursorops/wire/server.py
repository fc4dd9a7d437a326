"""The asyncio server of Pulsar's binary protocol: sockets, keep-alive, closing.

One :class:`Connection` per socket reads bytes, decodes them into frames
(:mod:`cursorops.wire.frames`) and hands each, in order, to the connection's
:class:`~cursorops.wire.session.Session`, the protocol's state machine, which
writes its answers and its consumers' messages to the socket. A bad frame closes
that connection only, with a log line (nothing was acknowledged or written for
it). A silent connection is pinged, and dropped when it stays silent.

The broker and its stores are used from one thread
(:class:`~cursorops.wire.store_thread.StoreThread`), so the event loop keeps
serving pings and other connections while a commit runs; sends are group
committed (:mod:`cursorops.wire.appender`), and each consumer has a task that,
while it has permits, asks the dispatcher for that many messages and writes them
as ``CommandMessage`` frames; with nothing to deliver it waits for a produce to
its partition, or polls (messages produced by other processes, delayed messages
coming due).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from cursorops.wire.authentication import is_loopback
from cursorops.wire.commands import CommandType
from cursorops.wire.frames import FrameDecoder, FrameError, command
from cursorops.wire.handlers import dispatch
from cursorops.wire.service import Service
from cursorops.wire.session import ConnectionRefused, Peer, Session
from cursorops.wire.tls import common_name

log = logging.getLogger("cursorops.protocol")

READ_BYTES = 256 * 1024
"""The most one read of the socket takes."""


def peer_of(writer: asyncio.StreamWriter) -> Peer:
    """Who is at the other end of ``writer``'s socket."""
    peer = writer.get_extra_info("peername")
    return Peer(
        f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer),
        isinstance(peer, tuple) and is_loopback(str(peer[0])),
        common_name(writer.get_extra_info("peercert")),
    )


class Connection:
    """One client socket: bytes in, frames to its session, kept alive, closed once."""

    def __init__(
        self, service: Service, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.session = Session(service, writer, peer_of(writer), dispatch)
        self.peer = self.session.peer
        self.decoder = FrameDecoder()
        self.last_received = time.monotonic()

    async def serve(self) -> None:
        session = self.session
        self.service.connections.add(session)
        keepalive = asyncio.create_task(self._keepalive())
        try:
            while True:
                data = await self.reader.read(READ_BYTES)
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
                    await session.handle(frame)
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
            await session.close()

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
                self.session.send(command(CommandType.PING))
