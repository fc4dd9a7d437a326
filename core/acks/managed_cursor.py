"""A cursor bound to the metadata store: every acknowledgement durable on return.

The stored form is a snapshot plus a journal of deltas (see
``docs/architecture.md``). Opening a cursor replays the journal over the
snapshot; each mutation appends one delta in one transaction before it returns.
Nothing is capped: unlike Pulsar's ``managedLedgerMaxUnackedRangesToPersist``,
every individually deleted range and every batch ack set is persisted.

Writers to one cursor may live in different processes (consumers acking while
an admin skips): deltas are unions of acknowledgements, so none is lost, and
the store serializes the appends with a row lock.

Threads may share one cursor: concurrent mutations are group-committed
(:mod:`core.store.group_commit`). The deltas queued while the previous write
was in flight are folded into one delta, in arrival order (acknowledgements by
union, a reset replacing what came before it), appended as ONE journal row and
merged into the in-memory state once; every caller returns after that row
committed. The cost of a write, the SQL and the encoding, is then paid per
batch, not per call; the store in turn shares one transaction among the
cursors writing at the same time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from core.acks import cursor_codec
from core.acks.cursor import AckTarget, CursorState
from core.acks.ledger_layout import LedgerLayout
from core.ids.position import Position
from core.store.cursor_state import replay
from core.store.group_commit import GroupCommit

if TYPE_CHECKING:
    from core.store.metadata import MetadataStore

_Write: TypeAlias = "list[AckTarget] | tuple[CursorState, bool]"
"""A queued write: whole entries to acknowledge, or a delta and whether it replaces the state."""

COMPACT_AFTER_DELTAS = 512
"""Journal length after which a writer folds the journal into a new snapshot."""


class ManagedCursor:
    """One subscription's cursor on one topic partition, durable in the metadata store."""

    def __init__(
        self,
        store: MetadataStore,
        topic_partition: str,
        subscription: str,
        layout: LedgerLayout,
        state: CursorState,
        journal_length: int,
    ) -> None:
        self.store = store
        self.topic_partition = topic_partition
        self.subscription = subscription
        self.layout = layout
        self.state = state
        self._journal_length = journal_length
        self._lock = threading.RLock()
        """Guards ``state`` and the journal length; never held while writing to the store."""
        self._writes: GroupCommit[_Write | None, None] = GroupCommit(self._write)
        self._compaction_due = False

    @classmethod
    def open(
        cls, store: MetadataStore, topic_partition: str, subscription: str, layout: LedgerLayout
    ) -> ManagedCursor:
        """Load the cursor (raises SubscriptionNotFoundError)."""
        record = store.load_cursor(topic_partition, subscription)
        state = replay(record, layout)
        return cls(store, topic_partition, subscription, layout, state, len(record.deltas))

    @property
    def writes(self) -> GroupCommit[_Write | None, None]:
        """The group commit of this cursor's writes (its batches, whether one is in flight)."""
        return self._writes

    @property
    def mark_delete(self) -> Position:
        return self.state.mark_delete

    def refresh(self, layout: LedgerLayout | None = None) -> None:
        """Reload from the store, picking up other writers' acknowledgements."""
        # Held from the read to the new state: a write of this cursor that commits meanwhile
        # merges into the reloaded state, not into the one the reload replaces.
        with self._lock:
            if layout is not None:
                self.layout = layout
            record = self.store.load_cursor(self.topic_partition, self.subscription)
            self.state = replay(record, self.layout)
            self._journal_length = len(record.deltas)

    def acknowledge(self, targets: Iterable[AckTarget]) -> None:
        """Individually acknowledge entries and batch indexes; durable when it returns."""
        self._writes.submit(self._ack_item(targets))
        self._compact_if_due()

    def acknowledge_async(self, targets: Iterable[AckTarget]) -> asyncio.Future[None]:
        """Pulsar's ``acknowledgeAsync``: the future completes once the acknowledgement is durable.

        Call it from a running event loop. Nothing waits here, so one task can
        have many acknowledgements in flight, and they share commits with
        every other caller of this cursor. A batch index outside its batch
        raises here, as :meth:`acknowledge` does.
        """
        future = self._writes.submit_async(self._ack_item(targets))
        if self._compaction_due:
            with self._lock:
                due, self._compaction_due = self._compaction_due, False
            if due:
                # Queued behind; a failure leaves the journal as it was, to fold next time.
                self._writes.submit_async(None)
        return future

    @staticmethod
    def _ack_item(targets: Iterable[AckTarget]) -> _Write:
        """What a batch folds: whole entries as they are, batch indexes checked now as a delta."""
        listed = list(targets)
        if any(target.batch_index >= 0 for target in listed):
            return CursorState.ack_delta(listed), False
        return listed

    def acknowledge_cumulative(
        self, position: Position, batch_index: int = -1, batch_size: int = 0
    ) -> CursorState:
        """Acknowledge everything up to ``position`` (inclusive); durable when it returns."""
        scratch = CursorState()
        delta = scratch.acknowledge_cumulative(position, self.layout, batch_index, batch_size)
        self._submit(delta, replace=False)
        return delta

    def reset(self, position: Position) -> None:
        """Make ``position`` the next entry read; forgets later acknowledgements."""
        state = CursorState()
        state.reset(position, self.layout)
        self._submit(state, replace=True)

    def _submit(self, delta: CursorState, *, replace: bool) -> None:
        """Write ``delta`` with the other calls queued meanwhile; merged in memory on return."""
        self._writes.submit((delta, replace))
        self._compact_if_due()

    def _compact_if_due(self) -> None:
        if self._compaction_due:
            with self._lock:
                due, self._compaction_due = self._compaction_due, False
            if due:
                self.compact()

    def compact(self) -> None:
        """Fold the journal into a snapshot, from a fresh load: no other writer's delta is lost.

        Runs in turn with this object's writes (as an item of their group
        commit), so no write of this process lands between the load and the
        new in-memory state.
        """
        self._writes.submit(None)

    def _write(self, batch: list[_Write | None]) -> list[BaseException | None]:
        """One journal row for a batch of deltas, then the in-memory state (group commit).

        Whole-entry acknowledgements come as their targets and make one delta
        for the batch: building a delta per call would cost more than the
        call's share of the commit. ``None`` items ask for a compaction, done
        after the row; its failure goes to those items only (the row committed).
        """
        folded = CursorState()
        replace = False
        deltas = 0
        entries: list[AckTarget] = []
        for item in batch:
            if item is None:
                continue
            deltas += 1
            if isinstance(item, list):
                entries.extend(item)
                continue
            delta, replaces = item
            if replaces:
                # A reset forgets every acknowledgement before it, queued ones too.
                folded, replace, entries = CursorState(), True, []
            folded.merge(delta, None)
        if entries:
            folded.merge(CursorState.ack_delta(entries), None)
        if deltas:
            payload = cursor_codec.encode(folded, replace=replace)
            self.store.append_cursor_delta(self.topic_partition, self.subscription, payload)
            with self._lock:
                if replace:
                    # As replay() does with a replacing delta.
                    folded.normalize(self.layout)
                    self.state = folded
                else:
                    self.state.merge(folded, self.layout)
                self._journal_length += 1
                if self._journal_length >= COMPACT_AFTER_DELTAS:
                    self._journal_length = 0
                    self._compaction_due = True
        outcomes: list[BaseException | None] = [None] * len(batch)
        if deltas < len(batch):
            try:
                self._compact()
            except Exception as exc:
                outcomes = [exc if item is None else None for item in batch]
        return outcomes

    def _compact(self) -> None:
        record = self.store.load_cursor(self.topic_partition, self.subscription)
        state = replay(record, self.layout)
        self.store.compact_cursor(
            self.topic_partition, self.subscription, cursor_codec.encode(state), record.version
        )
        with self._lock:
            self.state = state
            self._journal_length = 0


__all__ = ["COMPACT_AFTER_DELTAS", "ManagedCursor", "replay"]
