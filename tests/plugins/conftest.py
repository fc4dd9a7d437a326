"""Fixtures of the REST plugin tests.

- ``api``: Airflow's real API app (``create_app(apps="core")``) in-process, with
  this repo's plugins folder, a migrated throwaway Airflow database, the test
  users and a cursorops home; one per test session. Most tests use it.
- ``airflow`` / ``cursorops_home``: the session's real ``airflow standalone``
  (tests/airflow_fixtures.py), for the approval flow and the mount smoke test.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cursorops.core.domain.config import Config
from tests.airflow_harness import USERS
from tests.dags.conftest import SUBSCRIPTION, SeededTopic, seed_topic

REPO = Path(__file__).resolve().parents[2]
PREFIX = "/cursorops"
TENANT = "acme"
OPEN_NS = "acme/orders"
APPROVAL_NS = "acme/approved"
CONSUMERS = ("alice", "bob")
"""Pulsar roles with ``consume`` on both namespaces; carol and dave have none."""


@dataclass
class Api:
    client: Any
    """A ``TestClient`` of Airflow's API app with the plugin mounted."""
    config: Config
    tokens: dict[str, str]

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def call(self, user: str | None, method: str, path: str, **kwargs: Any) -> Any:
        headers = {**(self.headers(user) if user else {}), **kwargs.pop("headers", {})}
        return self.client.request(method, PREFIX + path, headers=headers, **kwargs)

    def seeded(self, namespace: str = OPEN_NS, partitions: int = 3) -> SeededTopic:
        """A fresh topic: 60 orders in batches of 5, 3 delayed reminders, and a Shared
        subscription ``billing`` that acknowledged the first 7 (tests/dags' seed)."""
        return seed_topic(self.config, namespace, partitions)

    def backlog(self, topic: str, subscription: str = SUBSCRIPTION) -> int:
        from cursorops.core.services.broker import Broker

        with Broker(self.config) as broker:
            stats = broker.analysis.topic_stats("admin", topic)
        document = stats.to_pulsar_json() if hasattr(stats, "to_pulsar_json") else stats
        return int(document["subscriptions"][subscription]["msgBacklog"])

    def audit(self, topic: str) -> list[str]:
        """The kinds of the topic's audit records."""
        from cursorops.core.services.broker import Broker

        with Broker(self.config) as broker:
            return [record.kind for record in broker.metadata.audit_log(topic)]


def rest_path(topic: str) -> str:
    """``persistent://t/n/x`` → ``/admin/v2/persistent/t/n/x``."""
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("plugin-api")
    home = root / "airflow"
    home.mkdir()
    passwords = home / "simple_auth_manager_passwords.json.generated"
    passwords.write_text(json.dumps({user: f"{user}-pw" for user in USERS}))
    # Airflow may be imported already (its AIRFLOW_HOME fixed): name every path explicitly.
    env = {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "no-dags"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__BASE_URL": "http://127.0.0.1:9",
        "CURSOROPS_HOME": str(root / "cursorops"),
        "CURSOROPS_METADATA_URL": "",
        "CURSOROPS_LEDGER_ROOT": "",
        "CURSOROPS_ROLE_MAP": "",
        "CURSOROPS_ROLE_MAP_FILE": "",
    }
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "airflow"), "db", "migrate"],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        import airflow.settings
        from airflow import plugins_manager
        from airflow.api_fastapi.app import create_app
        from fastapi.testclient import TestClient

        # Importing the plugin's modules may have configured Airflow already, on the
        # default home: point its settings (database, plugins folder) at this one.
        airflow.settings.dispose_orm(do_log=False)
        airflow.settings.configure_vars()
        airflow.settings.configure_orm()
        plugins_manager._get_plugins.cache_clear()
        plugins_manager.get_fastapi_plugins.cache_clear()

        from cursorops.core.services.broker import Broker

        config = Config.from_environ(os.environ)
        with Broker(config) as broker:
            broker.admin.create_tenant("admin", TENANT)
            for namespace in (OPEN_NS, APPROVAL_NS):
                broker.admin.create_namespace("admin", namespace)
                for role in CONSUMERS:
                    broker.admin.grant_permission("admin", namespace, role, ["consume"])
            broker.admin.set_namespace_policy("admin", APPROVAL_NS, skip_requires_approval=True)
        with TestClient(create_app(apps="core")) as client:
            tokens = {}
            for user in USERS:
                answer = client.post(
                    "/auth/token", json={"username": user, "password": f"{user}-pw"}
                )
                answer.raise_for_status()
                tokens[user] = answer.json()["access_token"]
            yield Api(client, config, tokens)
    airflow.settings.dispose_orm(do_log=False)
    airflow.settings.configure_vars()
    airflow.settings.configure_orm()
