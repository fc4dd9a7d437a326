"""cursorops.core.domain.legible: hidden characters spelled out, every other one kept."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.legible import CELL_CHARS, HIDDEN, columns, cut, legible
from tests.hostile_text import HOSTILE, hidden_in


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


@settings(max_examples=500, deadline=None)
@given(HOSTILE, st.integers(1, 300))
def test_a_cut_is_said_exactly_and_hides_nothing(text: str, width: int) -> None:
    """The terminal's and the chart's cut: a beginning of the legible text, never half a
    spelled-out code point, then how many characters are left out."""
    shown = cut(text, width)
    assert not hidden_in(shown)
    whole = legible(text)
    said = re.fullmatch(r"(.*)… \(([\d,]+) more characters\)", shown, re.S)
    if said is None:
        assert shown == whole and len(whole) <= width
        return
    head, more = said.group(1), int(said.group(2).replace(",", ""))
    assert whole.startswith(head) and len(head) + more == len(whole)
    assert width - 9 <= len(head) <= width
    assert not re.search(r"\\u\{[0-9A-F]*$", head)


APP_JS = Path(__file__).resolve().parents[2] / "cursorops" / "rest" / "ui_static" / "app.js"


def test_the_pages_and_the_terminal_cut_a_value_at_the_same_length() -> None:
    """One rule: app.js's CELL_CHARS is this module's (the CLI's text output cuts there)."""
    found = re.search(r"^const CELL_CHARS = (\d+);", APP_JS.read_text(), re.M)
    assert found is not None and int(found.group(1)) == CELL_CHARS


def test_columns_are_what_a_terminal_gives_the_text() -> None:
    assert columns("plain") == 5
    assert columns(legible("inv\u202egnp")) == len("inv\\u{202E}gnp")
    assert columns("顧客") == 4
    assert columns("🧾") == 2
    assert columns("e\u0301") == 1  # a combining mark takes no column of its own
    assert columns("Ｆ") == 2  # full-width


@given(HOSTILE)
def test_a_legible_text_takes_at_least_a_column_per_visible_character(text: str) -> None:
    shown = legible(text)
    marks = sum(1 for c in shown if unicodedata.combining(c) or unicodedata.category(c) == "Me")
    assert len(shown) - marks <= columns(shown) <= 2 * len(shown)
