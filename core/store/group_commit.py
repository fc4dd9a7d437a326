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
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Request(Generic[Item, Result]):
    __slots__ = ("item", "outcome", "failure", "leads", "wake")

    def __init__(self, item: Item) -> None:
        self.item = item
        self.outcome: Result | None = None
        self.failure: BaseException | None = None
        self.leads = False
        self.wake = threading.Lock()
        self.wake.acquire()


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
        if request.leads:
            self._lead()
        if request.failure is not None:
            raise request.failure
        return request.outcome  # type: ignore[return-value]

    def _lead(self) -> None:
        """Commit every queued request, then hand leadership to the first that came meanwhile."""
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
        if following is not None:
            following.wake.release()
        for request in batch:
            request.wake.release()


__all__ = ["GroupCommit"]
