"""The command-line edge of the error tree: the exit code of each ``cursorops.core.domain.errors``
leaf.

One table for every process an operator runs from a shell: the ``cursorops``
command and the Spark jobs' drivers. ``tests/cli/test_cli.py`` checks that
every leaf is mapped.
"""

from __future__ import annotations

from cursorops.core.domain.errors import (
    ConflictError,
    CursorOpsError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    OutcomeTable,
    StoreError,
)

EXIT_UNEXPECTED = 1
"""A failure that is not a ``core`` error: a bug."""

FAMILY_EXIT_CODES: dict[type[CursorOpsError], int] = {
    InvalidInputError: 2,
    NotFoundError: 3,
    ConflictError: 4,
    NotAuthorizedError: 5,
    StoreError: 6,
}
"""Exit code of each family of the error tree."""

_TABLE = OutcomeTable(FAMILY_EXIT_CODES, default=EXIT_UNEXPECTED)

EXIT_CODES: dict[type[CursorOpsError], int] = _TABLE.leaves()
"""Exit code of every leaf of the error tree, by family."""


def exit_code(error: CursorOpsError) -> int:
    """The exit code of ``error``'s class, else of its nearest mapped ancestor."""
    return _TABLE.of(error)
