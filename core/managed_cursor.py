"""A cursor bound to the metadata store: every acknowledgement durable on return.

The stored form is a snapshot plus a journal of deltas (see
``docs/architecture.md``). Opening a cursor replays the journal over the
snapshot; each mutation appends one delta in one transaction before it returns.
Nothing is capped: unlike Pulsar's ``managedLedgerMaxUnackedRangesToPersist``,
every individually deleted range and every batch ack set is persisted.

Writers to one cursor may live in different processes (consumers acking while
an admin skips): deltas are unions of acknowledgements, so none is lost, and
the store serializes the appends with a row lock.

Threads may share one cursor: concurrent acknowledgements go to the store
together (group commit: they share one transaction, each returning once its
own delta committed), and the in-memory state is then updated under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from core import cursor_codec
from core.cursor import AckTarget, CursorState
from core.ledger_layout import LedgerLayout
from core.position import Position

if TYPE_CHECKING:
    from core.store.metadata import AuditEntry, CursorRecord, MetadataStore

COMPACT_AFTER_DELTAS = 512
"""Journal length after which a writer folds the journal into a new snapshot."""


def replay(record: CursorRecord, layout: LedgerLayout) -> CursorState:
    """The state a stored record describes: snapshot, then every later delta."""
    state = CursorState()
    if record.snapshot is not None:
        state, _ = cursor_codec.decode(record.snapshot)
    for payload in record.deltas:
        delta, replace = cursor_codec.decode(payload)
        if replace:
            state = delta
        else:
            state.merge(delta, None)
    state.normalize(layout)
    return state


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

    @classmethod
    def open(
        cls, store: MetadataStore, topic_partition: str, subscription: str, layout: LedgerLayout
    ) -> ManagedCursor:
        """Load the cursor (raises SubscriptionNotFoundError)."""
        record = store.load_cursor(topic_partition, subscription)
        state = replay(record, layout)
        return cls(store, topic_partition, subscription, layout, state, len(record.deltas))

    @property
    def mark_delete(self) -> Position:
        return self.state.mark_delete

    def refresh(self, layout: LedgerLayout | None = None) -> None:
        """Reload from the store, picking up other writers' acknowledgements."""
        if layout is not None:
            self.layout = layout
        record = self.store.load_cursor(self.topic_partition, self.subscription)
        self.state = replay(record, self.layout)
        self._journal_length = len(record.deltas)

    def acknowledge(self, targets: Iterable[AckTarget]) -> CursorState:
        """Individually acknowledge entries and batch indexes; durable when it returns."""
        delta = CursorState.ack_delta(targets)
        self._persist(delta, replace=False)
        with self._lock:
            self.state.merge(delta, self.layout)
        self._appended()
        return delta

    def acknowledge_cumulative(
        self, position: Position, batch_index: int = -1, batch_size: int = 0
    ) -> CursorState:
        """Acknowledge everything up to ``position`` (inclusive); durable when it returns."""
        scratch = CursorState()
        delta = scratch.acknowledge_cumulative(position, self.layout, batch_index, batch_size)
        self._persist(delta, replace=False)
        with self._lock:
            self.state.merge(delta, self.layout)
        self._appended()
        return delta

    def reset(self, position: Position) -> None:
        """Make ``position`` the next entry read; forgets later acknowledgements."""
        state = CursorState()
        state.reset(position, self.layout)
        self._persist(state, replace=True)
        with self._lock:
            self.state = state
        self._appended()

    def _persist(self, delta: CursorState, *, replace: bool) -> None:
        payload = cursor_codec.encode(delta, replace=replace)
        self.store.append_cursor_delta(self.topic_partition, self.subscription, payload)

    def _appended(self) -> None:
        with self._lock:
            self._journal_length += 1
            due = self._journal_length >= COMPACT_AFTER_DELTAS
            if due:
                self._journal_length = 0
        if due:
            self.compact()

    def compact(self) -> None:
        """Fold the journal into a snapshot, from a fresh load: no other writer's delta is lost."""
        record = self.store.load_cursor(self.topic_partition, self.subscription)
        state = replay(record, self.layout)
        self.store.compact_cursor(
            self.topic_partition, self.subscription, cursor_codec.encode(state), record.version
        )
        with self._lock:
            self.state = state
            self._journal_length = 0


def acknowledge_deciding(
    store: MetadataStore,
    cursors: Sequence[ManagedCursor],
    decide: Callable[[list[CursorState]], tuple[list[list[AckTarget]], AuditEntry | None]],
) -> None:
    """Acknowledge on several cursors of ``store`` at once, deciding what from their state.

    One transaction for all: each cursor's current state is read under its row
    lock and given to ``decide``, which returns the targets to acknowledge per
    cursor (in order) and an audit record. Every cursor gets its
    acknowledgements and the audit record is written, or nothing is: a
    multi-partition skip never applies to only some partitions, never goes
    unrecorded, and no other writer's acknowledgement lands between what
    ``decide`` saw and what is written. The cursors' in-memory states are left
    as they were: :meth:`ManagedCursor.refresh` to read the result.
    """

    def on_records(records: list[CursorRecord]) -> tuple[list[bytes | None], AuditEntry | None]:
        states = [replay(r, c.layout) for r, c in zip(records, cursors, strict=True)]
        targets, audit = decide(states)
        payloads = [
            cursor_codec.encode(CursorState.ack_delta(chosen)) if chosen else None
            for chosen in targets
        ]
        return payloads, audit

    store.append_cursor_deltas_deciding(
        [(cursor.topic_partition, cursor.subscription) for cursor in cursors], on_records
    )
