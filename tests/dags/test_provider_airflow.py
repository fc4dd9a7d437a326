"""cursorops as Airflow sees it once installed: a provider with its connection type, the
``cursorops_default`` connection the launcher configures, and the plugin loaded once."""

from __future__ import annotations

import json
import subprocess

import pytest

from cursorops.core.domain.config import Config
from tests.airflow_harness import Airflow

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def _airflow_cli(airflow: Airflow, *args: str) -> str:
    done = subprocess.run(
        ["airflow", *args],
        env=airflow.environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _json(text: str) -> object:
    """The JSON document of a CLI's output (Airflow may log lines before it)."""
    return json.loads(text[min(i for i in (text.find("["), text.find("{")) if i >= 0) :])


def test_airflow_lists_the_provider_and_its_connection_type(airflow: Airflow) -> None:
    providers = _json(_airflow_cli(airflow, "providers", "list", "-o", "json"))
    assert isinstance(providers, list)
    [ours] = [p for p in providers if p["package_name"] == "cursorops"]
    assert ours["version"]
    hooks = _json(_airflow_cli(airflow, "providers", "hooks", "-o", "json"))
    assert isinstance(hooks, list)
    [hook] = [h for h in hooks if h["connection_type"] == "cursorops"]
    assert hook["class"] == "cursorops.airflow.hooks.cursorops.CursorOpsHook"
    assert hook["package_name"] == "cursorops" and hook["hook_name"] == "cursorops"
    assert hook["conn_id_attribute_name"] == "cursorops_conn_id"


def test_the_launcher_configures_cursorops_default_as_the_home_it_runs(
    airflow: Airflow, cursorops_home: Config
) -> None:
    connection = _json(
        _airflow_cli(airflow, "connections", "get", "cursorops_default", "-o", "json")
    )
    assert isinstance(connection, list)
    [fields] = connection
    assert fields["conn_type"] == "cursorops"
    assert fields["extra_dejson"] == {"home": str(cursorops_home.home)}


def test_the_plugin_loads_once_with_no_import_error(airflow: Airflow) -> None:
    plugins = airflow.get("admin", "/api/v2/plugins")["plugins"]
    assert [p["name"] for p in plugins].count("cursorops") == 1
    errors = airflow.get("admin", "/api/v2/plugins/importErrors")
    assert errors["total_entries"] == 0, errors
