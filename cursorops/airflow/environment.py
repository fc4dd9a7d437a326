"""What the tasks read from their environment, in one place.

Tasks run in Airflow's worker processes, which inherit the scheduler's
environment (``scripts/airflow-up.sh`` sets it):

- ``CURSOROPS_HOME``, ``CURSOROPS_METADATA_URL``, ``CURSOROPS_LEDGER_ROOT``: the
  cursorops installation (:meth:`cursorops.core.domain.config.Config.from_environ`).
- ``CURSOROPS_ROLE_MAP``: Airflow user → Pulsar role, ``"alice=ops,bob=ops-east"``;
  or ``CURSOROPS_ROLE_MAP_FILE``, a JSON object ``{"alice": "ops"}``. A user not
  listed acts as the role of the same name.
- ``CURSOROPS_APPROVER_CANDIDATES``: the Airflow users who may be asked to
  approve, ``"alice,bob"``. Default: the SimpleAuthManager's users
  (``[core] simple_auth_manager_users``) whose Airflow role can answer an
  approval (any role but ``viewer``). Only those of them whose Pulsar role holds
  the skip permission on the topic are assigned, never the requester.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cursorops.core.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from cursorops.core.domain.config import Config


PLUGIN_PREFIX = "/cursorops"
"""Where Airflow's API server mounts cursorops's REST app (``cursorops.rest``)."""
ROLE_MAP = "CURSOROPS_ROLE_MAP"
ROLE_MAP_FILE = "CURSOROPS_ROLE_MAP_FILE"
APPROVER_CANDIDATES = "CURSOROPS_APPROVER_CANDIDATES"
READ_ONLY_ROLES = frozenset({"viewer"})
"""SimpleAuthManager roles that cannot answer an approval (the REST API gives 403)."""


def config(environ: Mapping[str, str] | None = None) -> Config:
    """The cursorops Config of this worker; call it inside a task, never at parse time."""
    from cursorops.core.domain.config import Config

    return Config.from_environ(os.environ if environ is None else environ)


def role_map(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    mapping: dict[str, str] = {}
    path = env.get(ROLE_MAP_FILE)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"Invalid {ROLE_MAP_FILE} {path}: {exc}") from exc
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and v for k, v in loaded.items()
        ):
            raise InvalidArgumentError(
                f"Invalid {ROLE_MAP_FILE} {path}: expected a JSON object of non-empty strings"
            )
        mapping.update(loaded)
    for pair in filter(None, (p.strip() for p in env.get(ROLE_MAP, "").split(","))):
        user, sep, role = (part.strip() for part in pair.partition("="))
        if not sep or not user or not role:
            raise InvalidArgumentError(f"Invalid {ROLE_MAP} entry '{pair}': expected user=role")
        mapping[user] = role
    return mapping


def pulsar_role(airflow_user: str, environ: Mapping[str, str] | None = None) -> str:
    """The Pulsar role an Airflow user acts as: mapped, or the same name."""
    return role_map(environ).get(airflow_user, airflow_user)


def approver_candidates(environ: Mapping[str, str] | None = None) -> list[str]:
    """Airflow users who could answer an approval, before the permission check."""
    env = os.environ if environ is None else environ
    listed = env.get(APPROVER_CANDIDATES)
    if listed:
        return sorted({u.strip() for u in listed.split(",") if u.strip()})
    from airflow.configuration import conf

    users = conf.get("core", "simple_auth_manager_users", fallback="") or ""
    found = set()
    for pair in filter(None, (p.strip() for p in users.split(","))):
        user, _, role = pair.partition(":")
        if user and role.strip().lower() not in READ_ONLY_ROLES:
            found.add(user.strip())
    return sorted(found)
