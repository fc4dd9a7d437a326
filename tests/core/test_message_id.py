from __future__ import annotations

import base64

import pulsar
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.errors import InvalidInputError, InvalidMessageIdError
from cursorops.core.domain.ids.message_id import MessageId, decode_base64, parse_position
from cursorops.core.domain.ids.position import Position

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

ledger_or_entry = st.one_of(st.just(-1), st.integers(0, INT64_MAX))
partitions = st.integers(-1, INT32_MAX)
batch_indexes = st.integers(-1, INT32_MAX)


def varint(value: int) -> bytes:
    value &= 2**64 - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def varint_field(number: int, value: int) -> bytes:
    return key(number, 0) + varint(value)


def length_delimited(number: int, payload: bytes) -> bytes:
    return key(number, 2) + varint(len(payload)) + payload


# id (12345, 4, partition 2, batch index 3) as pulsar-client writes it
BASE = bytes.fromhex("08b960100418022003")


# Known byte strings


def test_known_non_partitioned_non_batched() -> None:
    mid = MessageId(12345, 4)
    assert mid.to_base64() == "CLlgEAQ="
    assert MessageId.from_base64("CLlgEAQ=") == mid


def test_known_partitioned_batched() -> None:
    mid = MessageId(12345, 4, partition=2, batch_index=3)
    assert mid.to_base64() == "CLlgEAQYAiAD"
    assert MessageId.from_base64("CLlgEAQYAiAD") == mid
    assert mid.to_bytes() == BASE


def test_known_strings_match_pulsar_client() -> None:
    assert base64.b64encode(pulsar.MessageId(-1, 12345, 4, -1).serialize()) == b"CLlgEAQ="
    assert base64.b64encode(pulsar.MessageId(2, 12345, 4, 3).serialize()) == b"CLlgEAQYAiAD"


def test_java_batch_size_zero_form() -> None:
    mid = MessageId.from_base64("CLlgEAQwAA==")
    assert mid == MessageId(12345, 4)
    assert (mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index, mid.batch_size) == (
        12345,
        4,
        -1,
        -1,
        0,
    )
    # pulsar-client reads it the same way and writes it back without batch_size
    theirs = pulsar.MessageId.deserialize(base64.b64decode("CLlgEAQwAA=="))
    assert theirs.serialize() == mid.to_bytes() == base64.b64decode("CLlgEAQ=")


def test_minus_one_ledger_and_entry_are_ten_byte_varints() -> None:
    data = MessageId(-1, -1).to_bytes()
    assert data == bytes.fromhex("08ffffffffffffffffff01") + bytes.fromhex("10ffffffffffffffffff01")
    assert MessageId.from_bytes(data) == MessageId(-1, -1)


def test_negative_int32_is_ten_byte_varint_truncated_on_read() -> None:
    data = MessageId(1, 1, partition=-5, batch_index=-7).to_bytes()
    assert data == pulsar.MessageId(-5, 1, 1, -7).serialize()
    assert data == bytes.fromhex("08011001") + bytes.fromhex(
        "18fbffffffffffffffff0120f9ffffffffffffffff01"
    )
    assert MessageId.from_bytes(data) == MessageId(1, 1, -5, -7)


def test_int32_extremes_match_pulsar_client() -> None:
    for partition, batch_index in [(-(2**31), -(2**31)), (INT32_MAX, INT32_MAX), (0, 0)]:
        mid = MessageId(7, 8, partition, batch_index)
        assert mid.to_bytes() == pulsar.MessageId(partition, 7, 8, batch_index).serialize()
        assert MessageId.from_bytes(mid.to_bytes()) == mid


def test_int64_min_matches_pulsar_client() -> None:
    mid = MessageId(-(2**63), 0)
    assert mid.to_bytes() == pulsar.MessageId(-1, -(2**63), 0, -1).serialize()
    assert MessageId.from_bytes(mid.to_bytes()) == mid


# Interop with pulsar-client, both directions


@given(ledger_or_entry, ledger_or_entry, partitions, batch_indexes)
def test_to_bytes_matches_pulsar_client(
    ledger_id: int, entry_id: int, partition: int, batch_index: int
) -> None:
    ours = MessageId(ledger_id, entry_id, partition, batch_index)
    assert (
        ours.to_bytes() == pulsar.MessageId(partition, ledger_id, entry_id, batch_index).serialize()
    )


@given(ledger_or_entry, ledger_or_entry, partitions, batch_indexes)
def test_pulsar_client_reads_our_bytes(
    ledger_id: int, entry_id: int, partition: int, batch_index: int
) -> None:
    theirs = pulsar.MessageId.deserialize(
        MessageId(ledger_id, entry_id, partition, batch_index).to_bytes()
    )
    assert (
        theirs.ledger_id(),
        theirs.entry_id(),
        theirs.partition(),
        theirs.batch_index(),
    ) == (ledger_id, entry_id, partition, batch_index)


@given(ledger_or_entry, ledger_or_entry, partitions, batch_indexes)
def test_we_read_pulsar_client_bytes(
    ledger_id: int, entry_id: int, partition: int, batch_index: int
) -> None:
    their_bytes = pulsar.MessageId(partition, ledger_id, entry_id, batch_index).serialize()
    ours = MessageId.from_bytes(their_bytes)
    assert ours == MessageId(ledger_id, entry_id, partition, batch_index)
    assert ours.batch_size == 0
    assert MessageId.from_base64(base64.b64encode(their_bytes).decode()) == ours


@given(
    ledger_or_entry, ledger_or_entry, partitions, batch_indexes, st.integers(-(2**31), INT32_MAX)
)
def test_batch_size_round_trips_through_pulsar_client(
    ledger_id: int, entry_id: int, partition: int, batch_index: int, batch_size: int
) -> None:
    ours = MessageId(ledger_id, entry_id, partition, batch_index, batch_size)
    # the constructor does not take batch_size; deserialize keeps it and serialize writes it
    theirs = pulsar.MessageId.deserialize(ours.to_bytes())
    assert theirs.serialize() == ours.to_bytes()
    assert MessageId.from_bytes(theirs.serialize()).batch_size == batch_size


def test_batch_size_zero_is_not_written() -> None:
    assert MessageId(1, 2, batch_size=0).to_bytes() == bytes.fromhex("08011002")
    assert MessageId(1, 2, batch_size=5).to_bytes() == bytes.fromhex("080110023005")


def test_batch_size_is_informational_for_equality() -> None:
    assert MessageId(1, 2, 0, 3, batch_size=10) == MessageId(1, 2, 0, 3)
    assert hash(MessageId(1, 2, 0, 3, batch_size=10)) == hash(MessageId(1, 2, 0, 3))
    assert MessageId(1, 2, 0, 3, batch_size=10).batch_size == 10


# Optional, nested and unknown fields


def test_ack_set_packed_is_skipped() -> None:
    data = BASE + length_delimited(5, varint(7) + varint(-1) + varint(2**40))
    assert MessageId.from_bytes(data) == MessageId(12345, 4, 2, 3)
    assert pulsar.MessageId.deserialize(data).serialize() == BASE


def test_ack_set_unpacked_is_skipped() -> None:
    data = BASE + varint_field(5, 7) + varint_field(5, -1)
    assert MessageId.from_bytes(data) == MessageId(12345, 4, 2, 3)
    assert pulsar.MessageId.deserialize(data).serialize() == BASE


def test_ack_set_empty_packed_is_skipped() -> None:
    assert MessageId.from_bytes(BASE + length_delimited(5, b"")) == MessageId(12345, 4, 2, 3)


def test_ack_set_with_batch_size() -> None:
    mid = MessageId.from_bytes(BASE + varint_field(5, 7) + varint_field(6, 5))
    assert mid == MessageId(12345, 4, 2, 3)
    assert mid.batch_size == 5


def test_first_chunk_message_id_is_skipped() -> None:
    nested = varint_field(1, 7) + varint_field(2, 1) + varint_field(3, -1)
    data = bytes.fromhex("08b96010041802") + length_delimited(7, nested)
    assert MessageId.from_bytes(data) == MessageId(12345, 4, 2)


def test_pulsar_client_chunk_id_bytes() -> None:
    # pulsar-client turns an id with a first chunk into a chunk id; its bytes must still load
    with_chunk = BASE + length_delimited(7, varint_field(1, 7) + varint_field(2, 1))
    their_bytes = pulsar.MessageId.deserialize(with_chunk).serialize()
    assert MessageId.from_bytes(their_bytes) == MessageId(12345, 4, 2)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(varint_field(9, 5), id="varint"),
        pytest.param(varint_field(9, -1), id="varint-ten-bytes"),
        pytest.param(key(10, 1) + bytes(8), id="fixed64"),
        pytest.param(length_delimited(8, b"persistent://public/default/t"), id="topic_name"),
        pytest.param(length_delimited(11, b""), id="empty-length-delimited"),
        pytest.param(key(12, 5) + bytes(4), id="fixed32"),
        pytest.param(varint_field(1000, 1), id="large-field-number"),
    ],
)
def test_unknown_fields_are_skipped(extra: bytes) -> None:
    assert MessageId.from_bytes(BASE + extra) == MessageId(12345, 4, 2, 3)
    assert MessageId.from_bytes(extra + BASE) == MessageId(12345, 4, 2, 3)


def test_fields_in_any_order() -> None:
    data = varint_field(4, 3) + varint_field(3, 2) + varint_field(2, 4) + varint_field(1, 12345)
    assert MessageId.from_bytes(data) == MessageId(12345, 4, 2, 3)


def test_repeated_field_last_value_wins() -> None:
    data = varint_field(1, 1) + varint_field(2, 5) + varint_field(1, 2)
    assert MessageId.from_bytes(data) == MessageId(2, 5)
    theirs = pulsar.MessageId.deserialize(data)
    assert (theirs.ledger_id(), theirs.entry_id()) == (2, 5)


def test_int32_fields_longer_than_32_bits_are_truncated() -> None:
    data = varint_field(1, 1) + varint_field(2, 1) + varint_field(3, 2**32 + 3)
    assert MessageId.from_bytes(data).partition == 3
    assert pulsar.MessageId.deserialize(data).partition() == 3


def test_uint64_at_or_above_two_to_the_63_reads_as_signed() -> None:
    data = varint_field(1, 2**63) + varint_field(2, 2**64 - 2)
    assert MessageId.from_bytes(data) == MessageId(-(2**63), -2)


def test_from_bytes_accepts_bytearray_and_memoryview() -> None:
    assert MessageId.from_bytes(bytearray(BASE)) == MessageId(12345, 4, 2, 3)
    assert MessageId.from_bytes(memoryview(BASE)) == MessageId(12345, 4, 2, 3)


# Malformed bytes


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"", "missing required field 1 (ledgerId)", id="empty"),
        pytest.param(varint_field(2, 4), "missing required field 1 (ledgerId)", id="no-ledger"),
        pytest.param(varint_field(1, 4), "missing required field 2 (entryId)", id="no-entry"),
        pytest.param(bytes.fromhex("08b9"), "truncated varint", id="truncated-value"),
        pytest.param(bytes.fromhex("08b96010"), "truncated varint", id="truncated-second-value"),
        pytest.param(BASE + b"\x80", "truncated varint", id="truncated-key"),
        pytest.param(
            bytes.fromhex("08") + b"\xff" * 10 + b"\x01", "varint longer than 10", id="long-varint"
        ),
        pytest.param(key(1, 2) + b"\x01\x01" + varint_field(2, 1), "wire type 2", id="ledger-ld"),
        pytest.param(BASE + key(3, 5) + bytes(4), "field 3 has wire type 5", id="partition-i32"),
        pytest.param(BASE + key(6, 1) + bytes(8), "field 6 has wire type 1", id="batch-size-i64"),
        pytest.param(BASE + key(7, 0) + b"\x01", "field 7 has wire type 0", id="chunk-varint"),
        pytest.param(BASE + key(5, 5) + bytes(4), "ack_set", id="ack-set-fixed32"),
        pytest.param(BASE + key(5, 2) + b"\x01\x80", "truncated varint", id="ack-set-bad-pack"),
        pytest.param(BASE + key(9, 2) + b"\x05ab", "runs past the end", id="short-ld"),
        pytest.param(BASE + key(7, 2) + b"\x09\x08", "runs past the end", id="short-chunk"),
        pytest.param(BASE + key(10, 1) + bytes(7), "truncated 64-bit", id="short-fixed64"),
        pytest.param(BASE + key(12, 5) + bytes(3), "truncated 32-bit", id="short-fixed32"),
        pytest.param(BASE + key(13, 3), "unsupported wire type 3", id="group"),
        pytest.param(BASE + key(13, 7), "unsupported wire type 7", id="wire-7"),
        pytest.param(b"\x00\x00", "field number 0", id="field-zero"),
    ],
)
def test_malformed_bytes(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidMessageIdError, match="Invalid MessageIdData") as info:
        MessageId.from_bytes(data)
    assert reason in str(info.value)
    assert (data.hex() or "empty") in str(info.value)


def test_every_prefix_of_valid_bytes_is_an_error_or_a_field_prefix() -> None:
    full = MessageId(2**62, 2**61, 5, 9, 12)
    data = full.to_bytes()
    loaded = []
    for end in range(len(data)):
        try:
            mid = MessageId.from_bytes(data[:end])
        except InvalidMessageIdError:
            continue
        assert mid.position == full.position
        loaded.append((mid.partition, mid.batch_index, mid.batch_size))
    # the only loadable prefixes end on a field boundary after entryId
    assert loaded == [(-1, -1, 0), (5, -1, 0), (5, 9, 0)]


def test_from_bytes_rejects_non_bytes() -> None:
    with pytest.raises(InvalidMessageIdError, match="expected bytes, got str"):
        MessageId.from_bytes("CLlgEAQ=")  # type: ignore[arg-type]


def test_long_input_is_cut_in_the_message() -> None:
    data = BASE + length_delimited(9, bytes(200)) + b"\x80"
    with pytest.raises(InvalidMessageIdError, match=r"\.\.\., 213 bytes\)"):
        MessageId.from_bytes(data)


# Base64


def test_base64_without_padding_is_accepted() -> None:
    assert MessageId.from_base64("CLlgEAQ") == MessageId(12345, 4)
    assert MessageId.from_base64("CLlgEAQwAA") == MessageId(12345, 4)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param("not base64!", "not base64", id="punctuation"),
        pytest.param(" CLlgEAQ=", "not base64", id="leading-space"),
        pytest.param("CLlgEAQ= ", "not base64", id="trailing-space"),
        pytest.param("CLlg EAQ=", "not base64", id="inner-space"),
        pytest.param("CLlgEAQ=\n", "not base64", id="newline"),
        pytest.param("CLlgE", "not base64", id="bad-length"),
        pytest.param("CLlg=EAQ", "not base64", id="padding-inside"),
        pytest.param("CLlgEAQ-", "not base64", id="url-safe-alphabet"),
        pytest.param("CLk=", "truncated varint", id="truncated"),
        pytest.param("CLlg", "missing required field 2 (entryId)", id="no-entry"),
        pytest.param("AAAA", "field number 0", id="zeros"),
    ],
)
def test_bad_base64(text: str, reason: str) -> None:
    with pytest.raises(InvalidMessageIdError) as info:
        MessageId.from_base64(text)
    message = str(info.value)
    assert message.startswith(f"Invalid --messageId-base64: {text}: ")
    assert reason in message


def test_from_base64_rejects_non_str() -> None:
    with pytest.raises(InvalidMessageIdError, match="Invalid --messageId-base64: b'CLlgEAQ='"):
        MessageId.from_base64(b"CLlgEAQ=")  # type: ignore[arg-type]


@given(ledger_or_entry, ledger_or_entry, partitions, batch_indexes, st.integers(0, INT32_MAX))
def test_base64_round_trip(
    ledger_id: int, entry_id: int, partition: int, batch_index: int, batch_size: int
) -> None:
    mid = MessageId(ledger_id, entry_id, partition, batch_index, batch_size)
    back = MessageId.from_base64(mid.to_base64())
    assert back == mid
    assert back.batch_size == batch_size


# Triplets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12345:4", MessageId(12345, 4)),
        ("12345:4:3", MessageId(12345, 4, batch_index=3)),
        ("0:0", MessageId(0, 0)),
        ("0:0:0", MessageId(0, 0, batch_index=0)),
        ("007:08:09", MessageId(7, 8, batch_index=9)),
        (f"{INT64_MAX}:{INT64_MAX}:{INT32_MAX}", MessageId(INT64_MAX, INT64_MAX, -1, INT32_MAX)),
    ],
)
def test_parse_triplet(text: str, expected: MessageId) -> None:
    assert MessageId.parse_triplet(text) == expected


def test_parse_triplet_with_partition() -> None:
    assert MessageId.parse_triplet("1:2:3", partition=4) == MessageId(1, 2, 4, 3)
    assert MessageId.parse_triplet("1:2", partition=0) == MessageId(1, 2, 0)


@pytest.mark.parametrize("partition", [-2, 2**31, True, "1"])
def test_parse_triplet_bad_partition(partition: object) -> None:
    expected = r"Invalid --messageId-triplet: '1:2': partition"
    with pytest.raises(InvalidMessageIdError, match=expected):
        MessageId.parse_triplet("1:2", partition=partition)  # type: ignore[arg-type]


@given(st.integers(0, INT64_MAX), st.integers(0, INT64_MAX), batch_indexes)
def test_triplet_round_trip(ledger_id: int, entry_id: int, batch_index: int) -> None:
    mid = MessageId(ledger_id, entry_id, batch_index=batch_index)
    text = mid.triplet()
    assert text.count(":") == (2 if batch_index >= 0 else 1)
    assert MessageId.parse_triplet(text) == mid
    assert MessageId.parse_triplet(text).triplet() == text


def test_triplet_leaves_out_partition_and_whole_entry_batch_index() -> None:
    assert MessageId(1, 2, 3, -1).triplet() == "1:2"
    assert MessageId(1, 2, 3, 0).triplet() == "1:2:0"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("12345", id="one-part"),
        pytest.param("1:2:3:4", id="four-parts"),
        pytest.param("1:2:", id="trailing-colon"),
        pytest.param(":1:2", id="leading-colon"),
        pytest.param("1::2", id="empty-part"),
        pytest.param(":", id="only-colon"),
        pytest.param("a:2", id="letters-ledger"),
        pytest.param("1:b", id="letters-entry"),
        pytest.param("1:2:c", id="letters-batch"),
        pytest.param("1.0:2", id="decimal"),
        pytest.param("0x10:2", id="hex"),
        pytest.param("1e3:2", id="exponent"),
        pytest.param("1_000:2", id="underscore"),
        pytest.param("-1:2", id="negative-ledger"),
        pytest.param("1:-2", id="negative-entry"),
        pytest.param("1:2:-1", id="negative-batch"),
        pytest.param("+1:2", id="plus-sign"),
        pytest.param(" 1:2", id="leading-space"),
        pytest.param("1:2 ", id="trailing-space"),
        pytest.param("1 :2", id="inner-space"),
        pytest.param("1:2\n", id="trailing-newline"),
        pytest.param("1,2", id="comma"),
        pytest.param("\u0661:\u0662", id="arabic-indic-digits"),
        pytest.param("\uff11:\uff12", id="fullwidth-digits"),
        pytest.param(f"{2**63}:1", id="ledger-beyond-int64"),
        pytest.param(f"1:{2**63}", id="entry-beyond-int64"),
        pytest.param(f"1:2:{2**31}", id="batch-beyond-int32"),
        pytest.param("9" * 40 + ":1", id="huge"),
    ],
)
def test_bad_triplet(text: str) -> None:
    with pytest.raises(InvalidMessageIdError) as info:
        MessageId.parse_triplet(text)
    assert str(info.value).startswith(f"Invalid --messageId-triplet: {text!r}: ")
    assert "\n" not in str(info.value)


def test_parse_triplet_rejects_non_str() -> None:
    with pytest.raises(InvalidMessageIdError, match="Invalid --messageId-triplet: 12"):
        MessageId.parse_triplet(12)  # type: ignore[arg-type]


def test_invalid_message_id_error_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError):
        MessageId.parse_triplet("x")


# The value object


def test_position() -> None:
    assert MessageId(3, 9, 1, 2).position == Position(3, 9)


def test_str_is_the_java_to_string() -> None:
    assert str(MessageId(12345, 4)) == "12345:4:-1"
    assert str(MessageId(12345, 4, 2)) == "12345:4:2"
    assert str(MessageId(12345, 4, 2, 3)) == "12345:4:2:3"
    assert str(MessageId(12345, 4, -1, 0)) == "12345:4:-1:0"


def test_is_frozen_and_hashable() -> None:
    mid = MessageId(1, 2)
    with pytest.raises(AttributeError):
        mid.ledger_id = 5  # type: ignore[misc]
    assert {MessageId(1, 2), MessageId(1, 2), MessageId(1, 2, 0)} == {
        MessageId(1, 2),
        MessageId(1, 2, 0),
    }


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"ledger_id": 2**63, "entry_id": 0}, "ledger_id"),
        ({"ledger_id": 0, "entry_id": -(2**63) - 1}, "entry_id"),
        ({"ledger_id": 0, "entry_id": 0, "partition": 2**31}, "partition"),
        ({"ledger_id": 0, "entry_id": 0, "batch_index": -(2**31) - 1}, "batch_index"),
        ({"ledger_id": 0, "entry_id": 0, "batch_size": 2**31}, "batch_size"),
        ({"ledger_id": "1", "entry_id": 0}, "ledger_id"),
        ({"ledger_id": 1, "entry_id": 1.0}, "entry_id"),
        ({"ledger_id": 1, "entry_id": 1, "partition": True}, "partition"),
    ],
)
def test_constructor_checks_ranges_and_types(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidMessageIdError, match=f"Invalid message id: {name}"):
        MessageId(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "1",
        "1:2:3",
        "-1:2",
        "1:-2",
        "+1:2",
        "1 :2",
        "\u0661:\u0662",
        "\uff11:\uff12",
        "\u00b2:1",
        f"{2**63}:1",
        f"1:{2**63}",
        "9" * 5000 + ":1",
        "1:2\n3",
        "",
    ],
)
def test_parse_position_refuses_all_but_ascii_int64_pairs(text: str) -> None:
    with pytest.raises(InvalidMessageIdError, match="Invalid --messageId") as info:
        parse_position(text, "--messageId")
    assert "\n" not in str(info.value)


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
def test_parse_position_reads_every_int64_pair(ledger_id: int, entry_id: int) -> None:
    assert parse_position(f"{ledger_id}:{entry_id}", "-m") == Position(ledger_id, entry_id)


@given(ledger_or_entry, ledger_or_entry, partitions, batch_indexes)
def test_unpadded_base64_reads_as_padded(
    ledger_id: int, entry_id: int, partition: int, batch_index: int
) -> None:
    mid = MessageId(ledger_id, entry_id, partition, batch_index)
    padded = mid.to_base64()
    assert decode_base64(padded.rstrip("=")) == decode_base64(padded) == mid.to_bytes()
    assert MessageId.from_base64(padded.rstrip("=")) == mid
