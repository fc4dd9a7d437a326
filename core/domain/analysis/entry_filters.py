"""Entry filters (PIP-105): a subscription's ``entryFilter.*`` properties as verdicts.

Evaluated on message rows (:data:`cursorops.core.domain.analysis.columns.Rows`) with
:mod:`cursorops.core.domain.analysis.predicates`,
one verdict per row.

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
:class:`~cursorops.core.domain.errors.InvalidPredicateError` naming the property: a filter that
silently does nothing would make every analysis wrong. Properties that do not
start with ``entryFilter.`` are not filters and are ignored.

Batches. Pulsar's filter sees an entry, i.e. one set of metadata per batch. Here
the verdict of a batch entry is the verdict of its first message (batch index
0): pass :func:`first_messages` rows to :meth:`EntryFilters.verdicts` to get one
verdict per entry, aligned with those rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from cursorops.core.domain.analysis.filter_verdict import FilterVerdict
from cursorops.core.domain.durations import parse_time_ms
from cursorops.core.domain.errors import InvalidPredicateError

if TYPE_CHECKING:
    from cursorops.core.domain.analysis.columns import Rows
    from cursorops.core.domain.analysis.predicates import Predicate

FILTER_PREFIX = "entryFilter."
"""Subscription properties starting with this are entry filters."""

_ACTIONS = {"reject": FilterVerdict.REJECT, "reschedule": FilterVerdict.RESCHEDULE}
_TIME_FIELDS = {"publishTime": "publish_time", "deliverAt": "deliver_at"}


@dataclass(frozen=True)
class EntryFilter:
    """One configured filter: entries whose first message matches ``condition`` get ``action``."""

    action: FilterVerdict
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
        ranges: dict[tuple[FilterVerdict, str], dict[str, tuple[str, int]]] = {}
        configured = sorted((k, v) for k, v in properties.items() if k.startswith(FILTER_PREFIX))
        if not configured:
            return cls()
        # Imported here: only configured filters need the predicates (and pydantic).
        from cursorops.core.domain.analysis.predicates import Predicate, TimeRange

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
                moment = parse_time_ms(
                    value, f"entry filter property '{prop}'", error=InvalidPredicateError
                )
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
        filters.sort(key=lambda f: (f.action != FilterVerdict.REJECT, f.sources))
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
        out = np.full(rows.num_rows, FilterVerdict.ACCEPT, dtype=np.int8)
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
    import pyarrow.compute as pc

    return rows.filter(pc.less_equal(rows.column("batch_index"), 0))


def describe(filters: EntryFilters) -> list[str]:
    """One line per filter, for logs: ``reject: key == 'k' (entryFilter.reject.key)``."""
    return [
        f"{f.action.label}: {json.dumps(f.condition.to_json(), sort_keys=True)} "
        f"({', '.join(f.sources)})"
        for f in filters.filters
    ]
