"""Who the CLI is at ``--admin-url``, as with ``pulsar-admin --auth-params token:...``:

- ``--auth-token`` (env ``CURSOROPS_AUTH_TOKEN``): the deployment's API token (Airflow's,
  for the Airflow plugin; a Pulsar token for ``cursorops standalone``);
- or ``--login USER`` with the password in ``CURSOROPS_PASSWORD`` (or asked for on the
  terminal), exchanged for a token at the deployment's ``/auth/token`` (Airflow's login).

The server decides who the user is and what their Pulsar role may do; ``--role`` is for
the home's own standalone only.
"""

from __future__ import annotations

import argparse
import getpass
import os
from urllib.parse import urlsplit

from cursorops.cli.transport import Transport
from cursorops.core.domain.errors import NotAuthorizedError


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


def login(admin_url: str, user: str, password: str | None) -> str:
    """A token for ``user`` from the deployment's ``/auth/token`` (Airflow's login)."""
    parts = urlsplit(admin_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    if password is None:
        password = getpass.getpass(f"Password for {user} at {origin}: ")
    answer = Transport(url=origin).request(
        "POST", "/auth/token", body={"username": user, "password": password}
    )
    document = answer.document()
    if answer.status not in (200, 201) or not isinstance(document, dict):
        reason = document.get("detail") if isinstance(document, dict) else None
        raise NotAuthorizedError(
            f"Login as {user} at {origin} refused: {reason or f'HTTP {answer.status}'}"
        )
    return str(document["access_token"])
