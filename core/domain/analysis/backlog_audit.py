"""Backlog audits: history samples, thresholds, and which samples breach them.

Pure: no store, no clock. A scheduled audit measures every subscription's
exact backlog (:class:`BacklogSample`), stores it
(:meth:`cursorops.core.services.broker.analysis.Analysis.record_backlog_audit`), and checks it here
against
:class:`Thresholds`, most specific first: a subscription's own limits, then its
namespace's, then the defaults, field by field.

The thresholds document (JSON)::

    {"defaults":      {"maxMessages": 100000, "maxAgeSeconds": 3600, "maxGrowthPerHour": 5000},
     "namespaces":    {"acme/orders": {"maxMessages": 10000}},
     "subscriptions": {"persistent://acme/orders/events": {"billing": {"maxAgeSeconds": 600}}},
     "radar":         {"minRedeliveries": 3, "minAgeSeconds": 600, "maxListed": 50}}

Every field is optional; an absent limit is not checked. ``radar`` holds the
poison-pill radar's limits, one set for the whole audit, with defaults
(:class:`cursorops.core.domain.analysis.poison_radar.RadarLimits`). Growth per hour is
the change in messages since the subscription's previous sample, scaled to an
hour; with no earlier sample it is unknown and not checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum

from cursorops.core.domain.analysis.poison_radar import RadarLimits
from cursorops.core.domain.errors import InvalidArgumentError

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class BacklogSample:
    """One subscription's exact backlog at one time: one row of the history."""

    topic: str
    subscription: str
    at_ms: int
    """When it was measured, epoch ms (UTC)."""
    messages: int
    entries: int
    oldest_publish_ms: int | None
    """Publish time of the oldest unacknowledged message; None when the backlog is empty."""
    run_id: str = ""
    """The audit run that measured it."""

    @property
    def namespace(self) -> str:
        return namespace_of(self.topic)

    def age_ms(self) -> int | None:
        """Age of the oldest unacknowledged message at :attr:`at_ms`."""
        if self.oldest_publish_ms is None:
            return None
        return max(0, self.at_ms - self.oldest_publish_ms)

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "subscription": self.subscription,
            "atMs": self.at_ms,
            "messages": self.messages,
            "entries": self.entries,
            "oldestPublishMs": self.oldest_publish_ms,
            "runId": self.run_id,
        }


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of ``persistent://tenant/namespace/topic``."""
    rest = topic.split("://", 1)[-1]
    parts = rest.split("/")
    if len(parts) < 3 or not parts[0] or not parts[1]:
        raise InvalidArgumentError(f"Invalid topic '{topic}': expected persistent://t/ns/topic")
    return f"{parts[0]}/{parts[1]}"


class Measure(StrEnum):
    MESSAGES = "messages"
    AGE = "age"
    GROWTH = "growth"


_KEYS = {
    "maxMessages": "max_messages",
    "maxAgeSeconds": "max_age_s",
    "maxGrowthPerHour": "max_growth",
}


@dataclass(frozen=True)
class Limits:
    """Upper bounds; None is unchecked. Messages, seconds, messages per hour."""

    max_messages: int | None = None
    max_age_s: int | None = None
    max_growth: int | None = None

    def over(self, other: Limits) -> Limits:
        """These limits where set, else ``other``'s."""
        return Limits(
            **{
                f.name: getattr(self, f.name)
                if getattr(self, f.name) is not None
                else getattr(other, f.name)
                for f in fields(self)
            }
        )

    @classmethod
    def from_json(cls, document: object, where: str) -> Limits:
        if not isinstance(document, Mapping):
            raise InvalidArgumentError(f"Invalid thresholds: {where} must be an object")
        unknown = sorted(set(document) - set(_KEYS))
        if unknown:
            raise InvalidArgumentError(
                f"Invalid thresholds: {where}: unknown {', '.join(map(str, unknown))} "
                f"(known: {', '.join(_KEYS)})"
            )
        values: dict[str, int] = {}
        for key, name in _KEYS.items():
            if key in document and document[key] is not None:
                value = document[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InvalidArgumentError(
                        f"Invalid thresholds: {where}.{key} must be an integer >= 0, got {value!r}"
                    )
                values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class Thresholds:
    defaults: Limits = field(default_factory=Limits)
    namespaces: Mapping[str, Limits] = field(default_factory=dict)
    subscriptions: Mapping[tuple[str, str], Limits] = field(default_factory=dict)
    """(topic, subscription) → limits."""
    radar: RadarLimits = field(default_factory=RadarLimits)

    def limits_for(self, topic: str, subscription: str) -> Limits:
        own = self.subscriptions.get((topic, subscription), Limits())
        space = self.namespaces.get(namespace_of(topic), Limits())
        return own.over(space).over(self.defaults)

    @classmethod
    def from_json(cls, document: object) -> Thresholds:
        """Parse the thresholds document; one line naming the first problem."""
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise InvalidArgumentError("Invalid thresholds: expected a JSON object")
        unknown = sorted(set(document) - {"defaults", "namespaces", "subscriptions", "radar"})
        if unknown:
            raise InvalidArgumentError(
                f"Invalid thresholds: unknown {', '.join(map(str, unknown))} "
                "(known: defaults, namespaces, subscriptions, radar)"
            )
        defaults = Limits.from_json(document.get("defaults") or {}, "defaults")
        spaces = document.get("namespaces") or {}
        subs = document.get("subscriptions") or {}
        if not isinstance(spaces, Mapping) or not isinstance(subs, Mapping):
            raise InvalidArgumentError(
                "Invalid thresholds: namespaces and subscriptions must be objects"
            )
        namespaces = {}
        for name, limits in spaces.items():
            if not isinstance(name, str) or name.count("/") != 1:
                raise InvalidArgumentError(
                    f"Invalid thresholds: namespace '{name}' must be tenant/namespace"
                )
            namespaces[name] = Limits.from_json(limits, f"namespaces.{name}")
        per_sub = {}
        for topic, by_name in subs.items():
            namespace_of(str(topic))
            if not isinstance(by_name, Mapping):
                raise InvalidArgumentError(
                    f"Invalid thresholds: subscriptions.{topic} must map subscriptions to limits"
                )
            for sub, limits in by_name.items():
                per_sub[(str(topic), str(sub))] = Limits.from_json(
                    limits, f"subscriptions.{topic}.{sub}"
                )
        return cls(defaults, namespaces, per_sub, RadarLimits.from_json(document.get("radar")))


@dataclass(frozen=True)
class Breach:
    topic: str
    subscription: str
    measure: Measure
    value: float
    limit: int

    def describe(self) -> str:
        unit = {
            Measure.MESSAGES: "messages",
            Measure.AGE: "s oldest unacknowledged",
            Measure.GROWTH: "messages/hour growth",
        }[self.measure]
        shown = f"{self.value:.0f}" if self.measure is not Measure.GROWTH else f"{self.value:.1f}"
        return f"{self.topic} / {self.subscription}: {shown} {unit} > {self.limit}"


def growth_per_hour(previous: BacklogSample | None, current: BacklogSample) -> float | None:
    """Messages gained per hour since ``previous``; None without an earlier sample."""
    if previous is None or previous.at_ms >= current.at_ms:
        return None
    return (current.messages - previous.messages) * HOUR_MS / (current.at_ms - previous.at_ms)


def check(
    samples: Sequence[BacklogSample],
    previous: Mapping[tuple[str, str], BacklogSample],
    thresholds: Thresholds,
) -> list[Breach]:
    """Every limit each sample exceeds (strictly), in sample order."""
    breaches: list[Breach] = []
    for sample in samples:
        limits = thresholds.limits_for(sample.topic, sample.subscription)
        measured: list[tuple[Measure, float | None, int | None]] = [
            (Measure.MESSAGES, float(sample.messages), limits.max_messages),
            (
                Measure.AGE,
                None if sample.age_ms() is None else (sample.age_ms() or 0) / 1000,
                limits.max_age_s,
            ),
            (
                Measure.GROWTH,
                growth_per_hour(previous.get((sample.topic, sample.subscription)), sample),
                limits.max_growth,
            ),
        ]
        for measure, value, limit in measured:
            if value is not None and limit is not None and value > limit:
                breaches.append(Breach(sample.topic, sample.subscription, measure, value, limit))
    return breaches


def latest_before(
    history: Sequence[BacklogSample], run_id: str
) -> dict[tuple[str, str], BacklogSample]:
    """Each subscription's newest sample from a run other than ``run_id``."""
    out: dict[tuple[str, str], BacklogSample] = {}
    for sample in sorted(history, key=lambda s: s.at_ms):
        if sample.run_id != run_id:
            out[(sample.topic, sample.subscription)] = sample
    return out


__all__ = [
    "BacklogSample",
    "Breach",
    "Limits",
    "Measure",
    "Thresholds",
    "check",
    "growth_per_hour",
    "latest_before",
    "namespace_of",
]
