"""A bare-socket client over cursorops' own frame codec, for what the official client
never sends: bad frames, explicit epochs, raw ``ack_set`` values."""

from __future__ import annotations

import socket
import time

from cursorops.wire import commands
from cursorops.wire.commands import CommandType
from cursorops.wire.frames import Frame, FrameDecoder, command, encode_frame, encode_payload_frame
from cursorops.wire.proto import Proto, encode


class RawClient:
    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, cmd: Proto) -> None:
        self.sock.sendall(encode_frame(cmd))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        while not self.frames:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.frames += self.decoder.feed(data)
        return self.frames.pop(0)

    def expect(self, kind: CommandType, timeout: float = 5.0) -> Proto:
        """The body of the next frame of ``kind``, skipping pings and others."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if frame.type is kind:
                return frame.body
            if frame.type is CommandType.ERROR:
                raise AssertionError(f"server error: {frame.body}")

    def expect_frame(self, kind: CommandType, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.recv(max(0.01, deadline - time.monotonic()))
            if frame.type is kind:
                return frame

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def connect(self) -> Proto:
        self.send(command(CommandType.CONNECT, client_version="raw", protocol_version=20))
        return self.expect(CommandType.CONNECTED)

    def producer(self, topic: str, producer_id: int = 1) -> None:
        self.send(command(CommandType.PRODUCER, topic=topic, producer_id=producer_id, request_id=1))
        self.expect(CommandType.PRODUCER_SUCCESS)

    def send_message(
        self,
        payload: bytes,
        sequence_id: int,
        producer_id: int = 1,
        batch: list[bytes] | None = None,
    ) -> Proto:
        meta: Proto = {"producer_name": "raw", "sequence_id": sequence_id, "publish_time": 1}
        if batch is not None:
            parts = []
            for item in batch:
                single = encode(commands.SingleMessageMetadata, {"payload_size": len(item)})
                parts += [len(single).to_bytes(4, "big"), single, item]
            payload = b"".join(parts)
            meta["num_messages_in_batch"] = len(batch)
        cmd = command(
            CommandType.SEND,
            producer_id=producer_id,
            sequence_id=sequence_id,
            num_messages=len(batch) if batch else 1,
        )
        self.send_raw(encode_payload_frame(cmd, encode(commands.MessageMetadata, meta), payload))
        return self.expect(CommandType.SEND_RECEIPT)

    def subscribe(
        self, topic: str, subscription: str, sub_type: int, consumer_id: int = 1, **extra: object
    ) -> None:
        self.send(
            command(
                CommandType.SUBSCRIBE,
                topic=topic,
                subscription=subscription,
                subType=sub_type,
                consumer_id=consumer_id,
                request_id=100 + consumer_id,
                initialPosition=1,
                **extra,
            )
        )
        self.expect(CommandType.SUCCESS)
