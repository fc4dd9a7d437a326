"""The Airflow edge of the error tree: each ``cursorops.core.domain.errors`` leaf fails or retries.

- bad input, not found, not authorized, and a subscription type that can never
  be skipped: the task fails at once (``AirflowFailException``, no retry), since
  running it again gives the same answer;
- a store failure or a conflict that may clear (a busy consumer or subscription):
  the error propagates, so Airflow retries the task as configured.

``tests/dags/test_glue.py`` checks that every leaf is mapped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

from cursorops.core.domain.errors import (
    ConflictError,
    CursorOpsError,
    IncompatibleSchemaError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    OutcomeTable,
    PlanAlreadyAppliedError,
    SkipAlreadyUndoneError,
    StoreError,
    UnsupportedSubscriptionTypeError,
)


class Outcome(StrEnum):
    FAIL = "fail"
    """Fail the task now, without retry."""
    RETRY = "retry"
    """Raise, so Airflow retries."""


_TABLE = OutcomeTable(
    families={
        InvalidInputError: Outcome.FAIL,
        NotFoundError: Outcome.FAIL,
        NotAuthorizedError: Outcome.FAIL,
        ConflictError: Outcome.RETRY,
        StoreError: Outcome.RETRY,
    },
    # Conflicts that no retry can resolve: the subscription's type never allows skips, a
    # plan record is applied at most once, and so is an undo of a skip; a schema the
    # strategy refuses stays refused.
    overrides={
        UnsupportedSubscriptionTypeError: Outcome.FAIL,
        PlanAlreadyAppliedError: Outcome.FAIL,
        SkipAlreadyUndoneError: Outcome.FAIL,
        IncompatibleSchemaError: Outcome.FAIL,
    },
    default=Outcome.RETRY,
)

OUTCOMES: dict[type[CursorOpsError], Outcome] = _TABLE.leaves()
"""Outcome of every leaf of the error tree."""


def outcome_of(error: CursorOpsError) -> Outcome:
    return _TABLE.of(error)


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
