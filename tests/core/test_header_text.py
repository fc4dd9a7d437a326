"""Text in any script through an HTTP header (cursorops.core.domain.header_text)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.header_text import header_text, header_value

SCRIPTS = [
    "Rückbuchung für Kunde",
    "顧客の返金",
    "refund 🧾💸",
    "OPS\u20119",
    "a\u202eb",
    "UTF-8''looks encoded",
    "",
]


@pytest.mark.parametrize("text", SCRIPTS)
def test_text_in_any_script_round_trips_as_ascii(text: str) -> None:
    value = header_value(text)
    assert value.isascii() and value.startswith("UTF-8''")
    assert header_text(value) == text


@given(st.text())
def test_every_text_round_trips(text: str) -> None:
    value = header_value(text)
    value.encode("latin-1")  # what an HTTP client can send
    assert header_text(value) == text


def test_a_plain_value_is_read_as_it_came_and_the_charset_in_any_case() -> None:
    assert header_text("poison pill") == "poison pill"
    assert header_text("utf-8''R%C3%BCck") == "Rück"


def test_a_value_that_claims_utf8_and_is_not_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="not percent-encoded UTF-8"):
        header_text("UTF-8''%FF%FE", "X-Cursorops-Reason")
