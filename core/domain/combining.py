"""Requests that would wait for each other anyway wait together, and are then applied
together, in one batch, by one of their threads.

Skips of one subscription that touch the same partitions lock the same cursor rows, so
they run one after the other whatever this process does; run one by one, each also
pays for its own transaction, its own read and replay of the cursors, its own commit.
A :class:`Combiner` keeps, per key, the batches being applied and the resources
(partitions) each holds. A request whose resources are free, and that no waiter needs
either, starts at once, alone; any other waits. When a batch ends, the waiters in order
of arrival form the next batches: the first whose resources are free leads one, and
every later waiter that needs nothing another running batch holds joins it (up to
``max_batch``). No waiter overtakes an earlier one that needs the same resource. So a
request waits only for batches on what it needs (never for one on resources it leaves
alone), and when nothing else is waiting it is applied alone, at once, as if there
were no combiner.

A batch that fails is applied again one request at a time, so each request gets its
own result or its own error, exactly as if it had been applied alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Request = TypeVar("Request")
Result = TypeVar("Result")


class _Waiting(Generic[Request, Result]):
    """One submitted request: what it asks and needs, and its result or error once applied."""

    __slots__ = ("batch", "done", "error", "holds", "needs", "request", "result", "settled")

    def __init__(self, request: Request, needs: frozenset[Hashable]) -> None:
        self.request = request
        self.needs = needs
        self.done = threading.Event()
        self.batch: list[_Waiting[Request, Result]] | None = None
        """Set when this request leads a batch: the requests it applies, itself first."""
        self.holds: set[Hashable] = set()
        """What the batch it leads holds: its entry in :attr:`_Queue.running`."""
        self.settled = False
        self.result: Result | None = None
        self.error: BaseException | None = None

    def outcome(self) -> Result:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


@dataclass
class _Queue(Generic[Request, Result]):
    """One key's batches being applied (the resources each holds) and its waiters."""

    running: list[set[Hashable]] = field(default_factory=list)
    waiting: list[_Waiting[Request, Result]] = field(default_factory=list)

    def free(self, needs: frozenset[Hashable], but: set[Hashable] | None = None) -> bool:
        """Whether no running batch (``but`` that one) holds any of ``needs``."""
        return all(held is but or held.isdisjoint(needs) for held in self.running)

    def next_leader(self) -> tuple[int, set[Hashable]] | None:
        """The first waiter that can lead a batch now, and what the waiters before it need
        (no later waiter overtakes them on it); None when none can."""
        ahead: set[Hashable] = set()
        for index, waiting in enumerate(self.waiting):
            if ahead.isdisjoint(waiting.needs) and self.free(waiting.needs):
                return index, ahead
            ahead |= waiting.needs
        return None


class Combiner(Generic[Key, Request, Result]):
    """Applies the requests of a key in batches: ``apply(key, requests)`` returns one
    result per request, in their order; thread-safe."""

    def __init__(
        self,
        apply: Callable[[Key, Sequence[Request]], Sequence[Result]],
        *,
        max_batch: int,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be 1 or more, not {max_batch}")
        self._apply = apply
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queues: dict[Key, _Queue[Request, Result]] = {}

    def submit(self, key: Key, needs: frozenset[Hashable], request: Request) -> Result:
        """``request``, which needs the resources ``needs``, applied alone or with others of
        ``key``: its result, or its error."""
        me: _Waiting[Request, Result] = _Waiting(request, needs)
        with self._lock:
            queue = self._queues.setdefault(key, _Queue())
            if queue.free(needs) and all(w.needs.isdisjoint(needs) for w in queue.waiting):
                me.batch, me.holds = [me], set(needs)
                queue.running.append(me.holds)
            else:
                queue.waiting.append(me)
        if me.batch is None:
            me.done.wait()
            if me.batch is None:
                return me.outcome()
        try:
            self._run(key, me.batch)
        finally:
            with self._lock:
                self._hand_over(key, me.holds)
        return me.outcome()

    def waiting(self, key: Key) -> int:
        """How many requests of ``key`` wait for a batch to end."""
        with self._lock:
            queue = self._queues.get(key)
            return 0 if queue is None else len(queue.waiting)

    def running(self, key: Key) -> int:
        """How many batches of ``key`` are being applied now."""
        with self._lock:
            queue = self._queues.get(key)
            return 0 if queue is None else len(queue.running)

    def _hand_over(self, key: Key, held: set[Hashable]) -> None:
        """A batch holding ``held`` ended: start every batch the waiters can now form."""
        queue = self._queues[key]
        queue.running = [h for h in queue.running if h is not held]
        while (found := queue.next_leader()) is not None:
            first, ahead = found
            leader = queue.waiting[first]
            taking: set[Hashable] = set(leader.needs)
            queue.running.append(taking)
            batch = [leader]
            for waiting in queue.waiting[first + 1 :]:
                if len(batch) == self._max_batch:
                    break
                if ahead.isdisjoint(waiting.needs) and queue.free(waiting.needs, but=taking):
                    batch.append(waiting)
                    taking |= waiting.needs
                else:
                    ahead |= waiting.needs
            chosen = {id(w) for w in batch}
            queue.waiting = [w for w in queue.waiting if id(w) not in chosen]
            leader.batch, leader.holds = batch, taking
            leader.done.set()
        if not queue.running and not queue.waiting:
            del self._queues[key]

    def _run(self, key: Key, batch: list[_Waiting[Request, Result]]) -> None:
        """Apply ``batch``: every member ends settled, and every other member is woken."""
        try:
            try:
                results = self._apply(key, [w.request for w in batch])
            except Exception as error:
                if len(batch) == 1:
                    batch[0].error = error
                else:
                    for waiting in batch:
                        self._alone(key, waiting)
            else:
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"A batch of {len(batch)} requests gave {len(results)} results"
                    )
                for waiting, result in zip(batch, results, strict=True):
                    waiting.result = result
            for waiting in batch:
                waiting.settled = True
        except BaseException as error:
            for waiting in batch:
                if not waiting.settled:
                    waiting.error = error
            raise
        finally:
            for waiting in batch[1:]:
                waiting.done.set()

    def _alone(self, key: Key, waiting: _Waiting[Request, Result]) -> None:
        try:
            waiting.result = self._apply(key, [waiting.request])[0]
        except Exception as error:
            waiting.error = error


__all__ = ["Combiner"]
