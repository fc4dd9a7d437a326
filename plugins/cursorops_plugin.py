"""cursorops inside Airflow's API server: the REST app under ``/cursorops``.

The app and everything it needs live in the installed ``cursorops_api`` package;
this file only declares the plugin.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from cursorops_api import URL_PREFIX, create_app


class CursorOpsPlugin(AirflowPlugin):
    name = "cursorops"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "cursorops REST (Pulsar admin v2)"}
    ]
