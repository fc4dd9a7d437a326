"""The command-line edge of the error tree: the exit code of each ``core.errors`` leaf.

One table for every process an operator runs from a shell: the ``cursorops``
command and the Spark jobs' drivers. ``tests/cli/test_cli.py`` checks that
every leaf is mapped.
"""

from __future__ import annotations

from core.errors import (
    ConflictError,
    CursorOpsError,
    InvalidInputError,
    NotAuthorizedError,
    NotFoundError,
    StoreError,
    leaf_classes,
)

FAMILY_EXIT_CODES: dict[type[CursorOpsError], int] = {
    InvalidInputError: 2,
    NotFoundError: 3,
    ConflictError: 4,
    NotAuthorizedError: 5,
    StoreError: 6,
}
"""Exit code of each family of the error tree."""

EXIT_CODES: dict[type[CursorOpsError], int] = {
    leaf: code
    for leaf in leaf_classes()
    for family, code in FAMILY_EXIT_CODES.items()
    if issubclass(leaf, family)
}
"""Exit code of every leaf of the error tree, by family."""

EXIT_UNEXPECTED = 1
"""A failure that is not a ``core`` error: a bug."""


def exit_code(error: CursorOpsError) -> int:
    """The exit code of ``error``'s class, else of its nearest mapped ancestor."""
    for cls in type(error).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
        if cls in FAMILY_EXIT_CODES:
            return FAMILY_EXIT_CODES[cls]
    return EXIT_UNEXPECTED
