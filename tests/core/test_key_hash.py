"""Key_Shared hashing: Murmur3 as Pulsar computes it, and the consistent-hashing ring."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cursorops.core.domain.delivery.key_hash import (
    HASH_RANGE_SIZE,
    HashRing,
    murmur3_32,
    sticky_key_hash,
)


def test_murmur3_32_reference_vectors() -> None:
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"", 1) == 0x514E28B7
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


@given(st.text(max_size=40) | st.none())
def test_sticky_key_hash_is_in_pulsars_hash_space(key: str | None) -> None:
    assert 0 <= sticky_key_hash(key) < HASH_RANGE_SIZE


def test_a_missing_key_hashes_as_pulsars_none_key() -> None:
    assert sticky_key_hash(None) == sticky_key_hash("NONE_KEY")


def test_empty_ring_selects_nobody() -> None:
    assert HashRing([]).select(123) is None


@settings(max_examples=100)
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique=True),
    st.text(min_size=1, max_size=8),
)
def test_a_joining_consumer_only_takes_hashes_never_moves_others(
    members: list[str], newcomer: str
) -> None:
    """Consistent hashing: on join, a hash either stays or moves to the newcomer."""
    if newcomer in members:
        return
    before = HashRing(members)
    after = HashRing([*members, newcomer])
    assert HashRing(list(reversed(members))).select(7) == before.select(7)
    for key_hash in range(0, HASH_RANGE_SIZE, 97):
        owner = after.select(key_hash)
        assert owner in (before.select(key_hash), newcomer)
