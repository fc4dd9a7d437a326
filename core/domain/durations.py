"""The one time and duration grammar, used by the CLI, the predicates and the Spark jobs.

A duration is one number and one unit, no sign, as pulsar-admin's relative
times (``RelativeTimeUtil``: ``s``, ``m``, ``h``, ``d``, ``w``, ``y``, a year
being 365 days), plus ``ms``. A bare number is refused: ``90`` could mean
seconds or milliseconds, so it is written ``90s`` or ``90ms``.

A point in time is epoch milliseconds (an int or digits), ISO-8601 (UTC when
no offset is given) or, when the caller has a clock, ``now`` or a duration
before now (``10m``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from cursorops.core.domain.errors import CursorOpsError, InvalidArgumentError
from cursorops.core.domain.ids.topic_name import shown

_DAY_MS = 86_400_000
UNIT_MS = {
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "h": 3_600_000,
    "d": _DAY_MS,
    "w": 7 * _DAY_MS,
    "y": 365 * _DAY_MS,
}
"""Milliseconds per unit."""

INT64_MAX = 2**63 - 1
"""Times and durations are stored as int64 milliseconds."""

_DURATION = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
# At most 4,300 digits: int() refuses longer strings by default (ValueError).
_ASCII_INTEGER = re.compile(r"-?[0-9]{1,4300}", re.ASCII)


def ascii_integer(text: str) -> int | None:
    """``text`` as an integer when it is ASCII decimal digits with an optional '-', else None.

    The rule for every count on a command line, as for ids and times: ``int()`` alone
    also takes '１２', '٣', '+2', ' 2' and '1_0'.
    """
    return int(text) if _ASCII_INTEGER.fullmatch(text) else None


def parse_duration_ms(
    text: str, what: str, *, error: type[CursorOpsError] = InvalidArgumentError
) -> int:
    """``30s``, ``10m``, ``1h``, ``2d``, ``1w``, ``1y`` (also ``250ms``) as milliseconds.

    ``what`` names the value in the one-line ``error``.
    """
    value = text.strip()
    if value.isascii() and value.isdigit():
        raise error(f"Invalid {what} {shown(value)}: add a unit, such as {value}s or {value}m")
    match = _DURATION.fullmatch(value)
    if match is None:
        raise error(f"Invalid {what} {shown(text)}: expected a duration such as 30s, 10m, 1h or 2d")
    duration_ms = int(match.group(1)) * UNIT_MS[match.group(2)]
    if duration_ms > INT64_MAX:
        raise error(
            f"Invalid {what} {shown(text)}: longer than the int64 milliseconds a time holds"
        )
    return duration_ms


def is_duration(text: str) -> bool:
    """Whether ``text`` is written as a duration (a number and a unit)."""
    return _DURATION.fullmatch(text.strip()) is not None


def parse_time_ms(
    value: int | str,
    what: str,
    now_ms: int | None = None,
    *,
    error: type[CursorOpsError] = InvalidArgumentError,
) -> int:
    """A point in time as epoch milliseconds, in ``0..2^63-1`` (Pulsar's are never before
    the epoch). Relative forms (``now``, ``10m``) need ``now_ms``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise error(f"Invalid {what}: expected a time, got {value!r}")
    if isinstance(value, int):
        return _in_range(value, str(value), what, error)
    text = value.strip()
    if text.lstrip("-").isascii() and text.lstrip("-").isdigit():
        return _in_range(int(text), value, what, error)
    if now_ms is not None:
        if text.lower() == "now":
            return now_ms
        if is_duration(text):
            return _in_range(
                now_ms - parse_duration_ms(text, what, error=error), value, what, error
            )
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        relative = ", 'now' or a duration before now (10m, 1h, 2d)" if now_ms is not None else ""
        raise error(
            f"Invalid {what} {shown(value)}: expected epoch milliseconds or an ISO-8601 "
            f"time{relative}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range(int(moment.timestamp() * 1000), value, what, error)


def format_time_ms(epoch_ms: int | None) -> str:
    """A point in time as a person reads it: ISO-8601 in UTC to the millisecond; empty for
    None or a negative value (no time)."""
    if epoch_ms is None or epoch_ms < 0:
        return ""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _in_range(epoch_ms: int, text: str, what: str, error: type[CursorOpsError]) -> int:
    if not 0 <= epoch_ms <= INT64_MAX:
        raise error(
            f"Invalid {what} {shown(text)}: out of range, outside the epoch milliseconds 0..2^63-1"
        )
    return epoch_ms
