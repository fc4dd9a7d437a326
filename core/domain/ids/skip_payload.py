"""A skip's message ids as callers write them: triplets, base64 ``MessageIdData``, or
Pulsar's ``skipByMessageIds`` JSON body (PIP-423), parsed all-or-nothing with every
bad id named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from cursorops.core.domain.errors import InvalidMessageIdError, InvalidSkipPayloadError
from cursorops.core.domain.ids.message_id import MessageId, decode_base64

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def parse_triplets(texts: Sequence[str]) -> list[MessageId]:
    return [MessageId.parse_triplet(t) for t in texts]


def parse_base64_ids(texts: Sequence[str]) -> list[MessageId]:
    return [MessageId.from_base64(t) for t in texts]


def parse_ids(texts: Sequence[str], option: str) -> list[MessageId]:
    """Ids in any form a Pulsar user holds (:meth:`MessageId.parse`), each error naming
    ``option``: what the CLI's ``skip-messages`` takes."""
    return [MessageId.parse(t, option) for t in texts]


def parse_payload(body: object) -> list[MessageId]:
    """The three request shapes of PIP-423's REST endpoint.

    - a bare JSON array of base64 ``MessageIdData``;
    - ``{"type": "byteArray", "messageIds": [b64, ...]}`` (no ``type`` = byteArray);
      in both, a string may also be a triplet or the Python client's printed form
      (``(1,700,-1,-1)``), every form :meth:`MessageId.parse` reads;
    - ``{"type": "messageId", "messageIds": [{"ledgerId": 1, "entryId": 2, "batchIndex": 0}]}``
      (numbers may be numeric strings; ``type`` is case-insensitive; a negative or
      absent batchIndex means the whole entry, in this shape only).

    A number is a JSON integer or a string of ASCII decimal digits with an
    optional leading '-', within int64 (batchIndex: int32); booleans, floats,
    spaces and non-ASCII digits are refused. Base64 may leave out its padding,
    as Java's decoder allows. Every failure is one InvalidSkipPayloadError line.
    """
    if isinstance(body, list):
        return _byte_array_ids(body)
    if not isinstance(body, Mapping):
        raise InvalidSkipPayloadError(
            "Invalid skipByMessageIds payload: expected a JSON array or object"
        )
    unknown = set(body) - {"type", "messageIds"}
    if unknown:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: unknown field(s) {_names(unknown)}"
        )
    kind = body.get("type", "byteArray")
    if not isinstance(kind, str):
        raise InvalidSkipPayloadError("Invalid skipByMessageIds payload: type must be a string")
    ids = body.get("messageIds")
    if not isinstance(ids, list):
        raise InvalidSkipPayloadError("Invalid skipByMessageIds payload: messageIds must be a list")
    if kind.lower() == "bytearray":
        return _byte_array_ids(ids)
    if kind.lower() == "messageid":
        return [_object_id(item, i) for i, item in enumerate(ids)]
    raise InvalidSkipPayloadError(
        f"Invalid skipByMessageIds payload: unknown type '{kind}' (byteArray or messageId)"
    )


def _names(keys: Iterable[object]) -> str:
    """Unknown field names for an error line: quoted (no raw newline), at most ten."""
    shown = sorted(repr(str(k))[:40] for k in keys)
    return "[" + ", ".join(shown[:10]) + (", ..." if len(shown) > 10 else "") + "]"


def _byte_array_ids(items: list[object]) -> list[MessageId]:
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] must be a base64 string"
            )
        if ":" in item or item.lstrip(" ").startswith("("):
            # A triplet or the Python client's printed form, as the CLI takes them.
            try:
                out.append(MessageId.parse(item, f"messageIds[{i}]"))
            except InvalidMessageIdError as exc:
                raise InvalidSkipPayloadError(f"Invalid skipByMessageIds payload: {exc}") from exc
            continue
        try:
            decode_base64(item)
        except InvalidMessageIdError as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] is not base64: {item[:80]!r}"
            ) from exc
        try:
            out.append(MessageId.from_base64(item))
        except InvalidMessageIdError as exc:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}]: {exc}"
            ) from exc
    return out


# ASCII decimal digits only: str.isdigit() and int() also take "²", "١٢" and "１２".
_DECIMAL = re.compile(r"-?[0-9]{1,20}", re.ASCII)


def _number(value: object, what: str, low: int, high: int) -> int:
    """A JSON integer or a numeric string (ASCII decimal, optional '-'), within [low, high].

    Booleans and floats are refused, as Jackson refuses them for a ``long``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = int(value)
    else:
        shown = repr(value) if isinstance(value, str | int | float) else type(value).__name__
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: {what} must be a number (an integer, or a "
            f"string of ASCII decimal digits with an optional '-'), got {shown[:80]}"
        )
    if not low <= number <= high:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: {what} {number} out of range [{low}, {high}]"
        )
    return number


def _object_id(item: object, i: int) -> MessageId:
    if not isinstance(item, Mapping):
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] must be an object"
        )
    unknown = set(item) - {"ledgerId", "entryId", "batchIndex"}
    if unknown:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has unknown field(s) "
            f"{_names(unknown)}"
        )
    for required in ("ledgerId", "entryId"):
        if required not in item:
            raise InvalidSkipPayloadError(
                f"Invalid skipByMessageIds payload: messageIds[{i}] lacks {required}"
            )
    ledger_id = _number(item["ledgerId"], f"messageIds[{i}].ledgerId", _INT64_MIN, _INT64_MAX)
    entry_id = _number(item["entryId"], f"messageIds[{i}].entryId", _INT64_MIN, _INT64_MAX)
    batch = item.get("batchIndex")
    # This shape alone lets an absent or negative batchIndex mean the whole entry (PIP-423).
    batch_index = (
        -1
        if batch is None
        else max(_number(batch, f"messageIds[{i}].batchIndex", _INT32_MIN, _INT32_MAX), -1)
    )
    if ledger_id < 0 or entry_id < 0:
        raise InvalidSkipPayloadError(
            f"Invalid skipByMessageIds payload: messageIds[{i}] has a negative ledgerId or entryId"
        )
    return MessageId(ledger_id, entry_id, -1, batch_index)


__all__ = ["parse_base64_ids", "parse_ids", "parse_payload", "parse_triplets"]
