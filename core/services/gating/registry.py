"""The registry of gated operations: each irreversible operation on a subscription, once.

A door asks for an operation by its name (:func:`named`); an approved plan record is
applied by the operation it stores (:func:`recorded`: the four kinds of skip are all
stored as ``skip``, share their plan class and apply a record the same way, so any of
them applies a ``skip`` record).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.services.gating import redrive, reset, undo_skip, unsubscribe
from cursorops.core.services.gating.operation import GatedOperation
from cursorops.core.services.gating.skip import (
    CLEAR_BACKLOG,
    SKIP_HEAD,
    SKIP_MATCHING,
    SKIP_MESSAGES,
)

GATED_OPERATIONS: tuple[GatedOperation[Any, Any], ...] = (
    SKIP_MESSAGES,
    SKIP_MATCHING,
    SKIP_HEAD,
    CLEAR_BACKLOG,
    reset.OPERATION,
    unsubscribe.OPERATION,
    undo_skip.OPERATION,
    redrive.OPERATION,
)
"""Every gated operation, in the order a person lists them."""

BY_NAME: Mapping[str, GatedOperation[Any, Any]] = MappingProxyType(
    {operation.name: operation for operation in GATED_OPERATIONS}
)
_BY_RECORD: dict[str, GatedOperation[Any, Any]] = {}
for _operation in GATED_OPERATIONS:
    _BY_RECORD.setdefault(_operation.recorded_as, _operation)
BY_RECORD: Mapping[str, GatedOperation[Any, Any]] = MappingProxyType(_BY_RECORD)
"""The operation that applies a record, by the operation the record stores."""
RECORDED_OPERATIONS = frozenset(BY_RECORD)
"""Every operation a plan record may store."""


def named(name: str) -> GatedOperation[Any, Any]:
    """The gated operation ``name`` (``skip-messages``, ``reset-cursor``, ...)."""
    found = BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidArgumentError(f"Unknown gated operation {name!r}; known: {', '.join(BY_NAME)}")
    return found


def recorded(operation: str) -> GatedOperation[Any, Any]:
    """The gated operation that applies a record storing ``operation`` (``skip``, ...)."""
    found = BY_RECORD.get(operation) if isinstance(operation, str) else None
    if found is None:
        raise InvalidArgumentError(
            f"No gated operation applies a record of {operation!r}; known: "
            f"{', '.join(sorted(BY_RECORD))}"
        )
    return found


__all__ = [
    "BY_NAME",
    "BY_RECORD",
    "GATED_OPERATIONS",
    "RECORDED_OPERATIONS",
    "named",
    "recorded",
]
