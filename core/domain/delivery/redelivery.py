"""Why a consumer's pending messages become deliverable again, and which reasons count.

A pending message (delivered, not acknowledged) goes back to be dispatched again
for one of the reasons of :class:`Release`. Its *redelivery count*, which a
consumer receives with it (``CommandMessage.redelivery_count``) and decides
dead-lettering from, grows only when a consumer asked for the message again,
as in Pulsar:

- counted: a negative acknowledgement, an ack timeout (the client sends
  ``CommandRedeliverUnacknowledgedMessages`` with the message ids, as for a
  negative acknowledgement) and ``redeliverUnacknowledgedMessages``. Pulsar's
  dispatcher calls ``redeliveryTracker.incrementAndGetRedeliveryCount`` for
  each message replayed.
- not counted: the consumer's close, its connection's loss, its process's
  death (the lease lapses), a Failover partition passing to another active
  consumer, a seek, and the end of a broker's life (a restart, fencing, a
  failover to another broker). Pulsar's ``removeConsumer`` re-adds the
  consumer's pending messages for replay with ``redeliveryTracker.addIfAbsent``:
  the count unchanged.

This is the one home of that rule: every release in the store
(:meth:`~cursorops.core.store.dispatch_state.SubscriptionTransaction.release`) is
given its reason and bumps the stored count by :attr:`Release.counts`.
The count is persisted with the pending message, so it outlives a
subscription's last consumer and a restart, which Pulsar's in-memory tracker
does not (``docs/decisions/2026-12-07-redelivery-counts-as-pulsar-counts.md``).
"""

from __future__ import annotations

from enum import Enum


class Release(Enum):
    """Why pending messages are released (made deliverable again)."""

    NEGATIVE_ACK = "negative acknowledgement"
    REDELIVER = "redeliver request"
    """``CommandRedeliverUnacknowledgedMessages``: with ids (a negative acknowledgement or
    an ack timeout of a client) or without (``redeliverUnacknowledgedMessages``)."""
    CLOSE = "consumer closed"
    """Closed by its client, its connection closed or lost, or its process exiting."""
    LEASE_EXPIRY = "lease expired"
    """Its process died or stopped renewing: the consumer is gone."""
    TAKE_OVER = "failover take-over"
    """A Failover partition's new active consumer takes what the former one held."""
    SEEK = "seek"
    PROCESS_GONE = "process gone"
    """The consumers of a process known to have ended: a broker's restart, its fencing, a
    failover to another broker."""

    @property
    def counts(self) -> bool:
        """Whether this release bumps the redelivery count: only when a consumer asked."""
        return self in (Release.NEGATIVE_ACK, Release.REDELIVER)


__all__ = ["Release"]
