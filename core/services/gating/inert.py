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
  zero-width characters: :mod:`cursorops.core.domain.legible`'s rule) are spelled out as their
  code point, e.g. a right-to-left override reads ``\\u{202E}`` (escaped in turn);
- the result is cut, with the cut said: after ``limit`` characters, and where a run
  without a space grows past ``run`` characters (:data:`RUN_CHARS`; a table cell's are
  shorter, :func:`cell`). A renderer breaks lines only at
  spaces, so an unbroken run is as wide as its characters: cut there, no value widens its
  paragraph or table past the approver's pane. The whole value is one click away, on the
  Cursors page, and in ``-o json``.

Lengths count the legible text (a hidden character is its spelled-out code point), which is
what takes room on the page.
"""

from __future__ import annotations

import re
import string

from cursorops.core.domain.legible import cut_end, legible

_PUNCTUATION = frozenset(string.punctuation)
MAX_CHARS = 500
RUN_CHARS = 48
"""The longest run without a space a paragraph shows: under 500 px in Airflow's font."""
CELL_CHARS = 120
CELL_RUN_CHARS = 24
"""What a table cell shows, and its longest run without a space: a row with three such
cells of producer text (key, properties, payload) and the plan's own columns keeps its table
inside a 1,000 px pane."""


def _visible(char: str) -> str:
    return "\\" + char if char in _PUNCTUATION else char


def inert(value: object, limit: int = MAX_CHARS, run: int = RUN_CHARS) -> str:
    """``value`` as Markdown that renders as exactly its legible text, cut after ``limit``
    characters or inside a run without a space longer than ``run``."""
    text = legible("" if value is None else str(value))
    long_run = re.search(rf"\S{{{run + 1}}}", text)
    end = cut_end(text, min(limit, long_run.start() + run if long_run else limit))
    shown = "".join(_visible(c) for c in text[:end])
    return shown + (f" … ({len(text) - end} more characters)" if len(text) > end else "")


def cell(value: object) -> str:
    """``value`` in a Markdown table cell: :func:`inert` with a cell's cuts."""
    return inert(value, CELL_CHARS, CELL_RUN_CHARS)
