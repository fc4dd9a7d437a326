"""Gated operations: every irreversible operation on a subscription, as one kind of object.

A door asks the Broker for one by name (``Broker.request``) with a :class:`Caller` and the
operation's arguments; on a namespace that requires approval the answer is a
:class:`Pending` request (a plan record and its run), else the change :class:`Applied`.
The operations are listed once, in :mod:`cursorops.core.services.gating.registry`.
"""

from cursorops.core.services.gating.operation import (
    REDRIVE,
    RESET_CURSOR,
    SKIP,
    UNDO_SKIP,
    UNSUBSCRIBE,
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatedOperation,
    Pending,
    Run,
    RunStarter,
)
from cursorops.core.services.gating.redrive import RedriveDeadLetters
from cursorops.core.services.gating.registry import GATED_OPERATIONS, named, recorded
from cursorops.core.services.gating.reset import ResetCursor
from cursorops.core.services.gating.skip import ClearBacklog, SkipHead, SkipMatching, SkipMessages
from cursorops.core.services.gating.undo_skip import UndoSkip
from cursorops.core.services.gating.unsubscribe import Unsubscribe

__all__ = [
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
