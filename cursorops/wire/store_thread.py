"""The one thread that uses the broker and its stores.

The event loop hands every broker call to it, so the loop keeps serving pings and
other connections while a commit or a dispatch runs. One thread, so the broker's
in-memory state (deduplication, Key_Shared ranges, readers' subscriptions) is
touched by one caller at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class StoreThread:
    """The one thread that uses the broker and its stores."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cursorops-store")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
