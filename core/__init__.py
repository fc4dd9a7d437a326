"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. ``Broker`` (the façade
over the stores) is loaded lazily, so importing the light modules stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.backlog import BacklogAnalysis, PartitionAnalysis, TopicAnalysis
from core.config import Config
from core.cursor import AckTarget, CursorState
from core.errors import CursorOpsError
from core.exit_codes import exit_code
from core.ledger_layout import LedgerLayout
from core.message_id import MessageId
from core.position import EARLIEST, Position
from core.range_set import RangeSet
from core.skip import SkipOutcome
from core.skip_plan import SkipPlan
from core.subscription import SubscriptionType
from core.topic_name import TopicName
from core.topic_stats import SubscriptionStats, TopicStats

if TYPE_CHECKING:
    from core.broker import Broker
    from core.topic_scan import TopicScan

__all__ = [
    "EARLIEST",
    "AckTarget",
    "BacklogAnalysis",
    "Broker",
    "Config",
    "CursorOpsError",
    "CursorState",
    "LedgerLayout",
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
    # The Broker and the scan pull in the stores (SQLAlchemy, pyarrow): loaded on first use.
    if name == "Broker":
        from core.broker import Broker

        return Broker
    if name == "TopicScan":
        from core.topic_scan import TopicScan

        return TopicScan
    raise AttributeError(f"module 'core' has no attribute {name!r}")
