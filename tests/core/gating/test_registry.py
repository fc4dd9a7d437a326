"""The registry of gated operations: each operation once, each stored operation applied by
one entry, and the workflows' step names derived from it."""

from __future__ import annotations

import pytest

import cursorops.core.services.gating
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.plans import plan_record
from cursorops.core.domain.plans.plan_record import PlanBinding
from cursorops.core.services.gating import GATED_OPERATIONS, named, recorded
from cursorops.core.services.gating.operation import (
    REDRIVE,
    RESET_CURSOR,
    SKIP,
    UNDO_SKIP,
    UNSUBSCRIBE,
)
from cursorops.core.services.gating.registry import BY_RECORD, RECORDED_OPERATIONS


def test_the_public_names_are_pinned() -> None:
    assert sorted(cursorops.core.services.gating.__all__) == sorted(
        [
            "GATED_OPERATIONS",
            "REDRIVE",
            "RESET_CURSOR",
            "SKIP",
            "UNDO_SKIP",
            "UNSUBSCRIBE",
            "Applied",
            "Approval",
            "Caller",
            "ClearBacklog",
            "GatedArguments",
            "GatedOperation",
            "Pending",
            "RedriveDeadLetters",
            "ResetCursor",
            "Run",
            "RunStarter",
            "SkipHead",
            "SkipMatching",
            "SkipMessages",
            "UndoSkip",
            "Unsubscribe",
            "named",
            "recorded",
        ]
    )


def test_every_gated_operation_once_by_name() -> None:
    names = [op.name for op in GATED_OPERATIONS]
    assert names == [
        "skip-messages",
        "skip-matching",
        "skip-head",
        "clear-backlog",
        "reset-cursor",
        "unsubscribe",
        "undo-skip",
        "redrive",
    ]
    for op in GATED_OPERATIONS:
        assert named(op.name) is op


def test_the_stored_operations_keep_their_values() -> None:
    """What plan records and audit records already store: never renamed."""
    assert {"skip", "reset-cursor", "redrive", "undo-skip", "unsubscribe"} == RECORDED_OPERATIONS
    assert (SKIP, RESET_CURSOR, REDRIVE, UNDO_SKIP, UNSUBSCRIBE) == (
        "skip",
        "reset-cursor",
        "redrive",
        "undo-skip",
        "unsubscribe",
    )
    for operation in RECORDED_OPERATIONS:
        assert recorded(operation).recorded_as == operation


def test_a_plan_record_stores_exactly_the_operations_the_registry_applies() -> None:
    """The domain's record names its operations without the registry (it sits below it):
    the two lists are one."""
    assert plan_record.RECORDED_OPERATIONS == RECORDED_OPERATIONS


def test_operations_stored_alike_plan_and_apply_alike() -> None:
    """The four kinds of skip are one stored operation: whichever applies a ``skip`` record,
    it is the same plan class, the same apply and the same workflow steps."""
    for operation in GATED_OPERATIONS:
        applier = BY_RECORD[operation.recorded_as]
        assert operation.plan_type is applier.plan_type
        assert type(operation).apply_approved is type(applier).apply_approved
        assert (operation.step, operation.title) == (applier.step, applier.title)
    skips = [op.name for op in GATED_OPERATIONS if op.recorded_as == SKIP]
    assert skips == ["skip-messages", "skip-matching", "skip-head", "clear-backlog"]


def test_the_workflow_steps_are_the_ones_the_dags_name() -> None:
    steps = {op: (entry.step, entry.title) for op, entry in BY_RECORD.items()}
    assert steps == {
        SKIP: ("skip", "Skip messages"),
        UNDO_SKIP: ("undo_skip", "Undo a skip"),
        REDRIVE: ("redrive", "Redrive dead letters"),
        RESET_CURSOR: ("reset", "Reset a cursor"),
        UNSUBSCRIBE: ("unsubscribe", "Unsubscribe"),
    }
    assert {op.workflow for op in GATED_OPERATIONS} == {
        "cursorops_skip_messages",
        "cursorops_skip_matching",
        "cursorops_skip_head",
        "cursorops_reset_cursor",
        "cursorops_unsubscribe",
        "cursorops_undo_skip",
        "cursorops_redrive",
    }


@pytest.mark.parametrize("name", ["", "skip", "SKIP-MESSAGES", "skip_messages", None, 3])
def test_an_unknown_operation_is_refused(name: object) -> None:
    with pytest.raises(InvalidArgumentError, match="Unknown gated operation"):
        named(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("operation", ["", "skip-messages", "Skip", "reset", None])
def test_an_unknown_stored_operation_applies_nothing(operation: object) -> None:
    with pytest.raises(InvalidArgumentError, match="No gated operation applies"):
        recorded(operation)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="Invalid plan binding: operation"):
        PlanBinding("d", "r", "alice", "alice", operation)  # type: ignore[arg-type]
