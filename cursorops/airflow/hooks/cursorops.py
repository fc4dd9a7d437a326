"""The ``cursorops`` connection: where a task finds its cursorops installation, and as whom it acts.

A task asks a :class:`CursorOpsHook` (connection ``cursorops_default`` unless told
otherwise) for its Broker and for the Pulsar role of the run's requester, instead of
reading environment variables and repeating the set-up in every task.

The connection (conn type ``cursorops``) keeps its settings in its extra, each optional::

    AIRFLOW_CONN_CURSOROPS_DEFAULT='{"conn_type": "cursorops", "extra": {
        "home": "/data/cursorops",
        "metadata_url": "postgresql+psycopg://cursorops:...@postgres:5432/cursorops",
        "ledger_root": "/data/cursorops/ledgers"}}'

- ``home``: the cursorops home (``CURSOROPS_HOME`` of the CLI);
- ``metadata_url``: the metadata store's SQLAlchemy URL (default: SQLite in the home);
- ``ledger_root``: where the ledgers live (default: ``ledgers`` in the home).

A field the connection leaves out falls back to the worker's environment
(:meth:`cursorops.core.domain.config.Config.from_environ`), and so does everything when
``cursorops_default`` does not exist: a worker configured the way the CLI is keeps
working. A connection asked for by another name must exist. Any
other key is refused, so a misspelt one never silently means "the default".

The Airflow user → Pulsar role map stays in the environment
(:mod:`cursorops.airflow.environment`): the REST app inside Airflow's API server maps a
login by the same table on every request, where a connection lookup per request is not
an option.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from cursorops.core.domain.config import Config
    from cursorops.core.services.broker import Broker

FIELDS: Mapping[str, str] = {
    "home": "CURSOROPS_HOME",
    "metadata_url": "CURSOROPS_METADATA_URL",
    "ledger_root": "CURSOROPS_LEDGER_ROOT",
}
"""The connection's extra fields, and the environment variable each one stands for."""


def config_from(extra: Mapping[str, Any] | None, environ: Mapping[str, str]) -> Config:
    """The Config a connection's ``extra`` names, its missing fields from ``environ``;
    ``extra`` None (no connection): the environment alone."""
    from cursorops.core.domain.config import Config
    from cursorops.core.domain.errors import InvalidArgumentError

    values = dict(environ)
    for key, value in (extra or {}).items():
        if key not in FIELDS:
            raise InvalidArgumentError(
                f"Invalid cursorops connection field '{key}': expected one of "
                + ", ".join(sorted(FIELDS))
            )
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"Invalid cursorops connection field '{key}': expected a string"
            )
        values[FIELDS[key]] = value
    return Config.from_environ(values)


def _mask_store_secret(url: object) -> None:
    """Hide a metadata URL that holds a password, and the password, wherever Airflow writes
    logs: the connection form keeps the URL as a password, but a URL is no key Airflow's
    masker knows. A URL without a password (SQLite in the home) stays readable."""
    if not isinstance(url, str) or not url:
        return
    from urllib.parse import unquote, urlsplit

    from airflow.sdk.log import mask_secret

    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        mask_secret(url)
        mask_secret(password)
        mask_secret(unquote(password))


class CursorOpsHook(BaseHook):
    """A task's way in to cursorops: its Config and Broker (from the connection), the
    Pulsar role of a user and of the run's requester, and the approvers to consider."""

    conn_name_attr = "cursorops_conn_id"
    default_conn_name = "cursorops_default"
    conn_type = "cursorops"
    hook_name = "cursorops"
    CONN_FIELDS: ClassVar[Mapping[str, str]] = FIELDS

    def __init__(
        self,
        cursorops_conn_id: str = default_conn_name,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.cursorops_conn_id = cursorops_conn_id
        self._environ = os.environ if environ is None else environ
        self._config: Config | None = None

    def extra(self) -> dict[str, Any] | None:
        """The connection's extra; None when ``cursorops_default`` does not exist (any other
        connection must). Looked up when a task runs, never at parse time."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            connection = self.get_connection(self.cursorops_conn_id)
        except AirflowNotFoundException:
            if self.cursorops_conn_id != self.default_conn_name:
                raise  # a connection asked for by name must exist
            return None
        extra = dict(connection.extra_dejson)
        _mask_store_secret(extra.get("metadata_url"))
        return extra

    @property
    def config(self) -> Config:
        """The installation's Config (looked up once per hook)."""
        if self._config is None:
            self._config = config_from(self.extra(), self._environ)
        return self._config

    def get_conn(self) -> Config:
        return self.config

    def new_broker(self) -> Broker:
        """A Broker on the installation; the caller closes it (``with``) and maps its
        errors itself."""
        from cursorops.core.services.broker import Broker

        return Broker(self.config)

    @contextmanager
    def broker(self) -> Iterator[Broker]:
        """A Broker on the installation, closed on the way out; a cursorops error fails
        the task at once or lets Airflow retry it (:func:`cursorops.airflow.outcomes.
        airflow_outcome`), a bad connection included."""
        from cursorops.airflow.outcomes import airflow_outcome

        with airflow_outcome(), self.new_broker() as broker:
            yield broker

    def role(self, airflow_user: str | None) -> str:
        """The Pulsar role an Airflow user acts as (mapped, or the same name)."""
        from cursorops.airflow.environment import pulsar_role

        return pulsar_role(airflow_user or "", self._environ)

    def requester_role(self, context: Mapping[str, Any]) -> str:
        """The Pulsar role of the run's requester (``dag_run.triggering_user_name``)."""
        return self.role(context["dag_run"].triggering_user_name)

    def approver_candidates(self) -> list[str]:
        """The Airflow users who could answer an approval, before the permission check."""
        from cursorops.airflow.environment import approver_candidates

        return approver_candidates(self._environ)
