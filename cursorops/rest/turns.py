"""Turns: at most ``n`` holders at once, and the others served in the order they came.

``threading.Semaphore`` lets a newcomer take a slot that was just freed before the
waiter it woke gets to run, so under load one request can wait through many turns
while later ones go first: a long tail of latency for nothing. Here a freed slot
is handed to the oldest waiter directly.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class Turns:
    """A context manager: enter waits for a turn (first come, first served), exit ends it."""

    def __init__(self, at_once: int) -> None:
        if at_once < 1:
            raise ValueError(f"at_once must be at least 1, not {at_once}")
        self._free = at_once
        self._waiting: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    def __enter__(self) -> Turns:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return self
            mine = threading.Event()
            self._waiting.append(mine)
        mine.wait()  # set by the exit that hands this waiter its turn
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()  # the turn passes on: _free is unchanged
            else:
                self._free += 1

    @property
    def waiting(self) -> int:
        """How many wait for a turn now."""
        with self._lock:
            return len(self._waiting)
