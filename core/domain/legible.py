"""Text someone else wrote, legible wherever a person reads it.

A subscription name, a message key, a property, a payload or a reason is written
by someone other than the person who reads it. Shown raw, a right-to-left
override (U+202E) reorders what follows it (``inv\\u202Egnp.exe`` reads
"invexe.png"), a zero-width character hides, and a newline forges a line of its
own. :func:`legible` spells every such character out as its code point,
``\\u{202E}``, and leaves every other character, in any script, as it is.

The characters spelled out are those of the Unicode general categories
:data:`HIDDEN`: controls (``Cc``: newline, tab, escape, ...), format characters
(``Cf``: bidirectional controls, zero-width joiners, ...), line and paragraph
separators, private-use, surrogate and unassigned code points. The approver's
Markdown (``cursorops.core.services.gating.inert``) spells them out by the same rule.

A long value is cut where it is read (:func:`cut`): the Cursors pages
(``cursorops/rest/ui_static/app.js``'s ``cutText``) and the CLI's text output show
:data:`CELL_CHARS` of it, then ``… (N more characters)``; JSON keeps it whole. A
terminal's columns are aligned by :func:`columns`, the width the legible text takes.
"""

from __future__ import annotations

import re
import unicodedata

HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
CELL_CHARS = 160
"""What a value shows of someone else's text before the cut, in a page's table cell (held
equal to app.js's ``CELL_CHARS`` by a test) and in the CLI's text output."""
_PARTIAL = re.compile(r"\\u\{[0-9A-F]{0,6}$")


def is_hidden(char: str) -> bool:
    """Whether ``char`` would act on the text around it, or not show, if printed raw."""
    return unicodedata.category(char) in HIDDEN


def code_point(char: str) -> str:
    """``char`` spelled out: ``\\u{202E}``."""
    return "\\u{" + f"{ord(char):04X}" + "}"


def legible(text: str) -> str:
    """``text`` with every hidden character spelled out as its code point."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(code_point(c) if is_hidden(c) else c for c in text)


def cut_end(shown: str, end: int) -> int:
    """Where to cut the legible text ``shown`` at most ``end`` characters in: before a
    spelled-out code point that would be cut in two (``\\u{20`` reads as nothing)."""
    partial = _PARTIAL.search(shown, max(0, end - 9), end)
    return partial.start() if partial and end < len(shown) else end


def cut(text: str, width: int) -> str:
    """``text`` legible, cut after ``width`` characters with the cut said: ``… (N more
    characters)``, counted in the legible text (what takes room where it is shown)."""
    shown = legible(text)
    if len(shown) <= width:
        return shown
    end = cut_end(shown, width)
    return f"{shown[:end]}… ({len(shown) - end:,} more characters)"


def columns(shown: str) -> int:
    """The terminal columns the legible text ``shown`` takes: two for a wide or
    full-width character (CJK, most emoji), none for a combining mark, one for any other.
    A hidden character counts as its spelled-out form; give legible text."""
    if shown.isascii():
        return len(shown)
    width = 0
    for char in shown:
        if unicodedata.combining(char) or unicodedata.category(char) == "Me":
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


__all__ = [
    "CELL_CHARS",
    "HIDDEN",
    "code_point",
    "columns",
    "cut",
    "cut_end",
    "is_hidden",
    "legible",
]
