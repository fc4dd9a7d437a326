"""Text in any script in an HTTP header: RFC 8187's ``ext-value``.

An HTTP header carries Latin-1 at best, so a reason such as ``Rückbuchung für
Kunde``, a ticket with a non-breaking hyphen or a CJK note cannot travel in one
as it is. A door that sends such text in a header (``X-Cursorops-Reason``,
``X-Cursorops-Ticket``) sends :func:`header_value` of it: ``UTF-8''`` then the
text's UTF-8 bytes percent-encoded, which is ASCII. The REST app reads
:func:`header_text` of what arrives: an ``UTF-8''`` value decoded, any other
value as it is (plain ASCII from an older client). A value that claims UTF-8
and is not is refused, never guessed at.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from cursorops.core.domain.errors import InvalidArgumentError

PREFIX = "UTF-8''"


def header_value(text: str) -> str:
    """``text`` as an RFC 8187 ``ext-value`` (ASCII, whatever ``text`` holds)."""
    return PREFIX + quote(text, safe="")


def header_text(value: str, what: str = "header") -> str:
    """The text a header ``value`` carries: an ``UTF-8''`` ``ext-value`` decoded (the
    charset name in any case), anything else as it came."""
    if value[: len(PREFIX)].upper() != PREFIX.upper():
        return value
    try:
        return unquote(value[len(PREFIX) :], encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"Invalid {what}: its UTF-8'' value is not percent-encoded UTF-8"
        ) from exc


__all__ = ["PREFIX", "header_text", "header_value"]
