"""The Airflow edge of the error tree: each ``core.errors`` leaf fails or retries.

- bad input, not found, not authorized, and a subscription type that can never
  be skipped: the task fails at once (``AirflowFailException``, no retry), since
  running it again gives the same answer;
- a store failure or a conflict (a concurrent writer): the error propagates, so
  Airflow retries the task as configured.

``tests/dags/test_outcomes.py`` checks that every leaf is mapped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

from core.errors import (
    ConflictError,
    CursorOpsError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    StoreError,
    UnsupportedSubscriptionTypeError,
    leaf_classes,
)


class Outcome(StrEnum):
    FAIL = "fail"
    """Fail the task now, without retry."""
    RETRY = "retry"
    """Raise, so Airflow retries."""


_FAMILIES: dict[type[CursorOpsError], Outcome] = {
    InvalidInputError: Outcome.FAIL,
    NotFoundError: Outcome.FAIL,
    NotAuthorizedError: Outcome.FAIL,
    ConflictError: Outcome.RETRY,
    StoreError: Outcome.RETRY,
}
# A conflict that no retry can resolve: the subscription's type never allows skips.
_LEAVES: dict[type[CursorOpsError], Outcome] = {UnsupportedSubscriptionTypeError: Outcome.FAIL}

OUTCOMES: dict[type[CursorOpsError], Outcome] = {
    leaf: _LEAVES.get(leaf) or next(o for fam, o in _FAMILIES.items() if issubclass(leaf, fam))
    for leaf in leaf_classes()
    if leaf in _LEAVES or any(issubclass(leaf, fam) for fam in _FAMILIES)
}
"""Outcome of every leaf of the error tree."""


def outcome_of(error: CursorOpsError) -> Outcome:
    for cls in type(error).__mro__:
        if cls in OUTCOMES:
            return OUTCOMES[cls]
        if cls in _FAMILIES:
            return _FAMILIES[cls]
    return Outcome.RETRY


@contextmanager
def airflow_outcome() -> Iterator[None]:
    """Translate a cursorops error into the task's outcome (one line for the operator)."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        yield
    except CursorOpsError as exc:
        if outcome_of(exc) is Outcome.FAIL:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
        raise
