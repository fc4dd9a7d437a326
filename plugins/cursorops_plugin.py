"""cursorops inside Airflow's API server: the REST app under ``/cursorops``.

The app is the installed ``cursorops.rest`` package's, behind Airflow's login
(:mod:`cursorops.airflow.rest_app`); this file only declares the plugin.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from cursorops.airflow.rest_app import URL_PREFIX, create_app


class CursorOpsPlugin(AirflowPlugin):
    name = "cursorops"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "cursorops REST (Pulsar admin v2)"}
    ]
    # The Cursors pages (cursorops/rest/ui.py), in Airflow's navigation; Airflow shows them
    # in a same-origin iframe, so the page's requests carry the UI's _token cookie.
    external_views = [
        {
            "name": "Cursors",
            "href": f"{URL_PREFIX}/ui",
            "destination": "nav",
            "url_route": "cursors",
        }
    ]
