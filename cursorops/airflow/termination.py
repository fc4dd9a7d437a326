"""A task that must end on SIGTERM ends, even when the first raise is lost.

Airflow's SIGTERM handler in a task calls the operator's ``on_kill`` in the main
thread, between two bytecodes of whatever it was running. An exception raised
there ends the task, except when the main thread was running a callback of the
garbage collector (a weakref callback, a ``__del__``): Python prints "Exception
ignored in ..." and goes on, and the task runs to its end or to the SIGKILL that
follows. That was seen once in a Spark task on Connect, stopped while it imported
pyspark (SQLAlchemy's weakref callback swallowed the raise).

:meth:`Termination.stop` raises, and until the work that :meth:`Termination.running`
wraps has ended, delivers SIGTERM to the process again every
:data:`AGAIN_EVERY_S` seconds, so the next raise lands elsewhere. Once the work
has ended (returned or raised), a late SIGTERM raises nothing: the task's own
ending, and the report of its state, are never interrupted by it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

AGAIN_EVERY_S = 1.0


class Termination:
    """The main thread's work of one task, and its stop on SIGTERM."""

    def __init__(self) -> None:
        self._ended = threading.Event()
        self._watching = False

    @contextmanager
    def running(self) -> Iterator[None]:
        """Wraps the work that :meth:`stop` ends."""
        try:
            yield
        finally:
            self._ended.set()

    @property
    def ended(self) -> bool:
        """The work has returned or raised."""
        return self._ended.is_set()

    def stop(self, error: BaseException) -> None:
        """Called in the SIGTERM handler: raise ``error`` while the work runs, and keep
        delivering SIGTERM until it has ended. Does nothing once it has."""
        if self._ended.is_set():
            return
        if not self._watching:
            self._watching = True
            threading.Thread(target=self._again, name="termination", daemon=True).start()
        raise error

    def _again(self) -> None:
        while not self._ended.wait(AGAIN_EVERY_S):
            os.kill(os.getpid(), signal.SIGTERM)


__all__ = ["Termination"]
