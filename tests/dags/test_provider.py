"""The provider's metadata, the cursorops connection and the hook, without a running Airflow."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from cursorops.airflow.hooks import CursorOpsHook
from cursorops.airflow.hooks.cursorops import FIELDS, config_from
from cursorops.airflow.plugins import cursorops as plugin_module
from cursorops.airflow.provider import get_provider_info
from cursorops.core.domain.errors import InvalidArgumentError


def test_the_provider_info_is_what_airflow_validates_and_names_the_hook() -> None:
    info = get_provider_info()
    schema = json.loads(
        resources.files("airflow").joinpath("provider_info.schema.json").read_text()
    )
    jsonschema.validate(info, schema)
    assert info["package-name"] == "cursorops"
    [connection] = info["connection-types"]
    assert connection["connection-type"] == CursorOpsHook.conn_type == "cursorops"
    module, _, name = connection["hook-class-name"].rpartition(".")
    assert module == CursorOpsHook.__module__ and name == CursorOpsHook.__name__
    assert set(connection["conn-fields"]) == set(FIELDS)
    # The plugin comes through airflow.plugins alone: listed here too, it would load twice.
    assert "plugins" not in info


def test_the_hook_declares_the_default_connection() -> None:
    assert CursorOpsHook.default_conn_name == "cursorops_default"
    assert CursorOpsHook.conn_name_attr == "cursorops_conn_id"
    assert CursorOpsHook.hook_name == "cursorops"


def test_a_connection_field_wins_over_the_environment_and_a_missing_one_falls_back(
    tmp_path: Path,
) -> None:
    environ = {"CURSOROPS_HOME": str(tmp_path / "env"), "CURSOROPS_LEDGER_ROOT": "/l"}
    config = config_from({"home": str(tmp_path / "conn"), "metadata_url": ""}, environ)
    assert config.home == tmp_path / "conn"
    assert config.metadata_url == f"sqlite:///{tmp_path / 'conn' / 'metadata.db'}"
    assert config.ledger_root == "/l"
    assert config_from(None, environ).home == tmp_path / "env"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"hom": "/x"}, "Invalid cursorops connection field 'hom': expected one of home,"),
        ({"home": 3}, "Invalid cursorops connection field 'home': expected a string"),
    ],
)
def test_a_bad_connection_field_is_refused_by_name(extra: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        config_from(extra, {})


def test_the_hook_reads_the_connection_airflow_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {"home": str(tmp_path), "ledger_root": str(tmp_path / "elsewhere")}
    monkeypatch.setenv(
        "AIRFLOW_CONN_CURSOROPS_DEFAULT", json.dumps({"conn_type": "cursorops", "extra": extra})
    )
    hook = CursorOpsHook(environ={"CURSOROPS_ROLE_MAP": "alice=ops"})
    assert hook.config.home == tmp_path
    assert hook.config.ledger_root == str(tmp_path / "elsewhere")
    assert hook.role("alice") == "ops" and hook.role("bob") == "bob"


def test_without_cursorops_default_the_environment_says_and_another_name_must_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import AirflowNotFoundException

    monkeypatch.delenv("AIRFLOW_CONN_CURSOROPS_DEFAULT", raising=False)
    assert CursorOpsHook(environ={"CURSOROPS_HOME": str(tmp_path)}).config.home == tmp_path
    with pytest.raises(AirflowNotFoundException):
        _ = CursorOpsHook("cursorops_elsewhere").config


def test_the_plugins_folder_offers_the_plugin_only_when_no_entry_point_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Installed (editable or wheel): the entry point is there, so the folder's file is empty.
    assert plugin_module.registered_by_entry_point()
    monkeypatch.setattr(plugin_module, "registered_by_entry_point", lambda: True)
    assert plugin_module.folder_plugin() is None
    monkeypatch.setattr(plugin_module, "registered_by_entry_point", lambda: False)
    assert plugin_module.folder_plugin() is plugin_module.CursorOpsPlugin


def test_the_metadata_urls_password_is_masked_in_task_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.execution_time.secrets_masker import redact

    url = "postgresql+psycopg://cursorops:s3cr%40t-pw@db:5432/cursorops"
    extra = {"home": str(tmp_path), "metadata_url": url}
    monkeypatch.setenv(
        "AIRFLOW_CONN_CURSOROPS_DEFAULT", json.dumps({"conn_type": "cursorops", "extra": extra})
    )
    assert CursorOpsHook(environ={}).config.metadata_url == url
    logged = str(redact(f"store {url}; password s3cr@t-pw and s3cr%40t-pw"))
    assert "s3cr" not in logged, logged
