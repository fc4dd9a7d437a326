"""The api-server's start-up heap, moved out of the garbage collector's way.

A worker of Airflow's api-server holds over 600,000 objects once it has
loaded Airflow, FastAPI, SQLAlchemy and the plugins: modules, classes, models,
compiled statements. They live as long as the process, yet every full collection
walks them all. Under ``benchmarks/rest_load.py``'s load that walk came every 10
to 15 seconds and stopped the worker for 400 to 550 ms (timed with ``gc.callbacks``
in each worker), and every request the worker held waited through it: the slowest
1% of requests came in bursts that ended just after one.

:class:`FreezeHeap` calls :func:`gc.freeze` when its process serves its first
request, once the start-up is over: everything allocated until then moves to the
permanent generation, which collections skip. What requests allocate afterwards is
collected as before. Objects that were already garbage then stay allocated: a
fixed amount, once per process. The standalone broker serves the same app on its
REST port (``cursorops/wire/web.py``), and its process is frozen the same way.
"""

from __future__ import annotations

import gc

from cursorops.rest.limits import ASGIApp, Receive, Scope, Send


class FreezeHeap:
    """ASGI middleware: :func:`gc.freeze` once per process, on its first request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.frozen = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.frozen:
            self.frozen = True
            gc.freeze()
        await self.app(scope, receive, send)
