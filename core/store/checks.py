"""Argument checks the metadata store runs before any SQL: names, labels, numbers, maps.

Each raises :class:`~cursorops.core.domain.errors.InvalidArgumentError` with a one-line message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.topic_name import (
    MAX_NAME_CHARS,
    TopicName,
    is_valid_entity_name,
    label_problem,
    shown,
)


def check_name(kind: str, value: object) -> str:
    """A tenant or namespace name: Pulsar's NamedEntity rule and a length cap."""
    if not is_valid_entity_name(value):
        text = shown(value) if isinstance(value, str) else repr(value)
        raise InvalidArgumentError(
            f"Invalid {kind} name {text}: use 1 to {MAX_NAME_CHARS} of letters, digits "
            "and _ = : . -, not . or .."
        )
    assert isinstance(value, str)
    return value


def check_label(kind: str, value: object) -> str:
    """A subscription or role name: text without control characters, checked before SQL."""
    problem = label_problem(value)
    if problem is not None:
        text = shown(value) if isinstance(value, str) else repr(value)
        raise InvalidArgumentError(f"Invalid {kind} {text}: {problem}")
    assert isinstance(value, str)
    return value


def check_text(kind: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"Invalid {kind} {value!r}: expected a non-empty string")
    return value


def check_int(kind: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"Invalid {kind} {value!r}: expected an integer >= {minimum}")
    return value


def check_bytes(kind: str, value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"Invalid {kind}: expected bytes, got {type(value).__name__}")
    return bytes(value)


def check_roles(kind: str, roles: Iterable[str]) -> frozenset[str]:
    if isinstance(roles, str):
        raise InvalidArgumentError(f"Invalid {kind} {roles!r}: expected a collection of roles")
    return frozenset(check_label("role", role) for role in roles)


def check_string_map(kind: str, mapping: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(mapping, Mapping):
        raise InvalidArgumentError(f"Invalid {kind}: expected a mapping of strings")
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(f"Invalid {kind}: {key!r}={value!r} is not string=string")
        for item in (key, value):
            # PostgreSQL refuses NUL in text and JSON; a lone surrogate is not UTF-8.
            if "\x00" in item or not is_utf8(item):
                raise InvalidArgumentError(
                    f"Invalid {kind}: {shown(key)}={shown(value)} holds NUL or non-UTF-8 text"
                )
    return dict(mapping)


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_topic(topic: str) -> str:
    return str(TopicName.parse(topic))


def split_namespace(namespace: object) -> tuple[str, str]:
    if not isinstance(namespace, str) or namespace.count("/") != 1:
        raise InvalidArgumentError(f"Invalid namespace {namespace!r}: expected tenant/namespace")
    tenant, local = namespace.split("/")
    check_name("tenant", tenant)
    check_name("namespace", local)
    return tenant, local
