"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. Every public name below
is loaded on first use (PEP 562), so ``import cursorops.core.domain.errors`` or
``import cursorops.core.domain.ids.message_id`` costs only that module: a command line tool that
needs one name does not pay for numpy, the stores (SQLAlchemy, pyarrow) or
pydantic through this package.

This folder is ``cursorops.core`` only. In a checkout ``cursorops/core`` links here, and an
editable install puts the checkout's root on ``sys.path``, where ``import core`` would
find this folder too and load a second copy of every module: second classes (an
``except cursorops.core.domain.errors.CursorOpsError`` misses the copy's errors) and second
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
    from cursorops.core.domain.acks.cursor import AckTarget, CursorState
    from cursorops.core.domain.acks.ledger_layout import LedgerLayout
    from cursorops.core.domain.acks.range_set import RangeSet
    from cursorops.core.domain.acks.skip import SkipOutcome
    from cursorops.core.domain.acks.skip_plan import SkipPlan
    from cursorops.core.domain.analysis.backlog import (
        BacklogAnalysis,
        PartitionAnalysis,
        TopicAnalysis,
    )
    from cursorops.core.domain.analysis.topic_scan import TopicScan
    from cursorops.core.domain.analysis.topic_stats import SubscriptionStats, TopicStats
    from cursorops.core.domain.config import Config
    from cursorops.core.domain.errors import CursorOpsError
    from cursorops.core.domain.exit_codes import exit_code
    from cursorops.core.domain.ids.message_id import MessageId
    from cursorops.core.domain.ids.position import EARLIEST, Position
    from cursorops.core.domain.ids.topic_name import TopicName
    from cursorops.core.domain.subscription import SubscriptionType
    from cursorops.core.services.broker import Broker
    from cursorops.core.services.reading.message import MessageBatch
    from cursorops.core.store.broker_registry import Advertised, BrokerRecord
    from cursorops.core.store.values import Fence

_HOMES = {
    "EARLIEST": "cursorops.core.domain.ids.position",
    "AckTarget": "cursorops.core.domain.acks.cursor",
    "Advertised": "cursorops.core.store.broker_registry",
    "BacklogAnalysis": "cursorops.core.domain.analysis.backlog",
    "Broker": "cursorops.core.services.broker",
    "BrokerRecord": "cursorops.core.store.broker_registry",
    "Config": "cursorops.core.domain.config",
    "CursorOpsError": "cursorops.core.domain.errors",
    "CursorState": "cursorops.core.domain.acks.cursor",
    "Fence": "cursorops.core.store.values",
    "LedgerLayout": "cursorops.core.domain.acks.ledger_layout",
    "MessageBatch": "cursorops.core.services.reading.message",
    "MessageId": "cursorops.core.domain.ids.message_id",
    "PartitionAnalysis": "cursorops.core.domain.analysis.backlog",
    "Position": "cursorops.core.domain.ids.position",
    "RangeSet": "cursorops.core.domain.acks.range_set",
    "SkipOutcome": "cursorops.core.domain.acks.skip",
    "SkipPlan": "cursorops.core.domain.acks.skip_plan",
    "SubscriptionStats": "cursorops.core.domain.analysis.topic_stats",
    "SubscriptionType": "cursorops.core.domain.subscription",
    "TopicAnalysis": "cursorops.core.domain.analysis.backlog",
    "TopicName": "cursorops.core.domain.ids.topic_name",
    "TopicScan": "cursorops.core.domain.analysis.topic_scan",
    "TopicStats": "cursorops.core.domain.analysis.topic_stats",
    "exit_code": "cursorops.core.domain.exit_codes",
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
