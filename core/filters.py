"""Entry filters (PIP-105) and message predicates, vectorised over Arrow columns.

Both are evaluated on *message rows* (the ledger store's row schema: ``key``,
``properties``, ``publish_time``, ``deliver_at``, ``payload``, ...) given as a
``pyarrow.Table`` or ``RecordBatch``, and answer one numpy array per row, so
``core`` and the Spark jobs (inside ``mapInArrow`` / ``applyInArrow``) call the
very same functions.

Entry filters
=============

A subscription's filters come from its properties. Every property whose key
starts with ``entryFilter.`` is one filter::

    entryFilter.<action>.<target>=<value>

``<action>`` is ``reject`` or ``reschedule`` (case-insensitive): what happens to
an entry the filter matches. ``<target>`` is one of:

=============================  ==================================================
``key``                        the message key equals ``<value>``
``property.<name>``            property ``<name>`` equals ``<value>``; ``<name>``
                               is everything after ``property.`` (dots allowed)
``publishTime.after``          publish time at or after ``<value>`` (inclusive)
``publishTime.before``         publish time before ``<value>`` (exclusive)
``deliverAt.after``            a delayed message due at or after ``<value>``
``deliverAt.before``           a delayed message due before ``<value>``
=============================  ==================================================

Times are epoch milliseconds or ISO-8601 (UTC when no offset is given).
``after`` and ``before`` of the same field and action form one range
``[after, before)``; ``deliverAt`` never matches a message that is not delayed.

Verdicts follow Pulsar's filter pipeline, where the first filter answering
other than ACCEPT decides, with the reject filters placed first: an entry that
any reject filter matches is REJECT; else one that any reschedule filter
matches is RESCHEDULE; else ACCEPT. No filter at all means ACCEPT.

Any other ``entryFilter.*`` key (a typo, an unknown action or target) raises
:class:`~core.errors.InvalidPredicateError` naming the property: a filter that
silently does nothing would make every analysis wrong. Properties that do not
start with ``entryFilter.`` are not filters and are ignored.

Batches. Pulsar's filter sees an entry, i.e. one set of metadata per batch. Here
the verdict of a batch entry is the verdict of its first message (batch index
0): pass :func:`first_messages` rows to :meth:`EntryFilters.verdicts` to get one
verdict per entry, aligned with those rows.

Predicates
==========

:func:`parse_predicate` reads the JSON document an operator gives to find
messages (pydantic validates it, and only here)::

    {"key": "order-42",
     "properties": {"region": "eu"},                   every pair must match
     "publishTime": {"after": T, "before": T},         [after, before)
     "deliverAt": {"after": "now"},                    delayed, due in that range
     "payloadContains": "timeout",                     UTF-8 substring of the payload
     "jsonField": {"path": "order.id", "equals": 42}}  payload is JSON, field equals

Every given condition must hold (AND); at least one is required. ``T`` is epoch
milliseconds, ISO-8601 (UTC when no offset), ``"now"``, or a duration before now
(``"10m"``, ``"2h"``, ``"1d"``). ``deliverAt: {"after": "now"}`` finds the
messages still scheduled. A ``jsonField`` path is dot-separated object keys;
a segment of digits indexes a list. ``equals`` is any JSON value, compared
strictly (``true`` is not ``1``). Bad input raises
:class:`~core.errors.InvalidPredicateError` naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from core import backlog
from core.backlog import ACCEPT, REJECT, RESCHEDULE
from core.cursor import CursorState
from core.errors import InvalidPredicateError
from core.position import Position, match_positions

FILTER_PREFIX = "entryFilter."
"""Subscription properties with this prefix configure entry filters."""

_ACTIONS = {"reject": REJECT, "reschedule": RESCHEDULE}
_ACTION_NAMES = {REJECT: "reject", RESCHEDULE: "reschedule", ACCEPT: "accept"}
_TIME_FIELDS = {"publishTime": "publish_time", "deliverAt": "deliver_at"}
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_INT64_MAX = 2**63 - 1

Rows: TypeAlias = pa.Table | pa.RecordBatch


def verdict_name(verdict: int) -> str:
    """``accept``, ``reject`` or ``reschedule``."""
    return _ACTION_NAMES[verdict]


# -- times -----------------------------------------------------------------------


def parse_time_ms(value: int | str, what: str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds.

    ``value`` is epoch milliseconds (an int or digits), ISO-8601 (UTC when no
    offset), or, when ``now_ms`` is given, ``"now"`` or a duration before it
    (``"10m"``). ``what`` names the field in the error.
    """
    if isinstance(value, bool):
        raise InvalidPredicateError(f"Invalid {what}: expected a time, got {value!r}")
    if isinstance(value, int):
        return _epoch_ms(value, what)
    text = value.strip()
    if text.lstrip("-").isdigit():
        return _epoch_ms(int(text), what)
    if now_ms is not None:
        if text.lower() == "now":
            return now_ms
        match = _DURATION.fullmatch(text)
        if match:
            return now_ms - int(match.group(1)) * _UNIT_MS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        relative = ", 'now' or a duration before now (10m, 1h, 2d)" if now_ms is not None else ""
        raise InvalidPredicateError(
            f"Invalid {what} {value!r}: expected epoch milliseconds or an ISO-8601 time{relative}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _epoch_ms(value: int, what: str) -> int:
    if not 0 <= value <= _INT64_MAX:
        raise InvalidPredicateError(f"Invalid {what} {value}: epoch milliseconds out of range")
    return value


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
        values = _int_column(column)
        valid = ~_null_mask(column)
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


# -- predicates --------------------------------------------------------------------


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
        return frozenset(needed)

    def mask(self, rows: Rows) -> np.ndarray:
        """True for each row (message) matching every condition. Cost: O(rows), vectorised,
        except ``jsonField``, which parses the payload of the rows the other conditions kept."""
        out = np.ones(rows.num_rows, dtype=np.bool_)
        if self.key is not None:
            out &= _bool(pc.equal(rows.column("key"), self.key))
        for name, value in self.properties:
            looked_up = pc.map_lookup(rows.column("properties"), name, "first")
            out &= _bool(pc.equal(looked_up, value))
        if self.publish_time is not None:
            out &= self.publish_time.mask(rows.column("publish_time"))
        if self.deliver_at is not None:
            out &= self.deliver_at.mask(rows.column("deliver_at"))
        if self.payload_contains is not None:
            out &= _bool(pc.match_substring(rows.column("payload"), self.payload_contains))
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
        if self.json_field is not None:
            out["jsonField"] = {
                "path": ".".join(self.json_field.path),
                "equals": self.json_field.equals,
            }
        return out


class _TimeRangeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    after: StrictInt | StrictStr | None = None
    before: StrictInt | StrictStr | None = None


class _JsonFieldRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: StrictStr
    equals: Any


class PredicateRequest(BaseModel):
    """The predicate document as it arrives (CLI, REST, DAG run conf); see the module doc."""

    model_config = ConfigDict(extra="forbid")
    key: StrictStr | None = None
    properties: dict[StrictStr, StrictStr] | None = None
    publishTime: _TimeRangeRequest | None = None  # noqa: N815 - Pulsar's REST spelling
    deliverAt: _TimeRangeRequest | None = None  # noqa: N815
    payloadContains: StrictStr | None = None  # noqa: N815
    jsonField: _JsonFieldRequest | None = None  # noqa: N815


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
        request = PredicateRequest.model_validate(dict(document))
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
    predicate = Predicate(
        key=request.key,
        properties=tuple(sorted((request.properties or {}).items())),
        publish_time=_time_range(request.publishTime, "publishTime", now_ms),
        deliver_at=_time_range(request.deliverAt, "deliverAt", now_ms),
        payload_contains=request.payloadContains,
        json_field=json_field,
    )
    if predicate.is_empty:
        raise InvalidPredicateError(
            "Invalid predicate: give at least one condition (key, properties, publishTime, "
            "deliverAt, payloadContains, jsonField)"
        )
    return predicate


def _time_range(
    request: _TimeRangeRequest | None, name: str, now_ms: int | None
) -> TimeRange | None:
    if request is None:
        return None
    after = None if request.after is None else parse_time_ms(request.after, f"{name}.after", now_ms)
    before = (
        None if request.before is None else parse_time_ms(request.before, f"{name}.before", now_ms)
    )
    try:
        return TimeRange(after, before)
    except InvalidPredicateError as exc:
        raise InvalidPredicateError(f"Invalid predicate: {name}: {exc}") from None


# -- entry filters -----------------------------------------------------------------


@dataclass(frozen=True)
class EntryFilter:
    """One configured filter: entries whose first message matches ``condition`` get ``action``."""

    action: int
    """REJECT or RESCHEDULE."""
    condition: Predicate
    sources: tuple[str, ...]
    """The subscription property keys it was configured by."""


@dataclass(frozen=True)
class EntryFilters:
    """A subscription's entry filters (PIP-105); empty means every entry is ACCEPTed."""

    filters: tuple[EntryFilter, ...] = ()
    properties: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """The ``entryFilter.*`` properties this was built from."""

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> EntryFilters:
        """Read the ``entryFilter.*`` properties (see the module doc); raise on a bad one."""
        filters: list[EntryFilter] = []
        ranges: dict[tuple[int, str], dict[str, tuple[str, int]]] = {}
        configured = sorted((k, v) for k, v in properties.items() if k.startswith(FILTER_PREFIX))
        for prop, value in configured:
            action_name, _, target = prop[len(FILTER_PREFIX) :].partition(".")
            action = _ACTIONS.get(action_name.lower())
            if action is None:
                raise InvalidPredicateError(
                    f"Invalid entry filter property '{prop}': the action after "
                    f"'{FILTER_PREFIX}' must be reject or reschedule"
                )
            head, _, rest = target.partition(".")
            if target == "key":
                filters.append(EntryFilter(action, Predicate(key=value), (prop,)))
            elif head == "property" and rest:
                filters.append(EntryFilter(action, Predicate(properties=((rest, value),)), (prop,)))
            elif head in _TIME_FIELDS and rest in ("after", "before"):
                moment = parse_time_ms(value, f"entry filter property '{prop}'")
                ranges.setdefault((action, head), {})[rest] = (prop, moment)
            else:
                raise InvalidPredicateError(
                    f"Invalid entry filter property '{prop}': expected "
                    f"{FILTER_PREFIX}<reject|reschedule>.<target>, target one of key, "
                    "property.<name>, publishTime.after, publishTime.before, "
                    "deliverAt.after, deliverAt.before"
                )
        for (action, head), bounds in sorted(ranges.items()):
            sources = tuple(bounds[side][0] for side in ("after", "before") if side in bounds)
            try:
                window = TimeRange(
                    bounds["after"][1] if "after" in bounds else None,
                    bounds["before"][1] if "before" in bounds else None,
                )
            except InvalidPredicateError as exc:
                raise InvalidPredicateError(
                    f"Invalid entry filter properties {', '.join(sources)}: {exc}"
                ) from None
            condition = (
                Predicate(publish_time=window)
                if head == "publishTime"
                else Predicate(deliver_at=window)
            )
            filters.append(EntryFilter(action, condition, sources))
        filters.sort(key=lambda f: (f.action != REJECT, f.sources))
        return cls(tuple(filters), tuple(configured))

    def __bool__(self) -> bool:
        return bool(self.filters)

    @property
    def columns(self) -> frozenset[str]:
        """The message columns :meth:`verdicts` reads."""
        return frozenset().union(*(f.condition.columns for f in self.filters))

    def verdicts(self, rows: Rows) -> np.ndarray:
        """ACCEPT / REJECT / RESCHEDULE per row (int8). Cost: O(rows x filters), vectorised.

        For PIP-105 entry verdicts pass one row per entry, :func:`first_messages`.
        """
        out = np.full(rows.num_rows, ACCEPT, dtype=np.int8)
        decided = np.zeros(rows.num_rows, dtype=np.bool_)
        for one in self.filters:
            if decided.all():
                break
            hit = one.condition.mask(rows) & ~decided
            out[hit] = one.action
            decided |= hit
        return out


def validate_filter_properties(properties: Mapping[str, str]) -> None:
    """Raise InvalidPredicateError when a subscription's ``entryFilter.*`` properties are bad.

    The check at the door (create and update of a subscription): one bad
    filter would otherwise make every later analysis of the topic fail.
    """
    EntryFilters.from_properties(properties)


def first_messages(rows: Rows) -> Rows:
    """The rows of each entry's first message (batch index 0, or -1 when not batched)."""
    return rows.filter(pc.less_equal(rows.column("batch_index"), 0))


# -- acknowledgement, per message ----------------------------------------------------


def unacked_rows(state: CursorState, rows: Rows) -> np.ndarray:
    """True for each message row the cursor has not acknowledged.

    Entry-level acknowledgement is :func:`core.backlog.unacked_messages`; inside a
    partly acknowledged batch each index is asked of :meth:`CursorState.is_acked`.
    Rows may be any subset of one partition, in any order. Cost: O(n log n) plus
    O(rows in partly acknowledged batches).
    """
    ledger_ids = _int_column(rows.column("ledger_id"))
    entry_ids = _int_column(rows.column("entry_id"))
    batch_sizes = _int_column(rows.column("batch_size"))
    live = backlog.unacked_messages(state, ledger_ids, entry_ids, batch_sizes) > 0
    if state.batch_acks and live.any():
        batch_index = _int_column(rows.column("batch_index"))
        count = len(state.batch_acks)
        partial = match_positions(
            ledger_ids,
            entry_ids,
            np.fromiter((p.ledger_id for p in state.batch_acks), dtype=np.int64, count=count),
            np.fromiter((p.entry_id for p in state.batch_acks), dtype=np.int64, count=count),
        )
        for row in np.flatnonzero(live & (batch_index >= 0) & (partial >= 0)).tolist():
            position = Position(int(ledger_ids[row]), int(entry_ids[row]))
            live[row] = not state.is_acked(position, int(batch_index[row]))
    return live


# -- column helpers --------------------------------------------------------------------


def _bool(result: pa.ChunkedArray | pa.Array) -> np.ndarray:
    filled = pc.fill_null(result, False)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.bool_)


def _null_mask(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _int_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    filled = pc.fill_null(column, 0) if column.null_count else column
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)


def describe(filters: EntryFilters) -> list[str]:
    """One line per filter, for logs: ``reject: key == 'k' (entryFilter.reject.key)``."""
    return [
        f"{verdict_name(f.action)}: {json.dumps(f.condition.to_json(), sort_keys=True)} "
        f"({', '.join(f.sources)})"
        for f in filters.filters
    ]
