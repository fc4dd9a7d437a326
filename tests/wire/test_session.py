"""A connection's protocol state machine without a socket: frames in, frames out.

A :class:`~cursorops.wire.session.Session` over a real Broker on a temporary home
(SQLite, the ledger folder), its output collected from a :class:`Collected`
transport and decoded with the frame codec. What the official client sees of the
same commands is tested over sockets in ``tests/protocol/``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from cursorops.core.domain.config import Config
from cursorops.core.services.broker import Broker
from cursorops.wire import commands, membership
from cursorops.wire.commands import CommandType, LookupType, ServerError, SubType
from cursorops.wire.failures import failure
from cursorops.wire.frames import (
    Frame,
    FrameDecoder,
    FrameError,
    command,
    encode_frame,
    encode_payload_frame,
)
from cursorops.wire.handlers import dispatch
from cursorops.wire.listeners import BrokerUrls
from cursorops.wire.proto import Proto, encode
from cursorops.wire.service import Service
from cursorops.wire.session import Peer, Session
from cursorops.wire.standalone import bootstrap
from cursorops.wire.store_thread import StoreThread

ROLE = "admin"
TOPIC = "persistent://public/default/session-t"


class Collected:
    """A transport that keeps what is written, decoded into frames."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder()
        self.frames: list[Frame] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.frames += self._decoder.feed(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    async def drain(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None

    def take(self) -> list[Frame]:
        taken, self.frames = self.frames, []
        return taken


def frame_of(cmd: Proto, metadata: Proto | None = None, payload: bytes = b"") -> Frame:
    """``cmd`` as the server's decoder gives it: through the codec, both ways."""
    data = (
        encode_frame(cmd)
        if metadata is None
        else encode_payload_frame(cmd, encode(commands.MessageMetadata, metadata), payload)
    )
    (frame,) = FrameDecoder().feed(data)
    return frame


def producer(producer_id: int, request_id: int) -> Frame:
    """A PRODUCER on :data:`TOPIC`."""
    return frame_of(
        command(CommandType.PRODUCER, topic=TOPIC, producer_id=producer_id, request_id=request_id)
    )


def subscribe(sub_type: SubType, consumer_id: int, request_id: int, **more: object) -> Frame:
    """A SUBSCRIBE to :data:`TOPIC`'s subscription ``s``."""
    return frame_of(
        command(
            CommandType.SUBSCRIBE,
            topic=TOPIC,
            subscription="s",
            subType=int(sub_type),
            consumer_id=consumer_id,
            request_id=request_id,
            **more,
        )
    )


Run = Callable[[Callable[[Session, Collected], Awaitable[None]]], None]


@pytest.fixture
def run_session(tmp_config: Config) -> Iterator[Run]:
    """Runs a scenario on a fresh session over a fresh broker, in a loop of its own."""
    config = tmp_config

    def run(scenario: Callable[[Session, Collected], Awaitable[None]]) -> None:
        async def main() -> None:
            store = StoreThread()
            broker = await store.run(Broker, config)
            try:
                await store.run(bootstrap, broker, ROLE)
                service = Service(broker, store, BrokerUrls("pulsar://127.0.0.1:6650"), ROLE)
                service.appender.start()
                await store.run(membership.join, service, "session-test")
                transport = Collected()
                session = Session(service, transport, Peer("test:1", loopback=True), dispatch)
                service.connections.add(session)
                try:
                    await scenario(session, transport)
                finally:
                    await session.close()
                    await service.appender.drain()
                    await store.run(broker.cluster.leave)
            finally:
                await store.run(broker.close)
                store.close()

        asyncio.run(main())

    yield run


async def _connect(session: Session, transport: Collected) -> None:
    await session.handle(frame_of(command(CommandType.CONNECT, protocol_version=20)))
    (connected,) = transport.take()
    assert connected.type is CommandType.CONNECTED


async def _next(transport: Collected, kind: CommandType) -> Frame:
    """The first frame of ``kind`` written (a consumer's task writes in the background)."""
    for _ in range(500):
        for frame in transport.frames:
            if frame.type is kind:
                transport.frames.remove(frame)
                return frame
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind.name} in {[f.type.name for f in transport.frames]}")


def test_a_command_before_connect_is_a_bad_frame(run_session: Run) -> None:
    async def scenario(session: Session, transport: Collected) -> None:
        with pytest.raises(FrameError, match="before CONNECT"):
            await session.handle(frame_of(command(CommandType.PING)))
        assert transport.take() == []
        await _connect(session, transport)
        with pytest.raises(FrameError, match="CONNECT twice"):
            await session.handle(frame_of(command(CommandType.CONNECT, protocol_version=20)))

    run_session(scenario)


def test_produce_then_consume_through_the_session(run_session: Run) -> None:
    async def scenario(session: Session, transport: Collected) -> None:
        await _connect(session, transport)
        await session.handle(producer(producer_id=1, request_id=1))
        (ready,) = transport.take()
        assert ready.type is CommandType.PRODUCER_SUCCESS and ready.body["producer_ready"]
        meta = {"producer_name": ready.body["producer_name"], "sequence_id": 0, "publish_time": 1}
        send = command(CommandType.SEND, producer_id=1, sequence_id=0, num_messages=1)
        await session.handle(frame_of(send, meta, b"hello"))
        receipt = (await _next(transport, CommandType.SEND_RECEIPT)).body
        assert receipt["sequence_id"] == 0
        await session.handle(subscribe(SubType.Shared, 7, 2, initialPosition=1))
        assert (await _next(transport, CommandType.SUCCESS)).body["request_id"] == 2
        await session.handle(frame_of(command(CommandType.FLOW, consumer_id=7, messagePermits=10)))
        message = await _next(transport, CommandType.MESSAGE)
        assert message.payload == b"hello"
        assert message.body["message_id"]["ledgerId"] == receipt["message_id"]["ledgerId"]

    run_session(scenario)


def test_failures_are_answered_where_the_client_waits(run_session: Run) -> None:
    async def scenario(session: Session, transport: Collected) -> None:
        await _connect(session, transport)
        await session.handle(
            frame_of(command(CommandType.ACK, consumer_id=9, ack_type=0, request_id=3))
        )
        await session.handle(frame_of(command(CommandType.LOOKUP, topic="bad//", request_id=4)))
        await session.handle(
            frame_of(
                command(CommandType.UNSUBSCRIBE, consumer_id=9, request_id=5),
            )
        )
        ack, lookup, error = transport.take()
        assert ack.type is CommandType.ACK_RESPONSE and ack.body["request_id"] == 3
        assert ack.body["error"] == ServerError.NotAllowedError
        assert lookup.type is CommandType.LOOKUP_RESPONSE
        assert lookup.body["response"] == LookupType.Failed and lookup.body["request_id"] == 4
        assert error.type is CommandType.ERROR and error.body["request_id"] == 5

    run_session(scenario)


def test_close_frees_what_the_session_held(run_session: Run) -> None:
    async def scenario(session: Session, transport: Collected) -> None:
        await _connect(session, transport)
        await session.handle(producer(producer_id=1, request_id=1))
        await session.handle(subscribe(SubType.Exclusive, 1, 2))
        service = session.service
        assert service.producers and session.consumers
        await session.close()
        assert transport.closed
        assert not service.producers and not session.consumers
        assert session not in service.connections

    run_session(scenario)


def test_a_failure_without_a_request_id_answers_nothing_but_a_send() -> None:
    error = ServerError.UnknownError
    assert failure(CommandType.FLOW, {"consumer_id": 1}, error, "x") is None
    assert failure(CommandType.LOOKUP, {"topic": "t"}, error, "x") is None
    answer = failure(CommandType.SEND, {"producer_id": 2, "sequence_id": 3}, error, "x")
    assert answer is not None and answer["type"] == CommandType.SEND_ERROR
    assert answer["send_error"] == {"producer_id": 2, "sequence_id": 3, "error": 0, "message": "x"}
