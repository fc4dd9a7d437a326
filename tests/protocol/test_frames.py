"""The frame codec against plain models: round trips, the checksum, cut frames."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.wire import commands
from cursorops.wire.commands import CommandType
from cursorops.wire.frames import (
    MAX_FRAME_SIZE,
    FrameDecoder,
    FrameError,
    command,
    crc32c,
    decode_frame,
    encode_frame,
    encode_payload_frame,
)
from cursorops.wire.proto import ProtoError, decode, encode

uint64 = st.integers(0, 2**64 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(max_size=20)


def crc32c_model(data: bytes) -> int:
    """CRC-32C (Castagnoli), bit by bit: the reflected polynomial 0x82F63B78."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _present(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[object]]) -> dict[str, object]:
    return {name: draw(strategy) for name, strategy in fields.items() if draw(st.booleans())}


@st.composite
def message_ids(draw: st.DrawFn) -> dict[str, object]:
    value = {"ledgerId": draw(uint64), "entryId": draw(uint64)}
    value.update(
        _present(
            draw,
            {
                "partition": int32,
                "batch_index": int32,
                "ack_set": st.lists(int64, min_size=1, max_size=4),
                "batch_size": int32,
            },
        )
    )
    return value


@st.composite
def message_commands(draw: st.DrawFn) -> dict[str, object]:
    body: dict[str, object] = {"consumer_id": draw(uint64), "message_id": draw(message_ids())}
    body.update(
        _present(
            draw,
            {
                "redelivery_count": st.integers(0, 2**32 - 1),
                "ack_set": st.lists(int64, min_size=1, max_size=3),
                "consumer_epoch": uint64,
            },
        )
    )
    return command(CommandType.MESSAGE, **body)


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, object]:
    value: dict[str, object] = {
        "producer_name": draw(text),
        "sequence_id": draw(uint64),
        "publish_time": draw(uint64),
    }
    value.update(
        _present(
            draw,
            {
                "properties": st.lists(
                    st.fixed_dictionaries({"key": text, "value": text}), min_size=1, max_size=3
                ),
                "partition_key": text,
                "num_messages_in_batch": st.integers(1, 1000),
                "deliver_at_time": int64,
                "compression": st.integers(0, 4),
            },
        )
    )
    return value


@given(st.binary(max_size=300))
def test_crc32c_matches_the_model(data: bytes) -> None:
    assert crc32c(data) == crc32c_model(data)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


@given(message_commands())
def test_commands_round_trip(cmd: dict[str, object]) -> None:
    assert decode(commands.BaseCommand, encode(commands.BaseCommand, cmd)) == cmd


@given(message_ids())
def test_message_id_data_matches_core(value: dict[str, object]) -> None:
    """The core's own MessageIdData reader agrees on the ids both understand."""
    from cursorops.core.domain.ids.message_id import MessageId

    data = encode(commands.MessageIdData, value)
    ledger, entry = value["ledgerId"], value["entryId"]
    assert isinstance(ledger, int) and isinstance(entry, int)
    if ledger >= 2**63 or entry >= 2**63:
        return
    try:
        parsed = MessageId.from_bytes(data)
    except Exception:
        return  # the core refuses ids the protocol may carry (negative batch sizes...)
    assert (parsed.ledger_id, parsed.entry_id) == (ledger, entry)


@settings(max_examples=60)
@given(message_commands(), metadata(), st.binary(max_size=500), st.data())
def test_payload_frames_round_trip_in_any_chunks(
    cmd: dict[str, object], meta: dict[str, object], payload: bytes, data: st.DataObject
) -> None:
    frame = encode_payload_frame(cmd, encode(commands.MessageMetadata, meta), payload)
    decoder = FrameDecoder()
    got = []
    pos = 0
    while pos < len(frame):
        step = data.draw(st.integers(1, max(1, len(frame) - pos)))
        got += decoder.feed(frame[pos : pos + step])
        pos += step
    assert decoder.pending == 0
    (only,) = got
    assert only.command == cmd
    assert only.metadata == meta
    assert only.payload == payload


@given(message_commands(), metadata(), st.binary(min_size=1, max_size=200), st.data())
def test_any_changed_byte_after_the_checksum_is_caught(
    cmd: dict[str, object], meta: dict[str, object], payload: bytes, data: st.DataObject
) -> None:
    frame = bytearray(encode_payload_frame(cmd, encode(commands.MessageMetadata, meta), payload))
    (command_size,) = struct.unpack_from(">I", frame, 4)
    checked_from = 8 + command_size + 6
    at = data.draw(st.integers(checked_from, len(frame) - 1))
    frame[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(FrameError):
        FrameDecoder().feed(bytes(frame))


@given(message_commands(), metadata(), st.binary(max_size=200), st.data())
def test_a_cut_frame_yields_nothing(
    cmd: dict[str, object], meta: dict[str, object], payload: bytes, data: st.DataObject
) -> None:
    frame = encode_payload_frame(cmd, encode(commands.MessageMetadata, meta), payload)
    cut = data.draw(st.integers(0, len(frame) - 1))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:cut]) == []
    assert decoder.pending == cut


def test_simple_frames_and_their_sizes() -> None:
    frame = encode_frame(command(CommandType.PING))
    (total, size) = struct.unpack_from(">II", frame)
    assert total == len(frame) - 4 and size == len(frame) - 8
    assert decode_frame(frame[4:]).type is CommandType.PING


def test_oversized_unknown_and_malformed_frames() -> None:
    with pytest.raises(FrameError, match="exceeds"):
        FrameDecoder().feed(struct.pack(">I", MAX_FRAME_SIZE + 1))
    unknown = encode(commands.BaseCommand, {"type": 99})
    with pytest.raises(FrameError, match="unknown command"):
        FrameDecoder().feed(struct.pack(">II", len(unknown) + 4, len(unknown)) + unknown)
    with pytest.raises(FrameError, match="command size"):
        FrameDecoder().feed(struct.pack(">II", 4, 100))
    garbage = b"\xff\xff\xff"
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">II", len(garbage) + 4, len(garbage)) + garbage)


def test_varints_of_negative_int32_take_ten_bytes() -> None:
    data = encode(commands.MessageIdData, {"ledgerId": 1, "entryId": 2, "partition": -1})
    assert len(data) == 2 + 2 + 11
    assert decode(commands.MessageIdData, data)["partition"] == -1
    with pytest.raises(ProtoError):
        decode(commands.MessageIdData, b"\x08" + b"\xff" * 11)
