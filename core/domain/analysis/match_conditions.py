"""The match conditions, declared once: :class:`MatchConditions`.

A skip by predicate chooses messages by conditions on them. Each condition is
one field of :class:`MatchConditions`, which is the predicate document as it
arrives (a JSON object, in Pulsar's REST spelling: ``publishTime``,
``payloadContains``) and which :func:`cursorops.core.domain.analysis.predicates.parse_predicate`
validates. Every other spelling is derived from it:

- a field annotated with a :class:`Shortcut` can also be given as flat options,
  :data:`MATCH_OPTIONS` (``key``, ``property NAME=VALUE``, ``publish_time_after``,
  ...): the Spark job's flags (``spark_apps/find_messages.py``) and the
  matching DAG's params (:mod:`cursorops.airflow.matching`) are generated from them;
- :func:`predicate_from_options` turns flat options back into the document.

A condition added here is a flag, a DAG param and a document field at once.
Only pydantic and the standard library: DAG files import this at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from cursorops.core.domain.errors import InvalidPredicateError

TIME_HELP = "epoch ms, ISO-8601 (UTC without an offset), 'now' or a duration before now (1h)"
"""How a time bound is written, wherever one is given."""


@dataclass(frozen=True)
class Shortcut:
    """A condition's flat spelling, besides its field in the document.

    ``name`` is the option's name in the glossary's words; a time range gives two
    options, ``<name>_after`` (inclusive) and ``<name>_before`` (exclusive), and
    ``NAME=VALUE`` pairs one repeatable option. ``help`` is what a flag's help and
    a param's description say (a time range's adds the bound and :data:`TIME_HELP`).
    """

    name: str
    help: str


class TimeRangeRequest(BaseModel):
    """``[after, before)``: each bound epoch ms or a text :data:`TIME_HELP` describes."""

    model_config = ConfigDict(extra="forbid")
    after: StrictInt | StrictStr | None = None
    before: StrictInt | StrictStr | None = None


class JsonFieldRequest(BaseModel):
    """The payload is JSON and the value at ``path`` (dot-separated) equals ``equals``."""

    model_config = ConfigDict(extra="forbid")
    path: StrictStr
    equals: Any


class MatchConditions(BaseModel):
    """The predicate document (CLI, REST, DAG run conf); every given condition must hold.

    See :mod:`cursorops.core.domain.analysis.predicates` for what each condition means.
    ``jsonField`` is given in the document only; every other condition has a :class:`Shortcut`.
    """

    model_config = ConfigDict(extra="forbid")
    key: Annotated[StrictStr | None, Shortcut("key", "Message key equals")] = None
    properties: Annotated[
        dict[StrictStr, StrictStr] | None, Shortcut("property", "NAME=VALUE, all must hold")
    ] = None
    publishTime: Annotated[TimeRangeRequest | None, Shortcut("publish_time", "Published")] = None  # noqa: N815 - Pulsar's REST spelling
    deliverAt: Annotated[TimeRangeRequest | None, Shortcut("deliver_at", "Due")] = None  # noqa: N815
    payloadContains: Annotated[  # noqa: N815
        StrictStr | None, Shortcut("payload_contains", "Payload contains (UTF-8 text)")
    ] = None
    jsonField: JsonFieldRequest | None = None  # noqa: N815
    producer: Annotated[
        StrictStr | None, Shortcut("producer", "Producer name equals (exactly)")
    ] = None


OptionKind = Literal["text", "pairs", "time"]
Side = Literal["after", "before"]
_BOUNDS: tuple[tuple[Side, str], ...] = (("after", "at or after"), ("before", "before"))


@dataclass(frozen=True)
class MatchOption:
    """One flat option of a condition, derived from a :class:`MatchConditions` field."""

    name: str
    """``key``, ``property``, ``publish_time_after``: a DAG param's name, a flag's dest."""
    field: str
    """The document's field it sets: ``key``, ``properties``, ``publishTime``."""
    kind: OptionKind
    """``text``: one value; ``pairs``: repeated ``NAME=VALUE``; ``time``: one bound."""
    help: str
    side: Side | None = None
    """A time option's bound in the field's range."""

    @property
    def flag(self) -> str:
        """The command-line flag: ``--publish-time-after``."""
        return "--" + self.name.replace("_", "-")


def _options() -> tuple[MatchOption, ...]:
    options: list[MatchOption] = []
    for field, info in MatchConditions.model_fields.items():
        shortcut = next((m for m in info.metadata if isinstance(m, Shortcut)), None)
        if shortcut is None:
            continue
        types = get_args(info.annotation) or (info.annotation,)
        if TimeRangeRequest in types:
            options += [
                MatchOption(
                    f"{shortcut.name}_{side}",
                    field,
                    "time",
                    f"{shortcut.help} {bound}: {TIME_HELP}",
                    side,
                )
                for side, bound in _BOUNDS
            ]
        elif any(get_origin(t) is dict for t in types):
            options.append(MatchOption(shortcut.name, field, "pairs", shortcut.help))
        else:
            options.append(MatchOption(shortcut.name, field, "text", shortcut.help))
    return tuple(options)


MATCH_OPTIONS: tuple[MatchOption, ...] = _options()
"""Every flat option, in the order of :class:`MatchConditions`' fields."""


def predicate_from_options(
    document: Mapping[str, Any] | None,
    *,
    source: str = "--predicate",
    property_option: str = "--property",
    **options: str | int | Sequence[str] | None,
) -> dict[str, Any]:
    """A predicate document: ``document`` (may be None) plus the given flat options.

    ``options`` are :data:`MATCH_OPTIONS` by name; None (or no pairs) is not given.
    ``NAME=VALUE`` texts may hold ``=`` in the value. A field given both in
    ``document`` and as an option is refused rather than one silently winning.
    ``source`` and ``property_option`` are how the caller's users name the
    document and the pairs option, so each error names the flag or parameter
    they typed. Only the shape is checked here; hand the result to
    :func:`cursorops.core.domain.analysis.predicates.parse_predicate`.
    """
    unknown = sorted(set(options) - {o.name for o in MATCH_OPTIONS})
    if unknown:
        raise TypeError(f"Unknown match option(s): {', '.join(unknown)}")
    given: dict[str, Any] = {}
    for option in MATCH_OPTIONS:
        value = options.get(option.name)
        if value is None or (option.kind == "pairs" and not value):
            continue
        if option.kind == "pairs":
            if isinstance(value, str | int):
                raise TypeError(f"{option.name}: expected a sequence of NAME=VALUE texts")
            given[option.field] = _pairs(value, property_option)
        elif option.kind == "time":
            given.setdefault(option.field, {})[option.side] = value
        else:
            given[option.field] = value
    built = dict(document or {})
    clash = sorted(set(built) & set(given))
    if clash:
        raise InvalidPredicateError(
            f"Invalid predicate: {', '.join(clash)} given both in {source} and as an option"
        )
    built.update(given)
    return built


def _pairs(texts: Sequence[str], option: str) -> dict[str, str]:
    pairs = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise InvalidPredicateError(f"Invalid {option} '{text}': expected NAME=VALUE")
        pairs[name] = value
    return pairs
