"""A request's reason and ticket are limited in characters, as the person typed them."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.services.gating.inert import MAX_CHARS
from cursorops.core.services.gating.operation import REASON_CHARS, TICKET_CHARS, GatedArguments

TOPIC = "persistent://acme/ops/orders"


def test_a_reason_and_a_ticket_at_their_limits_pass_in_any_script() -> None:
    for wide in ("€", "顧", "😀"):
        made = GatedArguments(
            topic=TOPIC, subscription="s", reason=wide * REASON_CHARS, ticket=wide * TICKET_CHARS
        )
        assert len(made.reason) == REASON_CHARS and len(made.ticket or "") == TICKET_CHARS


@pytest.mark.parametrize(
    ("reason", "ticket", "refusal"),
    [
        ("€" * 501, None, "reason is 501 characters; at most 500"),
        ("x" * 2_000, None, "reason is 2,000 characters; at most 500"),
        ("ok", "😀" * 257, "ticket is 257 characters; at most 256"),
    ],
)
def test_a_longer_one_is_refused_in_characters(
    reason: str, ticket: str | None, refusal: str
) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        GatedArguments(topic=TOPIC, subscription="s", reason=reason, ticket=ticket)
    assert str(refused.value) == refusal


def test_what_is_counted_is_what_is_kept() -> None:
    """Spaces around are not the reason: they are dropped before it is counted."""
    padded = " " * 10 + "r" * REASON_CHARS + "\n"
    assert GatedArguments(topic=TOPIC, subscription="s", reason=padded).reason == "r" * 500


def test_the_approver_reads_a_reason_whole() -> None:
    assert REASON_CHARS == MAX_CHARS
