"""The event-loop side of a wire consumer: its wake-up event and its dispatch task.

The consumer's state (permits, what it holds) is its :class:`~cursorops.wire.sessions.WireConsumer`;
the task that delivers to it is its session's (:meth:`cursorops.wire.session.Session.start`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from cursorops.wire.sessions import WireConsumer


@dataclass(eq=False)
class ConsumerLoop:
    """The loop side of a wire consumer: its permits and its dispatch task."""

    wire: WireConsumer
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


async def stop(loop: ConsumerLoop) -> None:
    """Stop the consumer's dispatch task (its permits stay; it may be resumed)."""
    task, loop.task = loop.task, None
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
