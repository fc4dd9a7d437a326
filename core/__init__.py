"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. Every public name below
is loaded on first use (PEP 562), so ``import core.errors`` or
``import core.message_id`` costs only that module: a command line tool that
needs one name does not pay for numpy, the stores (SQLAlchemy, pyarrow) or
pydantic through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.backlog import BacklogAnalysis, PartitionAnalysis, TopicAnalysis
    from core.broker import Broker
    from core.config import Config
    from core.cursor import AckTarget, CursorState
    from core.errors import CursorOpsError
    from core.exit_codes import exit_code
    from core.ledger_layout import LedgerLayout
    from core.message import MessageBatch
    from core.message_id import MessageId
    from core.position import EARLIEST, Position
    from core.range_set import RangeSet
    from core.skip import SkipOutcome
    from core.skip_plan import SkipPlan
    from core.subscription import SubscriptionType
    from core.topic_name import TopicName
    from core.topic_scan import TopicScan
    from core.topic_stats import SubscriptionStats, TopicStats

_HOMES = {
    "EARLIEST": "core.position",
    "AckTarget": "core.cursor",
    "BacklogAnalysis": "core.backlog",
    "Broker": "core.broker",
    "Config": "core.config",
    "CursorOpsError": "core.errors",
    "CursorState": "core.cursor",
    "LedgerLayout": "core.ledger_layout",
    "MessageBatch": "core.message",
    "MessageId": "core.message_id",
    "PartitionAnalysis": "core.backlog",
    "Position": "core.position",
    "RangeSet": "core.range_set",
    "SkipOutcome": "core.skip",
    "SkipPlan": "core.skip_plan",
    "SubscriptionStats": "core.topic_stats",
    "SubscriptionType": "core.subscription",
    "TopicAnalysis": "core.backlog",
    "TopicName": "core.topic_name",
    "TopicScan": "core.topic_scan",
    "TopicStats": "core.topic_stats",
    "exit_code": "core.exit_codes",
}
"""Each public name and the module that defines it."""

__all__ = [
    "EARLIEST",
    "AckTarget",
    "BacklogAnalysis",
    "Broker",
    "Config",
    "CursorOpsError",
    "CursorState",
    "LedgerLayout",
    "MessageBatch",
    "MessageId",
    "PartitionAnalysis",
    "Position",
    "RangeSet",
    "SkipOutcome",
    "SkipPlan",
    "SubscriptionStats",
    "SubscriptionType",
    "TopicAnalysis",
    "TopicName",
    "TopicScan",
    "TopicStats",
    "exit_code",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
