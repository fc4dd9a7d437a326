"""Stored cursor records as states: replaying a snapshot and the deltas after it.

A cursor is stored as a snapshot plus a journal of deltas (docs/architecture.md,
"Cursor durability"); only the cursor door (:mod:`cursorops.core.store.cursor_door`) reads
and writes that form. What it reads comes here to become a
:class:`~cursorops.core.domain.acks.cursor.CursorState`: :func:`replay` of a whole record,
:func:`replay_since` of the deltas a reader has not seen, through the states this
process replayed last (:class:`Replays`). Nothing here touches the store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.acks.cursor import CursorState
from cursorops.core.domain.errors import SubscriptionNotFoundError
from cursorops.core.domain.ids.position import Position
from cursorops.core.store.values import CursorRecord

if TYPE_CHECKING:
    from cursorops.core.domain.acks.ledger_layout import LedgerLayout


@dataclass(frozen=True)
class ReadPosition:
    """The dispatcher's read position on a partition
    (:mod:`cursorops.core.store.dispatch_state`)."""

    settled_through: Position
    """Every message at or before it is acknowledged or held by a consumer."""
    cursor_version: int
    """The cursor's journal version when it was set."""


@dataclass(frozen=True)
class JournalSince:
    """A cursor's journal read from a known version on
    (:meth:`~cursorops.core.store.cursor_door.CursorTransaction.since`)."""

    cursor_id: int
    reloaded: bool
    """The snapshot was read: start from it, not from the caller's state."""
    snapshot: bytes | None
    snapshot_version: int
    deltas: list[tuple[int, bytes]]
    """(version, payload) after the caller's version (or after the snapshot), in order."""
    version: int
    read_position: ReadPosition | None
    """The subscription's read position on the partition, if one was stored. Read with the
    cursor because it is valid only against the cursor version it records."""


def missing(topic_partition: str, subscription: str) -> SubscriptionNotFoundError:
    return SubscriptionNotFoundError.of(topic_partition, subscription)


class Replays:
    """The cursor states this process replayed last: a snapshot's bytes, the deltas
    applied after it, and the state they make (merged, not yet normalized).

    Every skip replays the cursors it touches from their stored snapshot and
    journal, and a cursor that random skips left with many partly acknowledged
    batches decodes slowly (a Python object per batch): over the REST benchmark,
    most of a skip's CPU. That state is a function of the bytes alone, so a replay
    whose snapshot is a kept one and whose deltas start with the kept deltas goes
    on from the kept state and decodes only the deltas after them. No writer can
    make a kept state stale: a new snapshot is new bytes, and a journal only grows
    until it is folded into one. Callers get a copy; the kept state is never
    handed out. Bounded by the bytes kept, least recently used out first;
    thread-safe.
    """

    def __init__(self, max_bytes: int) -> None:
        self._kept: OrderedDict[bytes, tuple[tuple[bytes, ...], CursorState, int]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def replay(self, snapshot: bytes | None, deltas: Sequence[bytes]) -> tuple[CursorState, int]:
        """``snapshot`` (None: an empty cursor) with every delta merged in order, a
        replacing delta starting over from itself, not normalized, as a copy the caller
        owns; and how many of ``deltas`` run through the last replacing one (0 when none
        replaces): the caller names the reset it started over from."""
        key = b"" if snapshot is None else snapshot
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        state, start, replaced = None, 0, 0
        if kept is not None and tuple(deltas[: len(kept[0])]) == kept[0]:
            state, start, replaced = kept[1].copy(), len(kept[0]), kept[2]
        if state is None:
            state = CursorState() if snapshot is None else cursor_codec.decode(snapshot)[0]
        for index in range(start, len(deltas)):
            delta, replace = cursor_codec.decode(deltas[index])
            if replace:
                state, replaced = delta, index + 1
            else:
                state.merge(delta, None)
        if kept is None or (start < len(deltas) and len(deltas) >= len(kept[0])):
            self._keep(key, tuple(deltas), state.copy(), replaced)
        return state, replaced

    def _keep(
        self, key: bytes, deltas: tuple[bytes, ...], state: CursorState, replaced: int
    ) -> None:
        size = len(key) + sum(len(delta) for delta in deltas)
        if size > self._max_bytes:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= len(key) + sum(len(delta) for delta in old[0])
            self._kept[key] = (deltas, state, replaced)
            self._bytes += size
            while self._bytes > self._max_bytes:
                dropped, (dropped_deltas, _, _) = self._kept.popitem(last=False)
                self._bytes -= len(dropped) + sum(len(delta) for delta in dropped_deltas)


REPLAYS = Replays(max_bytes=16 * 1024 * 1024)
"""This process's replayed cursors (16 MiB of snapshot and delta bytes; the states take a
few times that in memory)."""


def replay(record: CursorRecord, layout: LedgerLayout) -> CursorState:
    """The state a stored record describes: snapshot, then every later delta."""
    state, _ = replay_since(None, None, record.snapshot, enumerate(record.deltas, 1), layout)
    return state


def replay_since(
    state: CursorState | None,
    last_reset: int | None,
    snapshot: bytes | None,
    deltas: Iterable[tuple[int, bytes]],
    layout: LedgerLayout,
) -> tuple[CursorState, int]:
    """A state carried forward over ``(version, payload)`` deltas: ``(state, last reset)``.

    ``state`` None starts from ``snapshot`` (or an empty cursor); a known state is
    carried on from where its reader left it. A replacing delta (a reset) starts
    over from itself; ``last reset`` is the version of the newest one seen (0
    when none), for readers whose cached positions a reset voids.
    """
    if state is None:
        # From the snapshot: the whole journal after it, through what this process kept.
        listed = list(deltas)
        state, replaced = REPLAYS.replay(snapshot, [payload for _, payload in listed])
        state.normalize(layout)
        return state, listed[replaced - 1][0] if replaced else 0
    last_reset = last_reset or 0
    for version, payload in deltas:
        delta, replace = cursor_codec.decode(payload)
        if replace:
            state, last_reset = delta, version
            state.normalize(layout)
        else:
            state.merge(delta, layout)
    return state, last_reset


__all__ = [
    "REPLAYS",
    "JournalSince",
    "ReadPosition",
    "Replays",
    "missing",
    "replay",
    "replay_since",
]
