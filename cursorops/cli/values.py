"""Parsing of command-line values: durations, times, ``k=v`` pairs, lists.

Every function raises :class:`~cursorops.core.domain.errors.InvalidArgumentError` (or
:class:`~cursorops.core.domain.errors.InvalidMessageIdError`) with a message naming the option,
so a bad value is one line on stderr and nothing is changed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cursorops.core.domain import durations
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.ids.topic_name import shown

if TYPE_CHECKING:
    from cursorops.core.domain.ids.position import Position


def parse_duration_ms(text: str, option: str) -> int:
    """A duration in :mod:`cursorops.core.domain.durations`' grammar (``30s``, ``10m``, ``1h``) as
    milliseconds."""
    return durations.parse_duration_ms(text, option)


def deliver_after_ms(text: str, option: str, now_ms: int) -> int:
    """``now_ms`` plus a duration: the epoch ms a delayed message becomes deliverable."""
    deliver_at = now_ms + parse_duration_ms(text, option)
    if deliver_at > durations.INT64_MAX:
        raise InvalidArgumentError(
            f"Invalid {option} {shown(text)}: the delivery time would be past the int64 "
            "epoch milliseconds a message holds"
        )
    return deliver_at


def parse_time_ms(text: str, option: str, now_ms: int) -> int:
    """A point in time as epoch milliseconds, like pulsar-admin's ``reset-cursor -t`` and more:
    a duration before ``now_ms`` (``10m``), ``now``, epoch milliseconds or ISO-8601 (UTC when
    no offset is given); :mod:`cursorops.core.domain.durations` has the grammar."""
    return durations.parse_time_ms(text, option, now_ms)


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


def parse_position(text: str, option: str, partition: int = -1) -> Position:
    """The entry a message id names (pulsar-admin ``reset-cursor --messageId``), in any
    form; ``partition``, the one the command's topic names: core's one parser."""
    from cursorops.core.domain.ids import message_id  # numpy: only the commands that take an id

    return message_id.parse_position(text, option, partition)


def ascii_int(text: str) -> int:
    """An integer option (argparse ``type``):
    :func:`cursorops.core.domain.durations.ascii_integer`'s rule."""
    number = durations.ascii_integer(text)
    if number is None:
        raise argparse.ArgumentTypeError(
            f"invalid integer {shown(text)}: use ASCII decimal digits 0-9"
        )
    return number


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


def port(value: int, option: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    if not 0 <= value <= 65535:
        raise InvalidArgumentError(f"Invalid {option} {value}: expected 0..65535")
    return value


def given_ids(args: argparse.Namespace) -> tuple[list[str], str]:
    """The ids ``skip-messages`` was given, and the option that gave them: each option
    reads every form (:meth:`MessageId.parse
    <cursorops.core.domain.ids.message_id.MessageId.parse>`)."""
    for texts, option in (
        (args.message_ids, "--message-id"),
        (args.triplets, "--messageId-triplet"),
        (args.base64_ids, "--messageId-base64"),
    ):
        if texts:
            return list(texts), option
    return [], "--message-id"
