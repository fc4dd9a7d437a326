"""Message ids: a position plus a partition and a batch index.

A :class:`MessageId` names one message. Its :attr:`~MessageId.position`
``(ledger_id, entry_id)`` names the entry that holds it; ``partition`` says which
partition of a partitioned topic (-1 = the topic is not partitioned) and
``batch_index`` which message inside a batched entry (-1 = the whole entry, or
the entry is not batched).

The external forms a Pulsar user holds, all read by :meth:`MessageId.parse`:

* the triplet ``ledgerId:entryId[:batchIndex]`` (pulsar-admin's
  ``--messageId-triplet``), with ``-1`` as the batch index for "the whole entry";
* base64 of the protobuf ``MessageIdData`` (``--messageId-base64``), the bytes
  ``MessageId.serialize()`` of pulsar-client returns (Java: ``toByteArray()``);
* what the official Python client prints, ``str(msg.message_id())``:
  ``(ledgerId,entryId,partition,batchIndex)`` with ``-1`` for none, e.g.
  ``(1,700,-1,-1)`` (:meth:`MessageId.client_text`); spaces after the commas are
  read too.

The protobuf encoding is written by hand (no protobuf dependency). ``to_bytes``
writes exactly what pulsar-client 3.13.0 (the C++ client under the Python
package) writes: ``ledgerId`` and ``entryId`` always, ``partition`` only when
it is not -1, ``batch_index`` only when it is not -1, ``batch_size`` only when
it is not 0, fields in number order.
"""

from __future__ import annotations

import base64
import binascii
import gc
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cursorops.core.domain.errors import InvalidMessageIdError
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import shown

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MASK = 2**64 - 1
_UINT32_MASK = 2**32 - 1

_MAX_VARINT_BYTES = 10

_WIRE_VARINT = 0
_WIRE_FIXED64 = 1
_WIRE_LENGTH_DELIMITED = 2
_WIRE_FIXED32 = 5

# MessageIdData field numbers (PulsarApi.proto).
_FIELD_LEDGER_ID = 1
_FIELD_ENTRY_ID = 2
_FIELD_PARTITION = 3
_FIELD_BATCH_INDEX = 4
_FIELD_ACK_SET = 5
_FIELD_BATCH_SIZE = 6
_FIELD_FIRST_CHUNK_MESSAGE_ID = 7
_VARINT_FIELDS = frozenset(
    {_FIELD_LEDGER_ID, _FIELD_ENTRY_ID, _FIELD_PARTITION, _FIELD_BATCH_INDEX, _FIELD_BATCH_SIZE}
)

_TRIPLET_PART = re.compile(r"[0-9]+", re.ASCII)
# The Python client's str(MessageId): "(ledger,entry,partition,batch)", ASCII spaces allowed
# around each number; the range and the -1s are checked after.
_CLIENT_FORM = re.compile(
    r"\( *(-1|[0-9]+) *, *(-1|[0-9]+) *, *(-1|[0-9]+) *, *(-1|[0-9]+) *\)", re.ASCII
)
_FORMS = (
    "expected ledgerId:entryId[:batchIndex] (batchIndex -1 = the whole entry), base64 "
    "MessageIdData, or the Python client's (ledgerId,entryId,partition,batchIndex) with -1 "
    "for none, e.g. (1,700,-1,-1)"
)
_MAX_ID_TEXT = 4096
"""Longer text is no message id (a MessageIdData in base64 is at most a few hundred characters)."""
# Longer digit strings are out of range anyway; checked before int() (which has a digit limit).
_INT64_DIGITS = 20
_TRIPLET_FORM = "expected ledgerId:entryId[:batchIndex] of non-negative integers"

_SLOTS = ("ledger_id", "entry_id", "partition", "batch_index", "batch_size")

# Bytes shown in an error message; longer input is cut with an ellipsis.
_ERROR_HEX_BYTES = 64


@dataclass(frozen=True, slots=True)
class MessageId:
    """The id of one message: ``(ledger_id, entry_id)`` + partition + batch index.

    ``ledger_id`` and ``entry_id`` are int64 (Pulsar's ``long``); ``partition``
    and ``batch_index`` are int32. The constructor only checks these ranges,
    because any value the wire can carry must load; the triplet form is stricter.

    ``batch_size`` is informational (protobuf field 6): the number of messages in
    the entry when the writer knew it, 0 when not batched or unknown. It takes
    no part in equality or hashing, as in Pulsar, where two ids naming the same
    message are equal whatever batch size they carry.
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    """Partition index; -1 = the topic is not partitioned."""
    batch_index: int = -1
    """Index of the message inside a batched entry; -1 = the whole entry / not batched.

    Any other negative value loads (the wire carries int32) but names no
    message: skip refuses it as "Invalid batchIndex"."""
    batch_size: int = field(default=0, compare=False)
    """Messages in the entry, informational; 0 = not batched or unknown."""

    def __post_init__(self) -> None:
        _check_range("ledger_id", self.ledger_id, _INT64_MIN, _INT64_MAX)
        _check_range("entry_id", self.entry_id, _INT64_MIN, _INT64_MAX)
        _check_range("partition", self.partition, _INT32_MIN, _INT32_MAX)
        _check_range("batch_index", self.batch_index, _INT32_MIN, _INT32_MAX)
        _check_range("batch_size", self.batch_size, _INT32_MIN, _INT32_MAX)

    @classmethod
    def of_store(
        cls, ledger_id: int, entry_id: int, partition: int, batch_index: int, batch_size: int
    ) -> MessageId:
        """An id built from values the ledger store wrote, without the range checks.

        The read path and the stores build one id per message; the checks are
        for values that come from outside.
        """
        mid = object.__new__(cls)
        object.__setattr__(mid, "ledger_id", ledger_id)
        object.__setattr__(mid, "entry_id", entry_id)
        object.__setattr__(mid, "partition", partition)
        object.__setattr__(mid, "batch_index", batch_index)
        object.__setattr__(mid, "batch_size", batch_size)
        return mid

    @classmethod
    def of_store_many(
        cls,
        ledger_ids: Iterable[int],
        entry_ids: Iterable[int],
        partitions: Iterable[int],
        batch_indexes: Iterable[int],
        batch_sizes: Iterable[int],
    ) -> list[MessageId]:
        """:meth:`of_store` of each tuple of the five iterables (plain ints, equal lengths).

        Fills the slots through their descriptors, skipping the frozen
        ``__setattr__``: about half the cost per id of :meth:`of_store`, for
        callers that build one id per row of a large result.
        """
        new = object.__new__
        slots = [cls.__dict__[name].__set__ for name in _SLOTS]
        set_ledger, set_entry, set_partition, set_index, set_size = slots
        out: list[MessageId] = []
        append = out.append
        # Ids hold only ints, so they form no cycle; without the pause, 100,000s of
        # allocations trigger collections that each scan every live object.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for ledger_id, entry_id, partition, batch_index, batch_size in zip(
                ledger_ids, entry_ids, partitions, batch_indexes, batch_sizes, strict=True
            ):
                mid = new(cls)
                set_ledger(mid, ledger_id)
                set_entry(mid, entry_id)
                set_partition(mid, partition)
                set_index(mid, batch_index)
                set_size(mid, batch_size)
                append(mid)
        finally:
            if collecting:
                gc.enable()
        return out

    @property
    def position(self) -> Position:
        """The entry holding this message."""
        return Position(self.ledger_id, self.entry_id)

    # Triplet: pulsar-admin --messageId-triplet

    @classmethod
    def parse_triplet(cls, text: str, partition: int = -1) -> MessageId:
        """Parse pulsar-admin's ``ledgerId:entryId[:batchIndex]``.

        Every part is a non-negative decimal integer, digits only: no sign, no
        spaces. ``ledgerId`` and ``entryId`` must fit in an int64, ``batchIndex``
        in an int32. Without ``batchIndex`` the id names the whole entry
        (``batch_index`` -1); a negative ``batchIndex`` is refused rather than
        read as "whole entry", so there is one way to say it. The triplet has no
        partition: the caller passes it (-1 = not partitioned).
        """
        if not isinstance(text, str):
            raise InvalidMessageIdError(f"Invalid --messageId-triplet: {text!r}: not a string")
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(_TRIPLET_PART.fullmatch(p) for p in parts):
            raise InvalidMessageIdError(
                f"Invalid --messageId-triplet: {shown(text)}: {_TRIPLET_FORM}"
            )
        if any(len(p) > _INT64_DIGITS for p in parts):
            raise InvalidMessageIdError(
                f"Invalid --messageId-triplet: {shown(text)}: ledgerId and entryId must be at most "
                f"{_INT64_MAX}, batchIndex at most {_INT32_MAX}"
            )
        ledger_id, entry_id = int(parts[0]), int(parts[1])
        batch_index = int(parts[2]) if len(parts) == 3 else -1
        if ledger_id > _INT64_MAX or entry_id > _INT64_MAX:
            raise InvalidMessageIdError(
                f"Invalid --messageId-triplet: {shown(text)}: ledgerId and entryId must be at most "
                f"{_INT64_MAX}"
            )
        if batch_index > _INT32_MAX:
            raise InvalidMessageIdError(
                f"Invalid --messageId-triplet: {shown(text)}: batchIndex must be at most "
                f"{_INT32_MAX}"
            )
        if (
            isinstance(partition, bool)
            or not isinstance(partition, int)
            or not (-1 <= partition <= _INT32_MAX)
        ):
            raise InvalidMessageIdError(
                f"Invalid --messageId-triplet: {shown(text)}: partition {partition!r} must be -1 "
                f"(not partitioned) or a partition index"
            )
        return cls(ledger_id, entry_id, partition, batch_index)

    @classmethod
    def parse(cls, text: object, what: str = "message id") -> MessageId:
        """Any form a Pulsar user holds (the module's list), told apart by its shape.

        ``(...)`` is the Python client's printed form, text with a ``:`` a triplet,
        anything else base64 ``MessageIdData``. ASCII spaces around the whole text
        are dropped; anything else (tabs, newlines, other spaces, non-ASCII digits,
        signs other than a ``-1`` for none, numbers out of int64 / int32) is an
        InvalidMessageIdError naming ``what``, the text and the forms read. The
        partition an id carries is checked against the topic by whoever uses it
        (a skip routes each id by its ledger and refuses a partition that differs).
        """
        if not isinstance(text, str):
            raise InvalidMessageIdError(f"Invalid {what} {text!r}: not a string")
        if len(text) > _MAX_ID_TEXT:
            raise InvalidMessageIdError(f"Invalid {what} {shown(text)}: too long; {_FORMS}")
        trimmed = text.strip(" ")
        if not trimmed:
            raise InvalidMessageIdError(f"Invalid {what} {text!r}: empty; {_FORMS}")
        if trimmed.startswith("("):
            return cls._parse_client_text(trimmed, what)
        if ":" in trimmed:
            return cls._parse_any_triplet(trimmed, what)
        try:
            raw = decode_base64(trimmed)
        except InvalidMessageIdError:
            raise InvalidMessageIdError(f"Invalid {what} {shown(text)}: {_FORMS}") from None
        try:
            return cls._decode(raw)
        except _DecodeError as exc:
            raise InvalidMessageIdError(
                f"Invalid {what} {shown(text)}: base64 of no MessageIdData ({exc}); {_FORMS}"
            ) from None

    @classmethod
    def _parse_any_triplet(cls, text: str, what: str) -> MessageId:
        """``L:E``, ``L:E:B`` or ``L:E:-1`` (the batch index pulsar-admin never writes, but
        Pulsar's own ids print for "not batched")."""
        head, sep, last = text.rpartition(":")
        if sep and last == "-1" and head.count(":") == 1:
            message_id = cls._parse_any_triplet(head, what)
            return cls(message_id.ledger_id, message_id.entry_id)
        parts = text.split(":")
        if len(parts) not in (2, 3) or not all(_TRIPLET_PART.fullmatch(p) for p in parts):
            raise InvalidMessageIdError(f"Invalid {what} {shown(text)}: {_FORMS}")
        try:
            return cls.parse_triplet(text)
        except InvalidMessageIdError:
            raise InvalidMessageIdError(
                f"Invalid {what} {shown(text)}: ledgerId and entryId must be at most "
                f"{_INT64_MAX}, batchIndex at most {_INT32_MAX}"
            ) from None

    @classmethod
    def _parse_client_text(cls, text: str, what: str) -> MessageId:
        match = _CLIENT_FORM.fullmatch(text)
        if match is None or any(len(part) > _INT64_DIGITS for part in match.groups()):
            raise InvalidMessageIdError(
                f"Invalid {what} {shown(text)}: the Python client prints "
                f"(ledgerId,entryId,partition,batchIndex); {_FORMS}"
            )
        ledger_id, entry_id, partition, batch_index = (int(part) for part in match.groups())
        if not (0 <= ledger_id <= _INT64_MAX and 0 <= entry_id <= _INT64_MAX):
            raise InvalidMessageIdError(
                f"Invalid {what} {shown(text)}: ledgerId and entryId must be 0 to {_INT64_MAX} "
                "(the client's (-1,-1,-1,-1) is MessageId.earliest, no message)"
            )
        for name, value in (("partition", partition), ("batchIndex", batch_index)):
            if not -1 <= value <= _INT32_MAX:
                raise InvalidMessageIdError(
                    f"Invalid {what} {shown(text)}: {name} must be -1 (none) or 0 to {_INT32_MAX}"
                )
        return cls(ledger_id, entry_id, partition, batch_index)

    def client_text(self) -> str:
        """What the official Python client prints for this id (``str(MessageId)``):
        ``(ledgerId,entryId,partition,batchIndex)``, -1 for none. :meth:`parse` reads it."""
        return f"({self.ledger_id},{self.entry_id},{self.partition},{self.batch_index})"

    def triplet(self) -> str:
        """``ledgerId:entryId``, plus ``:batchIndex`` when ``batch_index >= 0``.

        The partition is not part of the triplet.
        """
        if self.batch_index >= 0:
            return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"
        return f"{self.ledger_id}:{self.entry_id}"

    def __str__(self) -> str:
        """The Java client's ``toString()``: ``ledgerId:entryId:partition[:batchIndex]``.

        Java prints ``L:E:P`` for a ``MessageIdImpl`` (not batched) and ``L:E:P:B``
        for a ``BatchMessageIdImpl``; an id is a batch id when ``batch_index`` is
        not -1, the same test the clients use when they write field 4.
        """
        text = f"{self.ledger_id}:{self.entry_id}:{self.partition}"
        if self.batch_index != -1:
            text += f":{self.batch_index}"
        return text

    # Binary: protobuf MessageIdData, pulsar-admin --messageId-base64

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> MessageId:
        """Read a protobuf ``MessageIdData``.

        ``ledgerId`` (1) and ``entryId`` (2) are required; uint64 on the wire,
        read as int64 (values >= 2**63 are negative, so -1 round-trips).
        ``partition`` (3), ``batch_index`` (4) and ``batch_size`` (6) are int32,
        truncated to 32 bits as protobuf does; absent, they default to -1, -1
        and 0. ``ack_set`` (5, packed or not) and ``first_chunk_message_id`` (7)
        are checked for shape and skipped: this id names the message, not its
        acknowledgement state or its chunks. Unknown fields (such as
        ``topic_name``, 8, in newer clients) are skipped by wire type. When a
        field repeats, the last value wins, as in protobuf.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidMessageIdError(
                f"Invalid MessageIdData: expected bytes, got {type(data).__name__}"
            )
        raw = bytes(data)
        try:
            return cls._decode(raw)
        except _DecodeError as exc:
            raise InvalidMessageIdError(f"Invalid MessageIdData {_show(raw)}: {exc}") from None

    @classmethod
    def _decode(cls, data: bytes) -> MessageId:
        values: dict[int, int] = {}
        pos = 0
        while pos < len(data):
            key, pos = _read_varint(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise _DecodeError(f"field number 0 at byte {pos - 1}")
            if number in _VARINT_FIELDS:
                _expect_wire(number, wire, _WIRE_VARINT)
                values[number], pos = _read_varint(data, pos)
            elif number == _FIELD_ACK_SET:
                if wire == _WIRE_VARINT:
                    _, pos = _read_varint(data, pos)
                elif wire == _WIRE_LENGTH_DELIMITED:
                    packed, pos = _read_length_delimited(data, pos)
                    inner = 0
                    while inner < len(packed):
                        _, inner = _read_varint(packed, inner)
                else:
                    raise _DecodeError(
                        f"field {number} (ack_set) has wire type {wire}, expected 0 or 2"
                    )
            elif number == _FIELD_FIRST_CHUNK_MESSAGE_ID:
                _expect_wire(number, wire, _WIRE_LENGTH_DELIMITED)
                _, pos = _read_length_delimited(data, pos)
            else:
                pos = _skip_field(data, pos, number, wire)
        if _FIELD_LEDGER_ID not in values:
            raise _DecodeError("missing required field 1 (ledgerId)")
        if _FIELD_ENTRY_ID not in values:
            raise _DecodeError("missing required field 2 (entryId)")
        return cls(
            ledger_id=_as_int64(values[_FIELD_LEDGER_ID]),
            entry_id=_as_int64(values[_FIELD_ENTRY_ID]),
            partition=_as_int32(values.get(_FIELD_PARTITION, _UINT64_MASK)),
            batch_index=_as_int32(values.get(_FIELD_BATCH_INDEX, _UINT64_MASK)),
            batch_size=_as_int32(values.get(_FIELD_BATCH_SIZE, 0)),
        )

    def to_bytes(self) -> bytes:
        """Write the protobuf ``MessageIdData`` exactly as pulsar-client 3.13.0 does.

        ``ledgerId`` and ``entryId`` always; ``partition`` unless -1,
        ``batch_index`` unless -1, ``batch_size`` unless 0; never ``ack_set`` or
        ``first_chunk_message_id``. Negative values are 10-byte varints.
        """
        out = bytearray()
        _write_varint_field(out, _FIELD_LEDGER_ID, self.ledger_id)
        _write_varint_field(out, _FIELD_ENTRY_ID, self.entry_id)
        if self.partition != -1:
            _write_varint_field(out, _FIELD_PARTITION, self.partition)
        if self.batch_index != -1:
            _write_varint_field(out, _FIELD_BATCH_INDEX, self.batch_index)
        if self.batch_size != 0:
            _write_varint_field(out, _FIELD_BATCH_SIZE, self.batch_size)
        return bytes(out)

    @classmethod
    def from_base64(cls, text: str) -> MessageId:
        """Read pulsar-admin's ``--messageId-base64``: standard base64 of ``MessageIdData``.

        Padding may be left out, as Java's ``Base64.getDecoder()`` allows; any
        character outside the standard alphabet (spaces included) is an error.
        """
        raw = decode_base64(text)
        try:
            return cls._decode(raw)
        except _DecodeError as exc:
            raise InvalidMessageIdError(
                f"Invalid --messageId-base64: {text}: bad MessageIdData: {exc}"
            ) from None

    def to_base64(self) -> str:
        """Standard base64 (with padding) of :meth:`to_bytes`."""
        return base64.b64encode(self.to_bytes()).decode("ascii")


def decode_base64(text: object) -> bytes:
    """Standard base64 as Java's ``Base64.getDecoder()`` reads it: padding may be left out.

    The one base64 reader of message ids (CLI, REST body, Spark plans). Any
    character outside the standard alphabet, spaces included, is an error.
    """
    if not isinstance(text, str):
        raise InvalidMessageIdError(f"Invalid --messageId-base64: {text!r}: not a string")
    if not text:
        raise InvalidMessageIdError("Invalid --messageId-base64: : empty")
    padded = text + "=" * (-len(text) % 4) if "=" not in text else text
    try:
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidMessageIdError(
            f"Invalid --messageId-base64: {text}: not base64 ({exc})"
        ) from None


def parse_position(text: str, option: str, partition: int = -1) -> Position:
    """The entry a message id names (pulsar-admin ``reset-cursor --messageId``,
    ``create-subscription --messageId``, ``analyze-backlog -p``), in any form
    :meth:`MessageId.parse` reads.

    ``partition``: the partition the command's topic names (-1: a topic, not one of
    its partitions); an id that carries another partition is refused, and so is a
    batch index, since a position is a whole entry. Range against the real ledgers
    is the caller's check.
    """
    message_id = MessageId.parse(text, option)
    if message_id.partition not in (-1, partition):
        where = "a topic given by its name" if partition < 0 else f"partition {partition}"
        raise InvalidMessageIdError(
            f"Invalid {option} {shown(text)}: the id is of partition {message_id.partition}, "
            f"the command names {where}"
        )
    if message_id.batch_index != -1:
        raise InvalidMessageIdError(
            f"Invalid {option} {shown(text)}: it names message {message_id.batch_index} of a "
            f"batch; a position is a whole entry: give "
            f"{message_id.ledger_id}:{message_id.entry_id}"
        )
    return message_id.position


class _DecodeError(Exception):
    """Malformed protobuf; turned into InvalidMessageIdError naming the input."""


def _check_range(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMessageIdError(
            f"Invalid message id: {name} must be an int, got {type(value).__name__} {value!r}"
        )
    if not low <= value <= high:
        raise InvalidMessageIdError(
            f"Invalid message id: {name} {value} out of range [{low}, {high}]"
        )


def _show(data: bytes) -> str:
    if len(data) <= _ERROR_HEX_BYTES:
        return f"(hex {data.hex() or 'empty'})"
    return f"(hex {data[:_ERROR_HEX_BYTES].hex()}..., {len(data)} bytes)"


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; the value is cut to 64 bits as protobuf does."""
    start = pos
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise _DecodeError(f"truncated varint at byte {start}")
        if pos - start >= _MAX_VARINT_BYTES:
            raise _DecodeError(f"varint longer than {_MAX_VARINT_BYTES} bytes at byte {start}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _UINT64_MASK, pos
        shift += 7


def _read_length_delimited(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = _read_varint(data, pos)
    if length > len(data) - pos:
        raise _DecodeError(
            f"length-delimited field of {length} bytes at byte {pos} runs past the end"
        )
    return data[pos : pos + length], pos + length


def _skip_field(data: bytes, pos: int, number: int, wire: int) -> int:
    if wire == _WIRE_VARINT:
        return _read_varint(data, pos)[1]
    if wire == _WIRE_LENGTH_DELIMITED:
        return _read_length_delimited(data, pos)[1]
    width = {_WIRE_FIXED64: 8, _WIRE_FIXED32: 4}.get(wire)
    if width is None:
        raise _DecodeError(f"field {number} has unsupported wire type {wire}")
    if pos + width > len(data):
        raise _DecodeError(f"truncated {width * 8}-bit field {number} at byte {pos}")
    return pos + width


def _expect_wire(number: int, wire: int, expected: int) -> None:
    if wire != expected:
        raise _DecodeError(f"field {number} has wire type {wire}, expected {expected}")


def _as_int64(value: int) -> int:
    return value - (1 << 64) if value > _INT64_MAX else value


def _as_int32(value: int) -> int:
    value &= _UINT32_MASK
    return value - (1 << 32) if value > _INT32_MAX else value


def _write_varint_field(out: bytearray, number: int, value: int) -> None:
    """Write a varint field; negative values as their 64-bit two's complement (10 bytes)."""
    out.append(number << 3 | _WIRE_VARINT)
    value &= _UINT64_MASK
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
