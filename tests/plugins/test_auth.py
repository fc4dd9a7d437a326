"""Every route of the plugin needs Airflow's login; the schema is not public."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.plugins.conftest import PREFIX, Api


def _routes(api: Api) -> list[tuple[str, str]]:
    document = api.call("admin", "GET", "/openapi.json").json()
    routes = [("GET", "/openapi.json")]
    for path, item in document["paths"].items():
        concrete = re.sub(r"\{(timestamp|message_position)\}", "1", path)
        concrete = re.sub(r"\{[^}]+\}", "x", concrete)
        routes += [(method.upper(), concrete) for method in item]
    return routes


def _expired_token(user: str) -> str:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(
        SimpleAuthManagerUser(username=user, role="admin"), expiration_time_in_seconds=-60
    )


def test_openapi_document_lists_every_route(api: Api) -> None:
    paths = api.call("admin", "GET", "/openapi.json").json()["paths"]
    topic = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
    sub = topic + "/subscription/{subscription}"
    expected = {
        "/admin/v2/tenants": {"get"},
        "/admin/v2/namespaces/{tenant}": {"get"},
        "/admin/v2/namespaces/{tenant}/{namespace}/permissions/{role_name}": {"post"},
        "/admin/v2/namespaces/{tenant}/{namespace}/skipApproval": {"post"},
        "/admin/v2/persistent/{tenant}/{namespace}": {"get"},
        "/admin/v2/persistent/{tenant}/{namespace}/partitioned": {"get"},
        "/admin/v2/tenants/{tenant}": {"put", "delete"},
        "/admin/v2/namespaces/{tenant}/{namespace}": {"put", "delete"},
        "/admin/v2/namespaces/{tenant}/{namespace}/approvalQuorum": {"post"},
        "/admin/v2/namespaces/{tenant}/{namespace}/autoTopicCreation": {"post", "delete"},
        topic: {"put", "delete"},
        topic + "/partitions": {"get", "put", "delete"},
        topic + "/stats": {"get"},
        topic + "/partitioned-stats": {"get"},
        topic + "/subscriptions": {"get"},
        topic + "/subscriptionDetails": {"get"},
        topic + "/examinemessage": {"get"},
        topic + "/analyzeBacklog": {"get"},
        topic + "/backlogHistory": {"get"},
        topic + "/skips": {"get"},
        topic + "/openRequests": {"get"},
        topic + "/poisonRadar": {"get"},
        sub: {"put", "delete"},
        sub + "/properties": {"put"},
        sub + "/peekMessages": {"get"},
        sub + "/skipByMessageIds": {"post"},
        sub + "/skip/{numMessages}": {"post"},
        sub + "/skip_all": {"post"},
        sub + "/undoSkip/{skipId}": {"post"},
        sub + "/redrive": {"post"},
        sub + "/analyzeBacklog": {"get", "post"},
        sub + "/resetcursor/{timestamp}": {"post"},
        sub + "/resetcursor": {"post"},
        sub + "/position/{message_position}": {"get"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path


def test_every_route_refuses_no_token_a_bad_token_and_an_expired_token(api: Api) -> None:
    expired = _expired_token("admin")
    refused: dict[str, Any] = {}
    routes = _routes(api)
    assert len(routes) >= 18
    for method, path in routes:
        none = api.call(None, method, path)
        bad = api.call(None, method, path, headers={"Authorization": "Bearer not.a.jwt"})
        old = api.call(None, method, path, headers={"Authorization": f"Bearer {expired}"})
        cookie = api.client.request(method, PREFIX + path, cookies={"_token": "garbage"})
        refused[f"{method} {path}"] = (
            none.status_code,
            bad.status_code,
            old.status_code,
            cookie.status_code,
        )
        assert none.json() == {"reason": "Not authenticated"}, path
        assert old.json() == {"reason": "Token Expired"}, path
    assert {v[0] for v in refused.values()} == {401}, refused
    assert {v[1] for v in refused.values()} == {403}, refused
    assert {v[2] for v in refused.values()} == {401}, refused
    assert {v[3] for v in refused.values()} == {403}, refused


def test_the_ui_cookie_authenticates(api: Api) -> None:
    answer = api.client.get(PREFIX + "/admin/v2/tenants", cookies={"_token": api.tokens["admin"]})
    assert answer.status_code == 200
    assert "acme" in answer.json()


def test_no_public_docs(api: Api) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert api.call("admin", "GET", path).status_code == 404
    assert api.call(None, "GET", "/openapi.json").status_code == 401


def test_state_changing_routes_are_never_get(api: Api) -> None:
    document = api.call("admin", "GET", "/openapi.json").json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            changes = any(
                word in path
                for word in (
                    "skipByMessageIds",
                    "redrive",
                    "resetcursor",
                    "permissions",
                    "skipApproval",
                )
            ) or (path.endswith("{subscription}") and method != "get")
            if changes:
                assert method in {"post", "put", "delete"}, (method, path, operation)


def test_the_airflow_user_acts_as_the_pulsar_role_the_dags_map_it_to(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cursorops.airflow.environment import pulsar_role

    listing = "/admin/v2/persistent/acme/orders"
    assert api.call("carol", "GET", listing).status_code == 403
    # The DAGs' mapping (CURSOROPS_ROLE_MAP): carol acts as alice, who may consume there.
    monkeypatch.setenv("CURSOROPS_ROLE_MAP", "carol=alice")
    assert pulsar_role("carol") == "alice"
    assert api.call("carol", "GET", listing).status_code == 200
    monkeypatch.setenv("CURSOROPS_ROLE_MAP", "alice=carol")
    assert api.call("alice", "GET", listing).status_code == 403
