"""cursorops core: Pulsar's subscription-cursor semantics, in pure Python.

No Airflow or Spark import anywhere in this package. ``Broker`` (the façade
over the stores) is loaded lazily, so importing the light modules stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.config import Config
from core.cursor import AckTarget, CursorState
from core.errors import CursorOpsError
from core.ledger_layout import LedgerLayout
from core.message_id import MessageId
from core.position import EARLIEST, Position
from core.range_set import RangeSet
from core.subscription import SubscriptionType
from core.topic_name import TopicName

if TYPE_CHECKING:
    from core.broker import Broker

__all__ = [
    "EARLIEST",
    "AckTarget",
    "Broker",
    "Config",
    "CursorOpsError",
    "CursorState",
    "LedgerLayout",
    "MessageId",
    "Position",
    "RangeSet",
    "SubscriptionType",
    "TopicName",
]


def __getattr__(name: str) -> Any:
    if name == "Broker":
        from core.broker import Broker

        return Broker
    raise AttributeError(f"module 'core' has no attribute {name!r}")
