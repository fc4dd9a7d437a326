"""Group commit of the produce path.

A ``CommandSend`` is parsed on the loop and queued to the :class:`Appender`, which
appends everything queued meanwhile in one store call per partition and then
answers each send, in order. A receipt is sent only once the entry is committed,
so a receipted message survives a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from cursorops.core.domain.errors import CursorOpsError
from cursorops.core.domain.ids.position import Position
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry
from cursorops.wire.store_thread import StoreThread

log = logging.getLogger("cursorops.protocol")

Result = tuple[Position | None, BaseException | None]
"""Where an entry was stored, or why it was not."""


@dataclass
class Pending:
    """One send waiting for its group commit; ``done`` answers it (on the loop)."""

    role: str
    topic: str
    entry: Entry
    done: Callable[[Position | None, BaseException | None], None]


class Appender:
    """Group commit: what is queued while one append runs goes in the next, together.

    ``wake`` is told each topic a commit appended to, so its waiting consumers look again.
    """

    def __init__(self, store: StoreThread, broker: Broker, wake: Callable[[str], None]) -> None:
        self._store = store
        self._broker = broker
        self._wake = wake
        self._queue: list[Pending] = []
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def submit(self, item: Pending) -> None:
        self._queue.append(item)
        self._ready.set()

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            items, self._queue = self._queue, []
            if not items:
                continue
            try:
                results = await self._store.run(self._append, items)
            except Exception as exc:
                # Nothing of the group was receipted: every send of it fails, and the
                # appender goes on (a dead appender would leave every producer waiting).
                log.exception("group commit of %d entries failed", len(items))
                results = [(None, exc)] * len(items)
            touched = set()
            for item, (position, error) in zip(items, results, strict=True):
                try:
                    item.done(position, error)
                except Exception:
                    log.exception("answering a send failed")
                if error is None:
                    touched.add(item.topic)
            for topic in touched:
                self._wake(topic)

    async def drain(self) -> None:
        """Append what is queued (at shutdown), then stop."""
        if self._task is not None:
            while self._queue:
                await asyncio.sleep(0.01)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _append(self, items: list[Pending]) -> list[Result]:
        by_topic: dict[tuple[str, str], list[int]] = {}
        for number, item in enumerate(items):
            by_topic.setdefault((item.role, item.topic), []).append(number)
        results: list[Result] = [(None, None)] * len(items)
        for (role, topic), numbers in by_topic.items():
            try:
                positions = self._broker.producing.append_entries(
                    role, topic, [items[n].entry for n in numbers]
                )
            except (CursorOpsError, ValueError) as exc:
                for n in numbers:
                    results[n] = (None, exc)
                continue
            for n, position in zip(numbers, positions, strict=True):
                results[n] = (position, None)
        return results
