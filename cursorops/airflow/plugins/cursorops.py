"""cursorops inside Airflow's API server: the REST app under ``/cursorops``, behind Airflow's
login (:mod:`cursorops.airflow.rest_app`), the Cursors pages in Airflow's navigation, and
the refusal of a late answer to an approval gate that no longer waits
(:mod:`cursorops.airflow.late_answers`).

Registered by the wheel's ``airflow.plugins`` entry point, so installing cursorops is
enough. The design's ``plugins/cursorops_plugin.py`` only hands Airflow this class when no
installed distribution registers it (:func:`folder_plugin`): Airflow keeps the first
plugin of a name and reports any second one as an import error.
"""

from __future__ import annotations

from importlib.metadata import distributions

from airflow.plugins_manager import AirflowPlugin

from cursorops.airflow.late_answers import LateAnswers
from cursorops.airflow.rest_app import URL_PREFIX, create_app

ENTRY_POINT_GROUP = "airflow.plugins"


class CursorOpsPlugin(AirflowPlugin):
    name = "cursorops"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "cursorops REST (Pulsar admin v2)"}
    ]
    fastapi_root_middlewares = [
        {"middleware": LateAnswers, "name": "cursorops: refuse late answers to ended gates"}
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


def registered_by_entry_point() -> bool:
    """Whether an installed distribution registers :class:`CursorOpsPlugin` through
    ``airflow.plugins`` (Airflow loads it from there)."""
    wanted = f"{__name__}:{CursorOpsPlugin.__name__}"
    # Every distribution, as Airflow reads them (not importlib's first of each name).
    return any(
        point.group == ENTRY_POINT_GROUP and point.value == wanted
        for dist in distributions()
        for point in dist.entry_points
    )


def folder_plugin() -> type[CursorOpsPlugin] | None:
    """What the plugins folder's file offers Airflow: the plugin class when no installed
    entry point registers it (a checkout used without installing), else nothing."""
    return None if registered_by_entry_point() else CursorOpsPlugin
