"""Subscription types, with Pulsar's names."""

from __future__ import annotations

from enum import StrEnum

from cursorops.core.domain.errors import InvalidArgumentError


class SubscriptionType(StrEnum):
    EXCLUSIVE = "Exclusive"
    SHARED = "Shared"
    FAILOVER = "Failover"
    KEY_SHARED = "Key_Shared"

    @classmethod
    def parse(cls, text: str) -> SubscriptionType:
        wanted = text.strip().lower().replace("-", "_")
        for member in cls:
            if member.value.lower() == wanted:
                return member
        names = ", ".join(m.value for m in cls)
        raise InvalidArgumentError(f"Invalid subscription type '{text}': expected one of {names}")

    @property
    def honours_delayed_delivery(self) -> bool:
        """Only Shared and Key_Shared hold delayed messages back; the others deliver at once."""
        return self in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED)

    @property
    def uses_consumer_epoch(self) -> bool:
        """PIP-84: only Exclusive and Failover consumers carry an epoch."""
        return self in (SubscriptionType.EXCLUSIVE, SubscriptionType.FAILOVER)

    @property
    def allows_skip(self) -> bool:
        """PIP-423 refuses Exclusive and Failover ("Unsupported subscription type.")."""
        return self.honours_delayed_delivery
