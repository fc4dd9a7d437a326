"""Text someone else wrote, made inert for the Markdown an approver reads.

Airflow renders an approval's body as Markdown (GitHub's dialect: tables, raw
HTML dropped or hidden). A requester's reason, a ticket, a predicate, a
subscription name, a producer's key, properties and payload are all written by
someone other than the approver, so each goes through :func:`inert` before it
is placed in the text: it then reads exactly as written, on one line, and can
never become markup, hide (``<!-- ... -->``), forge a line of its own, break
out of its table cell, or reorder what follows it (bidirectional controls).

- every ASCII punctuation character is backslash-escaped (CommonMark allows it
  for all of them), so no ``<``, ``*``, ``|``, `````, ``[`` or ``&`` is markup;
- line breaks and every other control or format character (bidi overrides,
  zero-width characters: :mod:`core.legible`'s rule) are spelled out as their
  code point, e.g. a right-to-left override reads ``\\u{202E}`` (escaped in turn);
- the result is cut at a length, with the cut said.
"""

from __future__ import annotations

import string

from core.legible import is_hidden

_PUNCTUATION = frozenset(string.punctuation)
MAX_CHARS = 500


def _visible(char: str) -> str:
    if char in _PUNCTUATION:
        return "\\" + char
    if is_hidden(char):  # core.legible's rule, its braces escaped for Markdown
        return "\\\\u\\{" + f"{ord(char):04X}" + "\\}"
    return char


def inert(value: object, limit: int = MAX_CHARS) -> str:
    """``value`` as Markdown that renders as exactly its text (cut after ``limit`` chars)."""
    text = "" if value is None else str(value)
    cut = len(text) > limit
    shown = "".join(_visible(c) for c in text[:limit])
    return shown + (f" … ({len(text) - limit} more characters)" if cut else "")
