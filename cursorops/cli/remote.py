"""The CLI logged in to a deployment: commands sent through the REST API as a user.

As with ``pulsar-admin --admin-url ... --auth-params token:...``: with
``--admin-url`` (env ``CURSOROPS_ADMIN_URL``, the URL under which the
``/admin/v2/...`` paths live, e.g. ``http://127.0.0.1:28080/cursorops`` for the
Airflow plugin) every command is a REST call made as the authenticated user:

- ``--auth-token`` (env ``CURSOROPS_AUTH_TOKEN``): an Airflow API token;
- or ``--login USER`` with the password in ``CURSOROPS_PASSWORD`` (or asked for on
  the terminal), exchanged for a token at the deployment's ``/auth/token``.

The server decides who the user is and what their Pulsar role may do, and a
namespace's approval policy holds as at every other door: a skip there is stored
as a plan record and its approval workflow started (202), and the CLI prints the
run, the plan's digest and the approval's link. ``--role`` is for the embedded
home only. Commands that have no REST path yet are refused with a clear line,
never run locally behind the user's back.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from cursorops.core.errors import (
    AlreadyExistsError,
    ConflictError,
    CursorOpsError,
    InvalidArgumentError,
    NotAuthorizedError,
    NotFoundError,
    StoreError,
    SubscriptionBusyError,
)

TIMEOUT_S = 60.0

RemoteHandler = Callable[["Remote", argparse.Namespace], tuple[object, list[str]]]


class Remote:
    """One deployment's admin REST API, as one authenticated user."""

    def __init__(self, admin_url: str, token: str) -> None:
        import httpx

        self.base = admin_url.rstrip("/")
        self._client = httpx.Client(timeout=TIMEOUT_S, headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._client.close()

    def call(
        self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any
    ) -> Any:
        """The JSON answer (None when empty); an error answer becomes its cursorops error."""
        return self.exchange(method, path, expect=expect, **kwargs)[1]

    def exchange(
        self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any
    ) -> tuple[int, Any]:
        """The status and the JSON answer (None when empty), for a caller that tells a 202
        from a 200; an error answer becomes its cursorops error."""
        import httpx

        try:
            answer = self._client.request(method, self.base + path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"Cannot reach {self.base}: {exc}") from exc
        if answer.status_code not in expect:
            raise _error(answer.status_code, _reason(answer))
        if not answer.content:
            return answer.status_code, None
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, answer.text


def login(admin_url: str, user: str, password: str | None) -> str:
    """A token for ``user`` from the deployment's ``/auth/token`` (Airflow's login)."""
    import httpx

    parts = urlsplit(admin_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    if password is None:
        password = getpass.getpass(f"Password for {user} at {origin}: ")
    try:
        answer = httpx.post(
            f"{origin}/auth/token",
            json={"username": user, "password": password},
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as exc:
        raise StoreError(f"Cannot reach {origin} to log in: {exc}") from exc
    if answer.status_code not in (200, 201):
        raise NotAuthorizedError(f"Login as {user} at {origin} refused: {_reason(answer)}")
    return str(answer.json()["access_token"])


def token_for(args: argparse.Namespace) -> str:
    """The token the command runs with: ``--auth-token``, else a login, else refused."""
    if args.auth_token:
        return str(args.auth_token)
    if args.login:
        return login(args.admin_url, args.login, os.environ.get("CURSOROPS_PASSWORD"))
    raise NotAuthorizedError(
        "--admin-url needs a login: --auth-token TOKEN (env CURSOROPS_AUTH_TOKEN) or "
        "--login USER (password from CURSOROPS_PASSWORD or the terminal)"
    )


def _reason(answer: Any) -> str:
    try:
        body = answer.json()
    except ValueError:
        return str(answer.text)[:300] or f"HTTP {answer.status_code}"
    if isinstance(body, dict):
        return str(body.get("reason") or body.get("detail") or body)[:300]
    return str(body)[:300]


def _error(status: int, reason: str) -> CursorOpsError:
    kind: type[CursorOpsError] = {
        400: InvalidArgumentError,
        401: NotAuthorizedError,
        403: NotAuthorizedError,
        404: NotFoundError,
        409: ConflictError,
        412: SubscriptionBusyError,
    }.get(status, StoreError)
    if status == 409 and "exists" in reason:
        kind = AlreadyExistsError
    return kind(f"{reason} (HTTP {status})")


def _topic_path(topic: str) -> str:
    """``/admin/v2/persistent/tenant/namespace/topic`` of a topic name (short or full)."""
    from cursorops.core.ids.topic_name import TopicName

    name = TopicName.parse(topic)
    return (
        f"/admin/v2/persistent/{quote(name.tenant, safe='')}/{quote(name.namespace, safe='')}"
        f"/{quote(name.local_name, safe='')}"
    )


def _sub_path(topic: str, subscription: str) -> str:
    return f"{_topic_path(topic)}/subscription/{quote(subscription, safe='')}"


def _pretty(document: object) -> list[str]:
    return json.dumps(document, indent=2, sort_keys=True).splitlines()


# -- the commands --------------------------------------------------------------


def tenants_list(remote: Remote, args: argparse.Namespace) -> tuple[object, list[str]]:
    names = remote.call("GET", "/admin/v2/tenants")
    return names, [str(n) for n in names]


def tenants_delete(remote: Remote, args: argparse.Namespace) -> tuple[object, list[str]]:
    remote.call("DELETE", f"/admin/v2/tenants/{quote(args.tenant, safe='')}", expect=(204,))
    return {"tenant": args.tenant, "deleted": True}, [f"Deleted tenant {args.tenant}"]


def namespaces_list(remote: Remote, args: argparse.Namespace) -> tuple[object, list[str]]:
    names = remote.call("GET", f"/admin/v2/namespaces/{quote(args.tenant, safe='')}")
    return names, [str(n) for n in names]


def namespaces_delete(remote: Remote, args: argparse.Namespace) -> tuple[object, list[str]]:
    tenant, _, namespace = str(args.namespace).partition("/")
    remote.call(
        "DELETE",
        f"/admin/v2/namespaces/{quote(tenant, safe='')}/{quote(namespace, safe='')}",
        expect=(204,),
    )
    return {"namespace": args.namespace, "deleted": True}, [f"Deleted namespace {args.namespace}"]


HANDLERS: Mapping[str, RemoteHandler] = {
    "tenants_list": tenants_list,
    "tenants_delete": tenants_delete,
    "namespaces_list": namespaces_list,
    "namespaces_delete": namespaces_delete,
}
"""Local handler name → its REST form. Every other command is refused with --admin-url."""


def handler_for(local_name: str, command: str) -> RemoteHandler:
    found = HANDLERS.get(local_name)
    if found is None:
        raise InvalidArgumentError(
            f"'{command}' is not available through --admin-url (the deployment's REST API has "
            f"no path for it); served there: {', '.join(sorted(_command(n) for n in HANDLERS))}"
        )
    return found


_COMMANDS = {"topics_skip": "topics skip-messages", "topics_skip_head": "topics skip"}
"""Handlers whose command is not their name with ``-`` for ``_``."""


def _command(handler_name: str) -> str:
    if handler_name in _COMMANDS:
        return _COMMANDS[handler_name]
    group, _, name = handler_name.partition("_")
    return f"{group} {name.replace('_', '-')}"
