"""Parsing of command-line values: durations, times, ``k=v`` pairs, lists.

Every function raises :class:`~core.errors.InvalidArgumentError` (or
:class:`~core.errors.InvalidMessageIdError`) with a message naming the option,
so a bad value is one line on stderr and nothing is changed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from core import message_id
from core.errors import InvalidArgumentError
from core.position import Position
from core.topic_name import shown

_DAY_MS = 86_400_000
# pulsar-admin's RelativeTimeUtil units (a year is 365 days there too), plus ms.
_UNIT_MS = {
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "h": 3_600_000,
    "d": _DAY_MS,
    "w": 7 * _DAY_MS,
    "y": 365 * _DAY_MS,
}
_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
_INT64_MAX = 2**63 - 1


def parse_duration_ms(text: str, option: str) -> int:
    """``10s``, ``5m``, ``1h``, ``2d``, ``1w`` (also ``250ms``, ``1y``) as milliseconds.

    One number and one unit, no sign, as pulsar-admin's relative times.
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: expected a duration such as 30s, 10m, 1h or 2d"
        )
    duration_ms = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if duration_ms > _INT64_MAX:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: longer than the int64 milliseconds a time holds"
        )
    return duration_ms


def deliver_after_ms(text: str, option: str, now_ms: int) -> int:
    """``now_ms`` plus a duration: the epoch ms a delayed message becomes deliverable."""
    deliver_at = now_ms + parse_duration_ms(text, option)
    if deliver_at > _INT64_MAX:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: the delivery time would be past the int64 "
            "epoch milliseconds a message holds"
        )
    return deliver_at


def parse_time_ms(text: str, option: str, now_ms: int) -> int:
    """A point in time as epoch milliseconds.

    Three forms, like pulsar-admin's ``reset-cursor -t`` and more:

    - a relative duration (``10m``, ``1h``, ``2d``): that long before ``now_ms``;
    - digits only: epoch milliseconds;
    - ISO-8601 (``2026-05-01T12:00:00Z``, ``2026-05-01 12:00+02:00``); without
      an offset the time is read as UTC.
    """
    value = text.strip()
    if _DURATION.fullmatch(value):
        epoch_ms = now_ms - parse_duration_ms(value, option)
    elif value.isascii() and value.isdigit():
        epoch_ms = int(value)
    else:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(
                f"Invalid {option} {shown(text)}: expected a relative duration (10m, 1h, 2d), "
                "epoch milliseconds or an ISO-8601 time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        epoch_ms = int(moment.timestamp() * 1000)
    # Times are stored as int64 epoch ms, and Pulsar's are never before the epoch.
    if not 0 <= epoch_ms <= _INT64_MAX:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: outside the epoch milliseconds 0..2^63-1"
        )
    return epoch_ms


def parse_pairs(
    texts: Sequence[str] | None, option: str, *, split_commas: bool = False
) -> dict[str, str]:
    """``k=v`` items as a dict; the last value wins.

    With ``split_commas`` each item may hold several, ``k1=v1,k2=v2``, as
    pulsar-client's ``produce -p``; pulsar-admin's ``--property`` takes one per flag.
    """
    pairs: dict[str, str] = {}
    for text in texts or ():
        for item in text.split(",") if split_commas else [text]:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise InvalidArgumentError(f"Invalid {option} {shown(item)}: expected key=value")
            pairs[utf8_text(key.strip(), option)] = utf8_text(value, option)
    return pairs


def parse_list(text: str, option: str) -> list[str]:
    """``a,b,c`` as a list, blanks dropped; at least one item."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: expected a comma-separated list"
        )
    return items


def parse_position(text: str, option: str) -> Position:
    """``ledgerId:entryId`` (pulsar-admin ``reset-cursor --messageId``): core's one parser."""
    return message_id.parse_position(text, option)


def positive(value: int, option: str, maximum: int | None = None) -> int:
    if value < 1:
        raise InvalidArgumentError(f"Invalid {option} {value}: must be at least 1")
    if maximum is not None and value > maximum:
        raise InvalidArgumentError(f"Invalid {option} {value}: must be at most {maximum:,}")
    return value


def utf8_text(text: str, option: str) -> str:
    """A command-line value that must be text: undecodable bytes are refused.

    Python hands undecodable argv bytes over as lone surrogates (surrogateescape).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"Invalid {option} {shown(text)}: not valid UTF-8") from None
    return text


def payload_bytes(text: str) -> bytes:
    """A payload exactly as the bytes given on the command line, UTF-8 or not."""
    return os.fsencode(text)
