"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. Every public name below
is loaded on first use (PEP 562), so ``import core.errors`` or
``import core.ids.message_id`` costs only that module: a command line tool that
needs one name does not pay for numpy, the stores (SQLAlchemy, pyarrow) or
pydantic through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.acks.cursor import AckTarget, CursorState
    from core.acks.ledger_layout import LedgerLayout
    from core.acks.range_set import RangeSet
    from core.analysis.backlog import BacklogAnalysis, PartitionAnalysis, TopicAnalysis
    from core.analysis.topic_scan import TopicScan
    from core.analysis.topic_stats import SubscriptionStats, TopicStats
    from core.broker import Broker
    from core.config import Config
    from core.errors import CursorOpsError
    from core.exit_codes import exit_code
    from core.ids.message_id import MessageId
    from core.ids.position import EARLIEST, Position
    from core.ids.topic_name import TopicName
    from core.reading.message import MessageBatch
    from core.skipping.skip import SkipOutcome
    from core.skipping.skip_plan import SkipPlan
    from core.subscription import SubscriptionType

_HOMES = {
    "EARLIEST": "core.ids.position",
    "AckTarget": "core.acks.cursor",
    "BacklogAnalysis": "core.analysis.backlog",
    "Broker": "core.broker",
    "Config": "core.config",
    "CursorOpsError": "core.errors",
    "CursorState": "core.acks.cursor",
    "LedgerLayout": "core.acks.ledger_layout",
    "MessageBatch": "core.reading.message",
    "MessageId": "core.ids.message_id",
    "PartitionAnalysis": "core.analysis.backlog",
    "Position": "core.ids.position",
    "RangeSet": "core.acks.range_set",
    "SkipOutcome": "core.skipping.skip",
    "SkipPlan": "core.skipping.skip_plan",
    "SubscriptionStats": "core.analysis.topic_stats",
    "SubscriptionType": "core.subscription",
    "TopicAnalysis": "core.analysis.backlog",
    "TopicName": "core.ids.topic_name",
    "TopicScan": "core.analysis.topic_scan",
    "TopicStats": "core.analysis.topic_stats",
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
