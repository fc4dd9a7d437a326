"""The registry of gated operations: each irreversible operation on a subscription, once.

A door asks for an operation by its name (:func:`named`); an approved plan record is
applied by the operation it stores (:func:`recorded`: the four kinds of skip are all
stored as ``skip``, share their plan class and apply a record the same way, so any of
them applies a ``skip`` record).

A plan record is a value of the domain (:mod:`cursorops.core.domain.plans.plan_record`),
which the store keeps and knows no operation: what a record means by its operation is
read here, :func:`new_record`, :func:`verified_plan`, :func:`topics_of` and
:func:`preview_of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.plans.plan_record import PlanBinding, PlanRecord
from cursorops.core.domain.plans.preview import Preview
from cursorops.core.domain.portable_plan import PortablePlan
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


def new_record(
    binding: PlanBinding,
    plan: PortablePlan,
    document: Mapping[str, Any],
    *,
    required_approvals: int,
    created_at_ms: int,
) -> PlanRecord:
    """A new record of ``plan`` (:meth:`PlanRecord.create`), refused unless ``plan`` is of
    the binding's operation's plan class."""
    operation = recorded(binding.operation)
    if not isinstance(plan, operation.plan_type):
        raise InvalidArgumentError(
            f"Invalid plan record: a {type(plan).__name__} is not a {binding.operation} plan"
        )
    return PlanRecord.create(
        binding,
        plan,
        document,
        required_approvals=required_approvals,
        created_at_ms=created_at_ms,
    )


def verified_plan(record: PlanRecord) -> PortablePlan:
    """The stored plan of ``record``, its digest checked (:meth:`PlanRecord.verified`), of
    its operation's class, its content hash checked and the one :attr:`PlanRecord.plan_id`
    names (:meth:`~cursorops.core.services.gating.operation.GatedOperation.plan_of`)."""
    plan: PortablePlan = recorded(record.operation).plan_of(record.verified())
    return plan


def topics_of(record: PlanRecord) -> tuple[str, ...]:
    """The topics ``record``'s plan gates (a redrive's dead-letter topic too): each
    namespace's policy counts, the strictest wins, and an approver must be permitted on
    every one."""
    operation = recorded(record.operation)
    return operation.topics(operation.plan_of(record))


def preview_of(record: PlanRecord, content: bool = True) -> Preview:
    """What the approver reads of ``record``, in the one shape every operation shares
    (:mod:`cursorops.core.domain.plans.preview`), built from the record only; message
    content masked unless ``content`` (:mod:`cursorops.core.domain.content`)."""
    return recorded(record.operation).preview(record, content)


__all__ = [
    "BY_NAME",
    "BY_RECORD",
    "GATED_OPERATIONS",
    "RECORDED_OPERATIONS",
    "named",
    "new_record",
    "preview_of",
    "recorded",
    "topics_of",
    "verified_plan",
]
