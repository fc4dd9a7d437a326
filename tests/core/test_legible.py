"""core.legible: hidden characters spelled out, every other one kept."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from core.legible import HIDDEN, legible


def test_what_would_reorder_hide_or_forge_a_line_is_spelled_out() -> None:
    assert legible("inv\u202egnp.exe") == "inv\\u{202E}gnp.exe"
    assert legible("a\u200bb\nc\td") == "a\\u{200B}b\\u{000A}c\\u{0009}d"
    assert legible("Grüße 顧客 🧾 OPS\u20119") == "Grüße 顧客 🧾 OPS\u20119"


@given(st.text())
def test_nothing_hidden_is_left_and_the_rest_reads_as_written(text: str) -> None:
    shown = legible(text)
    assert not any(unicodedata.category(c) in HIDDEN for c in shown)
    spelled = re.sub(
        r"\\u\{([0-9A-F]{4,6})\}",
        lambda m: chr(int(m.group(1), 16)),
        shown,
    )
    if "\\u{" not in text:  # a text that spells a code point itself reads as it
        assert spelled == text
