"""cursorops's REST front door: Pulsar admin v2 paths inside Airflow's API server.

:func:`create_app` builds the FastAPI app that ``plugins/cursorops_plugin.py``
mounts under :data:`URL_PREFIX`. Every route needs Airflow's login (a bearer
token from ``/auth/token`` or the UI's ``_token`` cookie); the Airflow user acts
as the Pulsar role :func:`cursorops.airflow.environment.pulsar_role` maps it to.
"""

from __future__ import annotations

from cursorops.rest.app import URL_PREFIX, create_app

__all__ = ["URL_PREFIX", "create_app"]
