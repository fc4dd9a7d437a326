"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. Every public name below
is loaded on first use (PEP 562), so ``import cursorops.core.errors`` or
``import cursorops.core.ids.message_id`` costs only that module: a command line tool that
needs one name does not pay for numpy, the stores (SQLAlchemy, pyarrow) or
pydantic through this package.

This folder is ``cursorops.core`` only. In a checkout ``cursorops/core`` links here, and an
editable install puts the checkout's root on ``sys.path``, where ``import core`` would
find this folder too and load a second copy of every module: second classes (an
``except cursorops.core.errors.CursorOpsError`` misses the copy's errors) and second
tables. So a top-level ``core`` refuses to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if __name__ != "cursorops.core":
    raise ImportError(
        f"{__name__!r} is cursorops.core under another name; import cursorops.core "
        "(docs/decisions/2026-12-07-the-core-link-stays-guarded.md)"
    )

if TYPE_CHECKING:
    from cursorops.core.acks.cursor import AckTarget, CursorState
    from cursorops.core.acks.ledger_layout import LedgerLayout
    from cursorops.core.acks.range_set import RangeSet
    from cursorops.core.acks.skip import SkipOutcome
    from cursorops.core.acks.skip_plan import SkipPlan
    from cursorops.core.analysis.backlog import BacklogAnalysis, PartitionAnalysis, TopicAnalysis
    from cursorops.core.analysis.topic_scan import TopicScan
    from cursorops.core.analysis.topic_stats import SubscriptionStats, TopicStats
    from cursorops.core.broker import Broker
    from cursorops.core.config import Config
    from cursorops.core.errors import CursorOpsError
    from cursorops.core.exit_codes import exit_code
    from cursorops.core.ids.message_id import MessageId
    from cursorops.core.ids.position import EARLIEST, Position
    from cursorops.core.ids.topic_name import TopicName
    from cursorops.core.reading.message import MessageBatch
    from cursorops.core.store.broker_registry import Advertised, BrokerRecord
    from cursorops.core.store.values import Fence
    from cursorops.core.subscription import SubscriptionType

_HOMES = {
    "EARLIEST": "cursorops.core.ids.position",
    "AckTarget": "cursorops.core.acks.cursor",
    "Advertised": "cursorops.core.store.broker_registry",
    "BacklogAnalysis": "cursorops.core.analysis.backlog",
    "Broker": "cursorops.core.broker",
    "BrokerRecord": "cursorops.core.store.broker_registry",
    "Config": "cursorops.core.config",
    "CursorOpsError": "cursorops.core.errors",
    "CursorState": "cursorops.core.acks.cursor",
    "Fence": "cursorops.core.store.values",
    "LedgerLayout": "cursorops.core.acks.ledger_layout",
    "MessageBatch": "cursorops.core.reading.message",
    "MessageId": "cursorops.core.ids.message_id",
    "PartitionAnalysis": "cursorops.core.analysis.backlog",
    "Position": "cursorops.core.ids.position",
    "RangeSet": "cursorops.core.acks.range_set",
    "SkipOutcome": "cursorops.core.acks.skip",
    "SkipPlan": "cursorops.core.acks.skip_plan",
    "SubscriptionStats": "cursorops.core.analysis.topic_stats",
    "SubscriptionType": "cursorops.core.subscription",
    "TopicAnalysis": "cursorops.core.analysis.backlog",
    "TopicName": "cursorops.core.ids.topic_name",
    "TopicScan": "cursorops.core.analysis.topic_scan",
    "TopicStats": "cursorops.core.analysis.topic_stats",
    "exit_code": "cursorops.core.exit_codes",
}
"""Each public name and the module that defines it."""

__all__ = [
    "EARLIEST",
    "AckTarget",
    "Advertised",
    "BacklogAnalysis",
    "Broker",
    "BrokerRecord",
    "Config",
    "CursorOpsError",
    "CursorState",
    "Fence",
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
        raise AttributeError(f"module 'cursorops.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
