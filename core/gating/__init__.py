"""Gated operations: every irreversible operation on a subscription, as one kind of object.

A door asks the Broker for one by name (``Broker.request``) with a :class:`Caller` and the
operation's arguments; on a namespace that requires approval the answer is a
:class:`Pending` request (a plan record and its run), else the change :class:`Applied`.
The operations are listed once, in :mod:`core.gating.registry`.
"""

from core.gating.operation import (
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
from core.gating.redrives import RedriveDeadLetters
from core.gating.registry import GATED_OPERATIONS, named, recorded
from core.gating.resets import ResetCursor
from core.gating.skips import ClearBacklog, SkipHead, SkipMatching, SkipMessages
from core.gating.undos import UndoSkip
from core.gating.unsubscribes import Unsubscribe

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
