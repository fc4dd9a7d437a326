"""The one mechanism behind every edge's error table: families, overrides, MRO lookup."""

from __future__ import annotations

from cursorops.core.domain import errors
from cursorops.core.domain.errors import (
    ConflictError,
    CursorOpsError,
    InvalidInputError,
    InvalidTopicNameError,
    OutcomeTable,
    SubscriptionBusyError,
    leaf_classes,
)

TABLE = OutcomeTable(
    families={InvalidInputError: "bad", ConflictError: "conflict"},
    overrides={SubscriptionBusyError: "busy"},
    default="other",
)


def test_leaves_take_their_override_else_their_family_and_unmapped_leaves_are_left_out() -> None:
    leaves = TABLE.leaves()
    for leaf in leaf_classes():
        if leaf is SubscriptionBusyError:
            assert leaves[leaf] == "busy"
        elif issubclass(leaf, InvalidInputError):
            assert leaves[leaf] == "bad", leaf
        elif issubclass(leaf, ConflictError):
            assert leaves[leaf] == "conflict", leaf
        else:
            assert leaf not in leaves, leaf
    assert InvalidInputError not in leaves  # families are not leaves


def test_an_error_takes_its_nearest_mapped_class_along_its_mro() -> None:
    # No subclass is defined here: it would add a leaf to the tree for every later test.
    assert TABLE.of(InvalidTopicNameError("x")) == "bad"
    assert TABLE.of(ConflictError("x")) == "conflict"
    assert TABLE.of(SubscriptionBusyError("x")) == "busy"
    assert TABLE.of(errors.MetadataStoreError("x")) == "other"
    assert TABLE.of(CursorOpsError("x")) == "other"
    assert TABLE.of(ValueError("x")) == "other"


def test_an_override_of_an_ancestor_beats_a_farther_family() -> None:
    table = OutcomeTable(
        families={CursorOpsError: "any", InvalidInputError: "bad"},
        overrides={ConflictError: "conflict"},
        default="other",
    )
    assert table.of(SubscriptionBusyError("x")) == "conflict"
    assert table.of(InvalidTopicNameError("x")) == "bad"
    assert table.of(errors.LedgerStoreError("x")) == "any"
    assert set(table.leaves()) == set(leaf_classes())


def test_a_falsy_outcome_is_still_an_outcome() -> None:
    table = OutcomeTable(families={ConflictError: 0}, default=1)
    assert table.of(SubscriptionBusyError("x")) == 0
    assert table.leaves()[SubscriptionBusyError] == 0
