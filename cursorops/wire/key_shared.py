"""Key_Shared consumers' modes and sticky hash ranges, as this process's broker knows them.

Pulsar gives a Key_Shared subscription one selector: auto-split (the consistent
hashing ring, :mod:`cursorops.core.domain.delivery.key_hash`) or sticky (each consumer names the
hash ranges it alone gets). A consumer of the other mode is refused, and so is
a sticky range that overlaps another consumer's (``ConsumerAssignError``).
The ranges are kept in memory by the process whose connection declared them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cursorops.core.domain.delivery.key_hash import HashRanges, overlap, sticky_ranges
from cursorops.core.domain.errors import ConsumerBusyError
from cursorops.wire.commands import ServerError
from cursorops.wire.proto import Proto
from cursorops.wire.refusal import Refusal

STICKY = 1
"""``KeySharedMode.STICKY``; ``AUTO_SPLIT`` is 0."""


def range_conflict(message: str) -> Refusal:
    """A sticky range overlaps another consumer's (Pulsar's ``ConsumerAssignException``)."""
    return Refusal(ServerError.ConsumerAssignError, message)


def requested_ranges(meta: Proto | None) -> HashRanges | None:
    """The sticky ranges a ``KeySharedMeta`` asks for; None for auto-split."""
    if meta is None or meta.get("keySharedMode", 0) != STICKY:
        return None
    return sticky_ranges(
        [(r.get("start", 0), r.get("end", -1)) for r in meta.get("hashRanges", [])]
    )


@dataclass
class KeySharedConsumers:
    """Each Key_Shared subscription's consumers (by identity) and their ranges."""

    _by_subscription: dict[tuple[str, str], dict[str, HashRanges | None]] = field(
        default_factory=dict
    )

    def join(self, topic: str, subscription: str, identity: str, ranges: HashRanges | None) -> None:
        """Record ``identity``'s mode and ranges, or refuse them (nothing recorded)."""
        others = {
            other: theirs
            for other, theirs in self._by_subscription.get((topic, subscription), {}).items()
            if other != identity
        }
        for theirs in others.values():
            if (theirs is None) != (ranges is None):
                raise ConsumerBusyError(
                    f"Key_Shared subscription {subscription} is in "
                    f"{'auto-split' if theirs is None else 'sticky'} mode: a consumer of the "
                    "other mode cannot join"
                )
            if ranges is not None and theirs is not None:
                clash = overlap(ranges, theirs)
                if clash is not None:
                    raise range_conflict(
                        f"Range conflict: [{clash[0]}, {clash[1]}] overlaps another consumer's"
                        f" ranges of subscription {subscription}"
                    )
        self._by_subscription.setdefault((topic, subscription), {})[identity] = ranges

    def leave(self, topic: str, subscription: str, identity: str) -> None:
        consumers = self._by_subscription.get((topic, subscription))
        if consumers is not None:
            consumers.pop(identity, None)
            if not consumers:
                del self._by_subscription[(topic, subscription)]
