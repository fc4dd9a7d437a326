"""cursorops's REST front door: Pulsar admin v2 paths and the Cursors pages.

:func:`create_app` builds the FastAPI app; the door that serves it injects who the
caller is and what starts a gated request's run (:mod:`cursorops.rest.deps`):
``cursorops standalone`` (:mod:`cursorops.wire.web`) with Pulsar's authentication, the
Airflow plugin (:mod:`cursorops.airflow.rest_app`) with Airflow's login. Nothing here
imports Airflow.
"""

from __future__ import annotations

from cursorops.rest.app import create_app
from cursorops.rest.deps import Principal

__all__ = ["Principal", "create_app"]
