"""Group commit: concurrent callers share one transaction, each returning once it committed.

A durable write costs one commit (an fsync on SQLite, a WAL flush on
PostgreSQL) whatever it holds. Callers of :meth:`GroupCommit.submit` queue
their item; one of them, the leader, takes everything queued, commits it in
one batch and wakes the others with their own outcome. Requests that arrive
during that commit form the next batch, led by the first of them: the more
concurrent callers, the larger the batches, and nobody waits on a timer.

Every caller returns only after the batch holding its item committed, with
that item's result, or raises that item's error: the batch function reports
an outcome per item, and an exception it raises goes to every caller of the
batch (nothing of a failed batch was committed).

Waiting costs no polling and no per-call condition object: each waiting
caller blocks on a lock of its own, taken when it queued, which the leader
releases once the caller's outcome (or the leadership) is set. That is the
one-shot wake-up a :class:`threading.Condition` gives each waiter, without
its bookkeeping: a woken caller never contends for a shared lock again, which
matters when dozens of callers of one batch wake at once under the GIL.

:meth:`GroupCommit.submit_async` is the asyncio form (Pulsar's
``acknowledgeAsync``): it queues without blocking and returns an asyncio
future that completes once the item committed, so one task may have many
items in flight and thousands of tasks share commits without a thread each.
Such items are led by a writer thread of the committer's own, started when
one finds no batch in flight; a blocking caller that leads hands the next
batch to that thread when the batch starts with an asyncio item, so a
blocking call never waits on later batches. A batch's asyncio futures are
completed by one callback per event loop, not one cross-thread wake-up each.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Request(Generic[Item, Result]):
    __slots__ = ("item", "outcome", "failure", "leads", "wake", "future")

    def __init__(self, item: Item, future: asyncio.Future[Result] | None = None) -> None:
        self.item = item
        self.outcome: Result | None = None
        self.failure: BaseException | None = None
        self.leads = False
        self.future = future
        """Set for :meth:`GroupCommit.submit_async` items: nobody blocks on ``wake``."""
        if future is None:
            self.wake = threading.Lock()
            self.wake.acquire()
        else:
            self.wake = _NOBODY_BLOCKS


_NOBODY_BLOCKS = threading.Lock()
"""The ``wake`` of every asyncio request: never acquired, so none needs a lock of its own."""


def _complete(requests: list[_Request[Item, Result]]) -> None:
    """Hand a batch's outcomes to its asyncio futures (in their event loop's thread)."""
    for request in requests:
        future = request.future
        if future is None or future.cancelled():
            continue
        if request.failure is not None:
            future.set_exception(request.failure)
        else:
            future.set_result(request.outcome)  # type: ignore[arg-type]


class GroupCommit(Generic[Item, Result]):
    """Batches concurrent :meth:`submit` calls into calls of ``commit``.

    ``commit`` gets the items of a batch in arrival order and returns, per
    item, its result or the exception that item's caller should get. Calls of
    ``commit`` never overlap.
    """

    def __init__(self, commit: Callable[[list[Item]], Sequence[Result | BaseException]]) -> None:
        self._commit = commit
        self._lock = threading.Lock()
        self._queue: list[_Request[Item, Result]] = []
        self._busy = False
        self.batches = 0
        """Batches committed so far (for measurements)."""

    @property
    def busy(self) -> bool:
        """A batch is being written now."""
        return self._busy

    @property
    def queued(self) -> int:
        """Requests waiting for the next batch."""
        return len(self._queue)

    def submit(self, item: Item) -> Result:
        """Commit ``item`` with whatever else is queued; its result once durable."""
        request: _Request[Item, Result] = _Request(item)
        with self._lock:
            self._queue.append(request)
            if not self._busy:
                self._busy = True
                request.leads = True
        if not request.leads:
            request.wake.acquire()
        if request.leads and self._lead():
            self._start_writer()
        if request.failure is not None:
            raise request.failure
        return request.outcome  # type: ignore[return-value]

    def submit_async(self, item: Item) -> asyncio.Future[Result]:
        """Queue ``item`` without waiting; the future completes once it committed.

        Call it from a running event loop; the future belongs to that loop.
        """
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        request: _Request[Item, Result] = _Request(item, future)
        with self._lock:
            self._queue.append(request)
            start = not self._busy
            self._busy = True
        if start:
            self._start_writer()
        return future

    def _start_writer(self) -> None:
        """Lead the queued batches from a thread of our own, while they start with asyncio items."""
        threading.Thread(target=self._write_batches, name="group-commit", daemon=True).start()

    def _write_batches(self) -> None:
        while self._lead():
            pass

    def _lead(self) -> bool:
        """Commit every queued request, then hand leadership to the first that came meanwhile.

        True when that first request is an asyncio item: nobody blocks on it,
        so the caller must lead the next batch (or have the writer thread lead it).
        """
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            outcomes: Sequence[Result | BaseException] = self._commit([r.item for r in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError("group commit: one outcome per item expected")
        except BaseException as exc:  # every caller of the failed batch gets its error
            outcomes = [exc] * len(batch)
        for request, outcome in zip(batch, outcomes, strict=True):
            request.leads = False
            if isinstance(outcome, BaseException):
                request.failure = outcome
            else:
                request.outcome = outcome
        with self._lock:
            self.batches += 1
            following = self._queue[0] if self._queue else None
            if following is None:
                self._busy = False
            else:
                following.leads = True
        # The next leader first: its commit overlaps the wake-up of this batch.
        lead_next = following is not None and following.future is not None
        if following is not None and not lead_next:
            following.wake.release()
        by_loop: dict[asyncio.AbstractEventLoop, list[_Request[Item, Result]]] = {}
        for request in batch:
            if request.future is None:
                request.wake.release()
            else:
                by_loop.setdefault(request.future.get_loop(), []).append(request)
        for loop, requests in by_loop.items():
            # A closed loop raises: nobody awaits its futures any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_complete, requests)
        return lead_next


__all__ = ["GroupCommit"]
