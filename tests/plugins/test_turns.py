"""Turns: never more holders than allowed, and waiters served in the order they came
(a plain semaphore lets a newcomer take a freed slot first)."""

from __future__ import annotations

import threading
import time

import pytest

from cursorops.rest.turns import Turns


def wait_for(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_waiters_are_served_first_come_first_served() -> None:
    turns = Turns(1)
    order: list[int] = []
    release = threading.Event()

    def holder() -> None:
        with turns:
            release.wait()

    def waiter(number: int) -> None:
        with turns:
            order.append(number)

    first = threading.Thread(target=holder)
    first.start()
    wait_for(lambda: turns._free == 0)
    threads = []
    for number in range(20):
        thread = threading.Thread(target=waiter, args=(number,))
        thread.start()
        threads.append(thread)
        wait_for(lambda n=number: turns.waiting == n + 1)  # type: ignore[misc]
    release.set()
    # A newcomer arriving while the queue drains waits behind it.
    late = threading.Thread(target=waiter, args=(99,))
    late.start()
    for thread in [first, *threads, late]:
        thread.join(10)
    assert order == [*range(20), 99]
    assert turns._free == 1 and turns.waiting == 0


def test_never_more_holders_than_allowed() -> None:
    turns = Turns(3)
    inside = 0
    most = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(200):
            with turns:
                with lock:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0)
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert most == 3 and inside == 0
    assert turns._free == 3 and turns.waiting == 0


def test_a_turn_ends_when_its_holder_raises() -> None:
    turns = Turns(1)
    with pytest.raises(RuntimeError), turns:
        raise RuntimeError("the skip failed")
    with turns:  # not stuck
        pass
    assert turns._free == 1


def test_at_least_one_turn() -> None:
    with pytest.raises(ValueError):
        Turns(0)
