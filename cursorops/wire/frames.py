"""Pulsar's framing: bytes in, commands out, and the reverse. No I/O.

Two frame shapes (Pulsar's "binary protocol" documentation)::

    simple:   [total_size u32][command_size u32][BaseCommand]
    payload:  [total_size u32][command_size u32][BaseCommand]
              [magic 0x0e01 u16][crc32c u32][metadata_size u32][MessageMetadata][payload]

Sizes are big-endian; ``total_size`` counts everything after itself. The
CRC32C covers ``metadata_size``, the metadata and the payload. A payload frame
without the magic (clients before protocol v6) carries no checksum.
:class:`FrameDecoder` takes bytes as they come off a socket and returns whole
frames; anything malformed raises :class:`FrameError` and the connection is
to be closed (one connection's problem only).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c

from cursorops.wire import commands
from cursorops.wire.commands import CommandType
from cursorops.wire.proto import Proto, ProtoError, decode, encode

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's default ``maxMessageSize`` (5 MiB), announced to clients in ``CommandConnected``."""
FRAME_PADDING = 10 * 1024
"""Room for the command and metadata beyond the message (Pulsar's frame padding)."""
MAX_FRAME_SIZE = MAX_MESSAGE_SIZE + FRAME_PADDING

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")


class FrameError(ValueError):
    """The bytes are not a valid frame: the connection that sent them is closed."""


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


@dataclass(frozen=True)
class Frame:
    command: Proto
    """The decoded ``BaseCommand``: ``type`` and its body under :func:`commands.body_name`."""
    metadata: Proto | None = None
    """``MessageMetadata`` of a payload frame."""
    payload: bytes = b""
    raw_metadata: bytes = b""
    """The ``MessageMetadata`` bytes as they came off the wire: what the broker stores."""

    @property
    def type(self) -> CommandType:
        return CommandType(self.command["type"])

    @property
    def body(self) -> Proto:
        body: Proto = self.command.get(commands.body_name(self.type), {})
        return body


def command(command_type: CommandType, **fields: object) -> Proto:
    """A ``BaseCommand`` value: ``command(CommandType.FLOW, consumer_id=1, messagePermits=10)``."""
    return {"type": int(command_type), commands.body_name(command_type): fields}


def encode_frame(cmd: Proto) -> bytes:
    """A simple frame holding ``cmd`` (a ``BaseCommand`` value)."""
    return simple_frame(encode(commands.BaseCommand, cmd))


def simple_frame(body: bytes) -> bytes:
    """A simple frame holding an encoded ``BaseCommand``."""
    return _U32.pack(len(body) + 4) + _U32.pack(len(body)) + body


def encode_payload_frame(cmd: Proto | bytes, metadata: bytes, payload: bytes) -> bytes:
    """A payload frame: ``cmd`` (a ``BaseCommand`` value, or its bytes), then ``metadata``
    (encoded ``MessageMetadata``) and ``payload``, checksummed with CRC32C."""
    body = cmd if isinstance(cmd, bytes) else encode(commands.BaseCommand, cmd)
    tail = _U32.pack(len(metadata)) + metadata + payload
    checksum = crc32c(tail)
    total = 4 + len(body) + 2 + 4 + len(tail)
    return b"".join(
        (
            _U32.pack(total),
            _U32.pack(len(body)),
            body,
            _U16.pack(MAGIC_CRC32C),
            _U32.pack(checksum),
            tail,
        )
    )


def decode_frame(frame: bytes | memoryview) -> Frame:
    """One whole frame's content (what follows ``total_size``)."""
    data = memoryview(frame)
    if len(data) < 4:
        raise FrameError("frame shorter than its command size")
    (command_size,) = _U32.unpack_from(data, 0)
    if command_size > len(data) - 4:
        raise FrameError(f"command size {command_size} exceeds the frame ({len(data)} bytes)")
    try:
        cmd = decode(commands.BaseCommand, data[4 : 4 + command_size])
    except ProtoError as exc:
        raise FrameError(f"malformed command: {exc}") from exc
    kind = cmd.get("type")
    if kind is None or not commands.known(kind):
        raise FrameError(f"unknown command type {kind}")
    rest = data[4 + command_size :]
    if not len(rest):
        return Frame(cmd)
    if len(rest) >= 2 and _U16.unpack_from(rest, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        raise FrameError("broker entry metadata from a client")
    if len(rest) >= 2 and _U16.unpack_from(rest, 0)[0] == MAGIC_CRC32C:
        if len(rest) < 6:
            raise FrameError("payload frame cut short before its checksum")
        (expected,) = _U32.unpack_from(rest, 2)
        rest = rest[6:]
        actual = crc32c(rest)
        if actual != expected:
            raise FrameError(f"checksum mismatch: frame says {expected:#010x}, data {actual:#010x}")
    if len(rest) < 4:
        raise FrameError("payload frame cut short before its metadata size")
    (metadata_size,) = _U32.unpack_from(rest, 0)
    if metadata_size > len(rest) - 4:
        raise FrameError(f"metadata size {metadata_size} exceeds the frame")
    raw = bytes(rest[4 : 4 + metadata_size])
    try:
        metadata = decode(commands.MessageMetadata, raw)
    except ProtoError as exc:
        raise FrameError(f"malformed message metadata: {exc}") from exc
    return Frame(cmd, metadata, bytes(rest[4 + metadata_size :]), raw)


class FrameDecoder:
    """Accumulates socket bytes and yields whole frames, in order."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that are not a whole frame yet (a frame cut short, at close)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        buffer = self._buffer
        start = 0
        while len(buffer) - start >= 4:
            (total,) = _U32.unpack_from(buffer, start)
            if total > self.max_frame_size:
                raise FrameError(f"frame of {total} bytes exceeds {self.max_frame_size}")
            if len(buffer) - start - 4 < total:
                break
            frames.append(decode_frame(bytes(buffer[start + 4 : start + 4 + total])))
            start += 4 + total
        if start:
            del buffer[:start]
        return frames
