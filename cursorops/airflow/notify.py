"""The notifier hook of backlog breaches: an Airflow ``BaseNotifier``.

It always logs the message; when the Airflow connection ``connection_id``
(default ``cursorops_backlog_webhook``) exists, it also POSTs
``{"text": message}`` as JSON to it: the connection's host as a full URL
(``https://hooks.example/T0/B0``), or ``schema://host:port`` plus the
``endpoint`` extra. A missing connection means log only; a failed POST is
logged and does not hide the breach (the task fails on the breach anyway).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

DEFAULT_CONNECTION = "cursorops_backlog_webhook"
TIMEOUT_S = 10.0
log = logging.getLogger(__name__)


def webhook_url(conn: Any) -> str:
    host = str(conn.host or "")
    if host.startswith(("http://", "https://")):
        return host
    base = f"{conn.schema or 'https'}://{host}" + (f":{conn.port}" if conn.port else "")
    endpoint = str((conn.extra_dejson or {}).get("endpoint") or "")
    return base + (endpoint if not endpoint or endpoint.startswith("/") else f"/{endpoint}")


class BacklogBreachNotifier(BaseNotifier):
    """Log the breaches; post them to a webhook when its connection is configured."""

    template_fields = ("message",)

    def __init__(self, message: str, connection_id: str = DEFAULT_CONNECTION) -> None:
        super().__init__()
        self.message = message
        self.connection_id = connection_id

    def notify(self, context: Any) -> None:
        import httpx
        from airflow.sdk import BaseHook

        log.warning("Backlog thresholds breached:\n%s", self.message)
        try:
            conn = BaseHook.get_connection(self.connection_id)
        except Exception:  # noqa: BLE001 - Airflow raises its own not-found type per backend
            log.info("No connection %s: breaches logged only", self.connection_id)
            return
        url = webhook_url(conn)
        try:
            response = httpx.post(url, json={"text": self.message}, timeout=TIMEOUT_S)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            log.error("Posting the breaches to %s failed: %s", url, exc)
            return
        log.info("Breaches posted to %s (%d)", url, response.status_code)
