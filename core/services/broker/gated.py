"""What the gated operations plan and apply through: the Broker's gating services.

Every gated operation (:mod:`cursorops.core.services.gating.registry`) reaches the stores only
through the :class:`~cursorops.core.services.gating.operation.GatingServices` the Broker hands in:
this collaborator, which carries the shared context (configuration, clock, stores,
authorization), the analysis that more than one operation reads through, and what an
operation keeps across requests (:meth:`GatedOperations.per_broker`, such as the skips'
queue of writes). The doors that ask for an operation, preview it, plan it into a run or
apply its approved record are the Broker's own (:mod:`cursorops.core.services.broker`); the
functions of one operation that are not a request (a seek, the list of applied skips)
take this collaborator first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar, cast

from cursorops.core.services.broker.analysis import Analysis
from cursorops.core.services.broker.context import BrokerContext, Collaborator

K = TypeVar("K")


class GatedOperations(Collaborator):
    """The services every gated operation plans and applies through."""

    def __init__(self, context: BrokerContext, analysis: Analysis) -> None:
        super().__init__(context)
        self.analysis = analysis
        self._kept: dict[str, object] = {}
        self._kept_lock = threading.Lock()

    def per_broker(self, name: str, make: Callable[[], K]) -> K:
        """The one ``name`` of this Broker, made by ``make`` on first use (under a lock:
        two threads asking at once get the same one)."""
        with self._kept_lock:
            if name not in self._kept:
                self._kept[name] = make()
            return cast(K, self._kept[name])


__all__ = ["GatedOperations"]
