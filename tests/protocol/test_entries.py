"""Entries between Pulsar's message format and the ledger's columns."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cramjam
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.acks.ack_set import from_words, unacked_indexes
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry, OutgoingMessage
from cursorops.wire import commands
from cursorops.wire.commands import CompressionType
from cursorops.wire.entries import (
    EntryError,
    OutgoingEntry,
    batch_metadata,
    decompress,
    entry_of_send,
    entry_payload,
    message_command,
    send_receipt_command,
    single_metadata,
    uniform_batch_payload,
)
from cursorops.wire.proto import decode, encode

TOPIC = "persistent://public/default/t"


def _list(values: object) -> list[object]:
    """An entry column as a list (a batch read as a whole holds arrays)."""
    if isinstance(values, pa.Array):
        return values.to_pylist()
    if isinstance(values, np.ndarray):
        return values.tolist()
    assert isinstance(values, list)
    return values


def _batch(messages: list[tuple[bytes, str | None]]) -> bytes:
    parts = []
    for payload, key in messages:
        body = encode(
            commands.SingleMessageMetadata, {"payload_size": len(payload), "partition_key": key}
        )
        parts += [struct.pack(">I", len(body)), body, payload]
    return b"".join(parts)


@given(st.lists(st.tuples(st.binary(max_size=50), st.none() | st.text(max_size=5)), min_size=1))
def test_a_sent_batch_becomes_its_messages(messages: list[tuple[bytes, str | None]]) -> None:
    meta = {
        "producer_name": "p",
        "sequence_id": 7,
        "publish_time": 1,
        "num_messages_in_batch": len(messages),
    }
    entry = entry_of_send(meta, _batch(messages))
    assert entry.batched
    assert list(zip(_list(entry.payloads), entry.keys, strict=True)) == messages
    assert _list(entry.sequence_ids) == list(range(7, 7 + len(messages)))
    assert entry.event_times == entry.ordering_keys == [None] * len(messages)


_SINGLE = st.fixed_dictionaries(
    {"payload_size": st.just(0)},
    optional={
        "properties": st.lists(
            st.fixed_dictionaries({"key": st.text(max_size=4), "value": st.text(max_size=4)}),
            max_size=2,
        ),
        "partition_key": st.text(max_size=140),
        "event_time": st.integers(0, 2**63 - 1),
        "ordering_key": st.binary(max_size=140),
        "sequence_id": st.integers(0, 2**63 - 1),
        "null_partition_key": st.booleans(),
        "compacted_out": st.booleans(),
    },
)


@given(st.lists(st.tuples(_SINGLE, st.binary(max_size=20)), min_size=1, max_size=5))
def test_every_single_message_metadata_reads_as_the_general_decoder_reads_it(
    messages: list[tuple[dict[str, object], bytes]],
) -> None:
    parts = []
    for single, payload in messages:
        body = encode(commands.SingleMessageMetadata, {**single, "payload_size": len(payload)})
        parts += [struct.pack(">I", len(body)), body, payload]
    meta = {"producer_name": "p", "sequence_id": 3, "publish_time": 1}
    entry = entry_of_send({**meta, "num_messages_in_batch": len(messages)}, b"".join(parts))
    for i, (single, payload) in enumerate(messages):
        assert _list(entry.payloads)[i] == payload
        assert _list(entry.sequence_ids)[i] == single.get("sequence_id", 3 + i)
        key = None if single.get("null_partition_key") else single.get("partition_key")
        assert entry.keys[i] == key
        assert entry.event_times[i] == (single.get("event_time") or None)
        assert entry.ordering_keys[i] == single.get("ordering_key")
        pairs = single.get("properties") or []
        assert isinstance(pairs, list)
        assert list(entry.properties[i]) == [(kv["key"], kv["value"]) for kv in pairs]


@given(
    st.lists(
        st.tuples(st.none() | st.integers(1, 2**63 - 1), st.none() | st.binary(max_size=200)),
        min_size=1,
        max_size=10,
    )
)
def test_event_time_and_ordering_key_go_out_as_they_came_in(
    messages: list[tuple[int | None, bytes | None]],
) -> None:
    n = len(messages)
    meta_bytes, payload, _ = entry_payload(
        OutgoingEntry(
            n,
            "p",
            1,
            None,
            list(range(n)),
            [b"x"] * n,
            [None] * n,
            [()] * n,
            list(range(n)),
            [event_time for event_time, _ in messages],
            [ordering_key for _, ordering_key in messages],
        )
    )
    entry = entry_of_send(decode(commands.MessageMetadata, meta_bytes), payload)
    assert entry.event_times == [event_time for event_time, _ in messages]
    assert entry.ordering_keys == [ordering_key for _, ordering_key in messages]


@given(st.lists(st.integers(0, 9), unique=True, min_size=1, max_size=10))
def test_a_partly_delivered_batch_keeps_its_indexes(delivered: list[int]) -> None:
    indexes = sorted(delivered)
    meta_bytes, payload, ack_set = entry_payload(
        OutgoingEntry(
            10,
            "p",
            1,
            None,
            indexes,
            [f"m{i}".encode() for i in indexes],
            [None] * len(indexes),
            [()] * len(indexes),
            indexes,
        )
    )
    meta = decode(commands.MessageMetadata, meta_bytes)
    assert meta["num_messages_in_batch"] == 10
    entry = entry_of_send(meta, payload)
    got = {i: payload for i, payload in enumerate(_list(entry.payloads)) if payload}
    assert got == {i: f"m{i}".encode() for i in delivered}
    if len(delivered) == 10:
        assert ack_set is None
    else:
        assert ack_set is not None
        assert unacked_indexes(from_words(ack_set)) == sorted(delivered)


@pytest.mark.parametrize(
    ("codec", "compress"),
    [
        (CompressionType.LZ4, lambda d: bytes(cramjam.lz4.compress_block(d, store_size=False))),
        (CompressionType.ZLIB, zlib.compress),
        (CompressionType.ZSTD, lambda d: bytes(cramjam.zstd.compress(d))),
        (CompressionType.SNAPPY, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    ],
)
def test_codecs(codec: CompressionType, compress: object) -> None:
    data = b"abc" * 1000
    assert callable(compress)
    assert decompress(codec, compress(data), len(data)) == data
    with pytest.raises(EntryError):
        decompress(codec, b"\xff" * 10, len(data))


def test_unreadable_sends_are_refused_before_the_group_commit() -> None:
    base = {"producer_name": "p", "publish_time": 1}
    with pytest.raises(EntryError, match="int64"):
        entry_of_send({**base, "sequence_id": 2**63}, b"x")
    with pytest.raises(EntryError, match="cut short"):
        entry_of_send(
            {**base, "sequence_id": 0, "num_messages_in_batch": 2}, _batch([(b"a", None)])
        )
    with pytest.raises(EntryError, match="decompressed"):
        entry_of_send(
            {**base, "sequence_id": 0, "compression": 2, "uncompressed_size": 5},
            zlib.compress(b"abc"),
        )


def test_append_entries_checks_what_it_is_given(tmp_path: Path) -> None:
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "public")
        broker.admin.create_namespace("admin", "public/default")
        broker.admin.create_topic("admin", TOPIC)
        good = Entry.of_messages(
            [OutgoingMessage(b"a", "k", {"p": "v"}, None, 3)], False, "prod", 5, [9], [b"o"]
        )
        one = [OutgoingMessage(b"a", sequence_id=1)]
        for bad in (
            Entry.of_messages([], True, "p", 1),
            Entry.of_messages(one * 2, False, "p", 1),
            Entry.of_messages([OutgoingMessage(b"a", sequence_id=-1)], False, "p", 1),
            Entry.of_messages(one, False, "p", -5),
            Entry.of_messages([OutgoingMessage(b"a")], False, "p", 1),
            Entry.of_messages(one, False, "p", 1, [-1]),
            Entry.of_messages(one, False, "p", 1, [1, 2]),
        ):
            with pytest.raises(InvalidArgumentError):
                broker.producing.append_entries("admin", TOPIC, [good, bad])
        assert broker.analysis.entry_count("admin", TOPIC) == 0
        (position,) = broker.producing.append_entries("admin", TOPIC, [good])
        broker.admin.create_subscription("admin", TOPIC, "s", initial_position="earliest")
        (message,) = broker.reading.peek_messages("admin", TOPIC, "s", 10)
        assert message.message_id.position == position
        assert (message.key, message.properties, message.producer_name) == ("k", {"p": "v"}, "prod")
        assert (message.sequence_id, message.publish_time) == (3, 5)
        assert (message.event_time, message.ordering_key) == (9, b"o")


@given(
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.none() | st.text(max_size=5),
    st.lists(st.tuples(st.text(max_size=4), st.text(max_size=4)), max_size=3),
)
def test_single_metadata_is_what_the_codec_writes(
    size: int, sequence_id: int, key: str | None, properties: list[tuple[str, str]]
) -> None:
    expected = encode(
        commands.SingleMessageMetadata,
        {
            "properties": [{"key": k, "value": v} for k, v in properties],
            "partition_key": key,
            "payload_size": size,
            "sequence_id": sequence_id,
        },
    )
    assert single_metadata(size, sequence_id, key, properties) == expected


@given(
    st.integers(2, 40),
    st.integers(0, 300),
    st.integers(0, 2**63 - 1 - 40),
    st.integers(0, 3),
)
def test_a_uniform_batch_reads_as_one_message_at_a_time(
    count: int, length: int, first: int, odd: int
) -> None:
    """The whole-batch read of plain messages of one size gives what the per-message
    read gives; a batch that breaks the shape anywhere is read message by message."""
    messages = [(bytes([i % 256]) * length, first + i) for i in range(count)]
    if odd == 1:
        messages[-1] = (messages[-1][0] + b"!", messages[-1][1])  # one size differs
    elif odd == 2:
        messages[count // 2] = (messages[count // 2][0], first)  # sequence ids not consecutive
    parts = []
    for payload, sequence in messages:
        body = encode(
            commands.SingleMessageMetadata, {"payload_size": len(payload), "sequence_id": sequence}
        )
        parts += [struct.pack(">I", len(body)), body, payload]
    if odd == 3:
        parts.append(b"\x00")  # a byte past the last message
    meta = {
        "producer_name": "p",
        "sequence_id": 0,
        "publish_time": 1,
        "num_messages_in_batch": count,
    }
    entry = entry_of_send(meta, b"".join(parts))
    assert _list(entry.payloads) == [payload for payload, _ in messages]
    assert _list(entry.sequence_ids) == [sequence for _, sequence in messages]
    assert entry.keys == entry.event_times == entry.ordering_keys == [None] * count
    one_width = len(_varint_bytes(first)) == len(_varint_bytes(first + count - 1))
    assert isinstance(entry.payloads, pa.Array) == (odd == 0 and one_width)


UINT63 = st.integers(0, 2**63 - 1)


@given(
    UINT63,
    UINT63,
    UINT63,
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**32 - 1),
    st.none() | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
    st.none() | UINT63,
)
def test_message_commands_are_written_as_the_codec_writes_them(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: list[int] | None,
    epoch: int | None,
) -> None:
    message_id: dict[str, int] = {"ledgerId": ledger_id, "entryId": entry_id}
    if partition >= 0:
        message_id["partition"] = partition
    generic = encode(
        commands.BaseCommand,
        {
            "type": int(commands.CommandType.MESSAGE),
            "message": {
                "consumer_id": consumer_id,
                "message_id": message_id,
                "redelivery_count": redelivery_count,
                "ack_set": ack_set,
                "consumer_epoch": epoch,
            },
        },
    )
    direct = message_command(
        consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set, epoch
    )
    assert direct == generic


@given(st.text(max_size=20), UINT63, UINT63, st.integers(1, 2**31 - 1), st.none() | UINT63)
def test_batch_metadata_is_written_as_the_codec_writes_it(
    producer: str, sequence_id: int, publish_time: int, size: int, deliver_at: int | None
) -> None:
    generic = encode(
        commands.MessageMetadata,
        {
            "producer_name": producer,
            "sequence_id": sequence_id,
            "publish_time": publish_time,
            "num_messages_in_batch": size,
            "deliver_at_time": deliver_at,
        },
    )
    assert batch_metadata(producer, sequence_id, publish_time, size, deliver_at) == generic


@given(st.integers(1, 30), st.integers(0, 200), st.integers(0, 2**63 - 31))
def test_a_uniform_batch_is_written_as_message_by_message(
    count: int, length: int, first: int
) -> None:
    payloads = [bytes([i % 256]) * length for i in range(count)]
    rows = np.frombuffer(b"".join(payloads), np.uint8).reshape(count, length)
    whole = uniform_batch_payload(rows, first)
    _, one_by_one, _ = entry_payload(
        OutgoingEntry(
            count,
            "p",
            1,
            None,
            list(range(count)),
            payloads,
            [None] * count,
            [()] * count,
            list(range(first, first + count)),
        )
    )
    if len(_varint_bytes(first)) == len(_varint_bytes(first + count - 1)):
        assert whole == one_by_one
    else:
        assert whole is None


def _varint_bytes(value: int) -> bytes:
    return single_metadata(0, value)[2:]


@given(UINT63, UINT63, UINT63, UINT63, st.none() | UINT63)
def test_send_receipts_are_written_as_the_codec_writes_them(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest: int | None
) -> None:
    generic = encode(
        commands.BaseCommand,
        {
            "type": int(commands.CommandType.SEND_RECEIPT),
            "send_receipt": {
                "producer_id": producer_id,
                "sequence_id": sequence_id,
                "message_id": {"ledgerId": ledger_id, "entryId": entry_id},
                "highest_sequence_id": highest,
            },
        },
    )
    direct = send_receipt_command(producer_id, sequence_id, ledger_id, entry_id, highest)
    assert direct == generic
