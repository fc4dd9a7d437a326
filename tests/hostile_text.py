"""Text someone else wrote, at its most hostile: one strategy every surface's property test
draws from (the Markdown of the approval, the terminal, the Cursors pages, the chart legend).

Bidirectional controls, zero-width characters, newlines and other controls, Markdown and
HTML, any script, and 20,000 characters without a break.
"""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

from cursorops.core.domain.legible import HIDDEN

ATTACKS = (
    "**APPROVED** | \u202eevil",
    "inv\u202egnp.exe",
    "pii\u200b=yes",
    "one\ntwo\r\nthree\u2028four",
    "<script>alert(1)</script><!-- hidden --><b>bold</b>&amp;",
    "[link](javascript:alert(1)) `code` | cell | # heading",
    "Rückbuchung für Kunde 顧客 🧾 OPS\u20119 שלום",
    "\u2066isolated\u2069\u200f\u061c\ufeff\u00ad",
    "x" * 20_000,
    "\u202e" + "ab" * 10_000,
    "f" * 64,
)

PIECES = st.one_of(
    st.sampled_from(list("<>!-*_`|[]()#&;:\\/'\"\n\r\t ")),
    st.sampled_from(["\u202e", "\u202d", "\u2066", "\u200b", "\u200d", "\ufeff", "\x00", "\u2028"]),
    st.characters(exclude_categories=("Cs",)),
)
HOSTILE = st.one_of(
    st.sampled_from(ATTACKS),
    st.text(alphabet=PIECES, max_size=200),
    st.builds(lambda a, b: a + b, st.sampled_from(ATTACKS), st.text(alphabet=PIECES, max_size=40)),
)
"""Hostile text: a known attack, random text of those pieces, or an attack with more."""


def hidden_in(text: str) -> list[str]:
    """The characters of ``text`` that would reorder, hide or forge a line if shown raw."""
    return [c for c in text if unicodedata.category(c) in HIDDEN]
