"""Message predicates: conditions on a message, vectorised over Arrow message rows.

Evaluated on message rows (:data:`cursorops.core.domain.analysis.columns.Rows`) and answering one
numpy array per row, so ``core`` and the Spark jobs call the very same functions.

:func:`parse_predicate` reads the JSON document an operator gives to find
messages (pydantic validates it, and only here)::

    {"key": "order-42",
     "properties": {"region": "eu"},                   every pair must match
     "publishTime": {"after": T, "before": T},         [after, before)
     "deliverAt": {"after": "now"},                    delayed, due in that range
     "payloadContains": "timeout",                     UTF-8 substring of the payload
     "producer": "orders-service",                     producer name, exactly
     "jsonField": {"path": "order.id", "equals": 42}}  payload is JSON, field equals

Every given condition must hold (AND); at least one is required. ``T`` is epoch
milliseconds, ISO-8601 (UTC when no offset), ``"now"``, or a duration before now
(``"10m"``, ``"2h"``, ``"1d"``). ``deliverAt: {"after": "now"}`` finds the
messages still scheduled. A ``jsonField`` path is dot-separated object keys;
a segment of digits indexes a list. ``equals`` is any JSON value, compared
strictly (``true`` is not ``1``). Bad input raises
:class:`~cursorops.core.domain.errors.InvalidPredicateError` naming the field.

The document's fields are declared once, by
:class:`cursorops.core.domain.analysis.match_conditions.MatchConditions`, with the flat options
(``--key``,
``--property NAME=VALUE``, time bounds, ...) every front end derives from them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from cursorops.core.domain.analysis.columns import Rows, bool_mask, int_column, null_mask
from cursorops.core.domain.analysis.match_conditions import MatchConditions, TimeRangeRequest
from cursorops.core.domain.durations import parse_time_ms
from cursorops.core.domain.errors import InvalidPredicateError


@dataclass(frozen=True)
class TimeRange:
    """``[after, before)`` in epoch milliseconds; either bound may be open (None)."""

    after: int | None = None
    before: int | None = None

    def __post_init__(self) -> None:
        if self.after is None and self.before is None:
            raise InvalidPredicateError("Invalid time range: give 'after', 'before' or both")
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise InvalidPredicateError(
                f"Invalid time range: after ({self.after}) must be earlier than "
                f"before ({self.before})"
            )

    def mask(self, column: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """True where the value is in range; a null value is never in range."""
        values = int_column(column)
        valid = ~null_mask(column)
        if self.after is not None:
            valid &= values >= self.after
        if self.before is not None:
            valid &= values < self.before
        return valid

    def to_json(self) -> dict[str, int]:
        out = {}
        if self.after is not None:
            out["after"] = self.after
        if self.before is not None:
            out["before"] = self.before
        return out


@dataclass(frozen=True)
class JsonFieldMatch:
    """The payload parses as JSON and the value at ``path`` equals ``equals``."""

    path: tuple[str, ...]
    equals: Any

    def matches(self, payload: bytes | None) -> bool:
        if payload is None:
            return False
        try:
            node: Any = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            return False
        for segment in self.path:
            if isinstance(node, dict) and segment in node:
                node = node[segment]
            elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
                node = node[int(segment)]
            else:
                return False
        return _json_equal(node, self.equals)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@dataclass(frozen=True)
class Predicate:
    """Conditions on a message, all of which must hold; build with :func:`parse_predicate`.

    Plain and picklable, so it ships to Spark executors as is.
    """

    key: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    publish_time: TimeRange | None = None
    deliver_at: TimeRange | None = None
    payload_contains: str | None = None
    json_field: JsonFieldMatch | None = None
    producer: str | None = None

    @property
    def is_empty(self) -> bool:
        return self == Predicate()

    @property
    def columns(self) -> frozenset[str]:
        """The message columns :meth:`mask` reads."""
        needed = set()
        if self.key is not None:
            needed.add("key")
        if self.properties:
            needed.add("properties")
        if self.publish_time is not None:
            needed.add("publish_time")
        if self.deliver_at is not None:
            needed.add("deliver_at")
        if self.payload_contains is not None or self.json_field is not None:
            needed.add("payload")
        if self.producer is not None:
            needed.add("producer_name")
        return frozenset(needed)

    def mask(self, rows: Rows) -> np.ndarray:
        """True for each row (message) matching every condition. Cost: O(rows), vectorised,
        except ``jsonField``, which parses the payload of the rows the other conditions kept."""
        out = np.ones(rows.num_rows, dtype=np.bool_)
        if self.key is not None:
            out &= bool_mask(pc.equal(rows.column("key"), self.key))
        for name, value in self.properties:
            looked_up = pc.map_lookup(rows.column("properties"), name, "first")
            out &= bool_mask(pc.equal(looked_up, value))
        if self.publish_time is not None:
            out &= self.publish_time.mask(rows.column("publish_time"))
        if self.deliver_at is not None:
            out &= self.deliver_at.mask(rows.column("deliver_at"))
        if self.payload_contains is not None:
            out &= bool_mask(pc.match_substring(rows.column("payload"), self.payload_contains))
        if self.producer is not None:
            out &= bool_mask(pc.equal(rows.column("producer_name"), self.producer))
        if self.json_field is not None and out.any():
            payload = rows.column("payload")
            for row in np.flatnonzero(out).tolist():
                value = payload[row].as_py()
                if not self.json_field.matches(value):
                    out[row] = False
        return out

    def to_json(self) -> dict[str, Any]:
        """The document :func:`parse_predicate` reads back (times as epoch milliseconds)."""
        out: dict[str, Any] = {}
        if self.key is not None:
            out["key"] = self.key
        if self.properties:
            out["properties"] = dict(self.properties)
        if self.publish_time is not None:
            out["publishTime"] = self.publish_time.to_json()
        if self.deliver_at is not None:
            out["deliverAt"] = self.deliver_at.to_json()
        if self.payload_contains is not None:
            out["payloadContains"] = self.payload_contains
        if self.producer is not None:
            out["producer"] = self.producer
        if self.json_field is not None:
            out["jsonField"] = {
                "path": ".".join(self.json_field.path),
                "equals": self.json_field.equals,
            }
        return out


def optional_predicate(
    predicate: Predicate | Mapping[str, object] | str | None, now_ms: int
) -> Predicate | None:
    """``predicate`` as a Predicate, parsed if it is a document; None when it is absent or
    matches everything (no condition)."""
    if predicate is None or isinstance(predicate, Predicate):
        return None if predicate is None or predicate.is_empty else predicate
    return parse_predicate(predicate, now_ms=now_ms)


def parse_predicate(document: str | Mapping[str, Any], *, now_ms: int | None = None) -> Predicate:
    """Validate a predicate document (JSON text or a mapping) into a :class:`Predicate`.

    ``now_ms`` resolves ``"now"`` and relative durations; without it they are
    refused. Raises InvalidPredicateError naming the bad field.
    """
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise InvalidPredicateError(f"Invalid predicate: not JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise InvalidPredicateError("Invalid predicate: expected a JSON object")
    try:
        request = MatchConditions.model_validate(dict(document))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'predicate'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidPredicateError(f"Invalid predicate: {problems}") from exc
    json_field = None
    if request.jsonField is not None:
        path = tuple(request.jsonField.path.split("."))
        if not all(path):
            raise InvalidPredicateError(
                f"Invalid predicate: jsonField.path {request.jsonField.path!r}: "
                "expected dot-separated names such as order.id"
            )
        json_field = JsonFieldMatch(path, request.jsonField.equals)
    if request.payloadContains == "":
        raise InvalidPredicateError("Invalid predicate: payloadContains must not be empty")
    if request.producer == "":
        raise InvalidPredicateError("Invalid predicate: producer must not be empty")
    predicate = Predicate(
        key=request.key,
        properties=tuple(sorted((request.properties or {}).items())),
        publish_time=_time_range(request.publishTime, "publishTime", now_ms),
        deliver_at=_time_range(request.deliverAt, "deliverAt", now_ms),
        payload_contains=request.payloadContains,
        json_field=json_field,
        producer=request.producer,
    )
    if predicate.is_empty:
        raise InvalidPredicateError(
            "Invalid predicate: give at least one condition "
            f"({', '.join(MatchConditions.model_fields)})"
        )
    return predicate


def _time_range(
    request: TimeRangeRequest | None, name: str, now_ms: int | None
) -> TimeRange | None:
    if request is None:
        return None
    after = None if request.after is None else _time(request.after, f"{name}.after", now_ms)
    before = None if request.before is None else _time(request.before, f"{name}.before", now_ms)
    try:
        return TimeRange(after, before)
    except InvalidPredicateError as exc:
        raise InvalidPredicateError(f"Invalid predicate: {name}: {exc}") from None


def _time(value: int | str, what: str, now_ms: int | None) -> int:
    return parse_time_ms(value, what, now_ms, error=InvalidPredicateError)
