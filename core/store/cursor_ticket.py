"""What entitles a write through the cursor door: a :class:`Ticket`, stated by every write.

On a namespace that requires approval, every cursor move is asked for, approved by a
quorum of other people, and recorded (DESIGN.md, "The cursor door enforces the
approval"). The door (:class:`~cursorops.core.store.cursor_door.CursorTransaction`) checks
the ticket of each write against the namespace's policy, so no front door can forget it:

- :meth:`Ticket.approved_plan`: the write applies an approved plan record, and the
  transaction claims that record (:meth:`CursorTransaction.claim_plan`) before it commits.
- :meth:`Ticket.delivered_to`: a consumer's acknowledgement of messages delivered to it
  and still pending for it; the dispatcher's transaction
  (:class:`~cursorops.core.store.dispatch_state.SubscriptionTransaction`) checks the
  messages against the pending ones and writes only those.
- :meth:`Ticket.not_a_move`: bookkeeping that moves no cursor (a journal folded into the
  state it replays, a new subscription's cursors, a reader's own subscription).
- :meth:`Ticket.ungated`: a move no approval stands behind (a skip, reset or unsubscribe
  applied at once): the door refuses it where the namespace requires approval.

On an ordinary namespace every ticket is good: Pulsar's behaviour, unchanged.
``tests/core/store/test_cursor_tickets.py`` checks that every write in the code states one.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class TicketKind(enum.Enum):
    APPROVED_PLAN = "approved plan"
    DELIVERED = "delivered to consumer"
    NOT_A_MOVE = "not a move"
    UNGATED = "ungated"


@dataclass(frozen=True)
class Ticket:
    """What entitles one write: its kind and what it names (a plan's digest, a consumer,
    or the write's own description)."""

    kind: TicketKind
    names: str
    plans: tuple[str, ...] = ()
    """The digests of the approved plan records the write applies (each claimed in the
    same transaction)."""

    @classmethod
    def approved_plan(cls, *digests: str) -> Ticket:
        """The write applies the approved plan records ``digests`` (writes several plans'
        changes together), each claimed in the same transaction."""
        if not digests:
            raise ValueError("An approved plan ticket names at least one plan")
        return cls(TicketKind.APPROVED_PLAN, ", ".join(digests), tuple(digests))

    @classmethod
    def gated(cls, digests: Sequence[str | None], what: str) -> Ticket:
        """A gated operation's write: :meth:`approved_plan` when every change it writes
        applies an approved record (``digests``, None for a change without one), else
        :meth:`ungated` (``what``)."""
        approved = [d for d in digests if d is not None]
        if not approved or len(approved) != len(digests):
            return cls.ungated(what)
        return cls.approved_plan(*approved)

    @classmethod
    def delivered_to(cls, consumer_id: str) -> Ticket:
        """The write acknowledges messages delivered to ``consumer_id`` and still pending
        for it."""
        return cls(TicketKind.DELIVERED, consumer_id)

    @classmethod
    def not_a_move(cls, what: str) -> Ticket:
        """Bookkeeping that moves no cursor, described by ``what``."""
        return cls(TicketKind.NOT_A_MOVE, what)

    @classmethod
    def ungated(cls, what: str) -> Ticket:
        """A move applied without an approval (``what`` says which): refused where the
        namespace requires approval."""
        return cls(TicketKind.UNGATED, what)

    def __str__(self) -> str:
        return f"{self.kind.value} ({self.names})"


__all__ = ["Ticket", "TicketKind"]
