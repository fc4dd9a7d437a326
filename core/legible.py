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
Markdown (``airflow_glue.inert``) spells them out by the same rule.
"""

from __future__ import annotations

import unicodedata

HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


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


__all__ = ["HIDDEN", "code_point", "is_hidden", "legible"]
