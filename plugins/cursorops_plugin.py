"""cursorops inside Airflow's API server (:mod:`cursorops.airflow.plugins.cursorops`).

The installed wheel registers the plugin through its ``airflow.plugins`` entry point;
this file offers it only when nothing installed does (a checkout on PYTHONPATH), so
Airflow never sees the plugin twice.
"""

from __future__ import annotations

from cursorops.airflow.plugins.cursorops import folder_plugin

CursorOpsPlugin = folder_plugin()
