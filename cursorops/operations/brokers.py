"""The cluster's brokers: Pulsar's list of the active ones, and each broker's life."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from cursorops.operations.declaration import Call, operation


def _address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.hostname and parts.port else url


@operation(
    "brokers",
    "list",
    method="GET",
    path="/admin/v2/brokers",
    help="the live brokers' web service addresses, host:port (superusers)",
)
def list_brokers(call: Call) -> list[str]:
    """The live brokers, as Pulsar's ``GET /admin/v2/brokers``: each one's web service
    address (its broker service address when it serves no admin REST)."""
    return [
        _address(b.web_url or b.broker_url)
        for b in call.broker.cluster.list_brokers(call.role)
        if b.state == "live"
    ]


def _status_lines(answer: Any, _values: Any) -> list[str]:
    if not answer:
        return ["No broker has registered"]
    lines = []
    for item in answer:
        urls = " ".join(u for u in (item["brokerUrl"], item["webUrl"]) if u)
        lines.append(f"{item['brokerId']} life {item['epoch']} {item['state']:<5} {urls}")
    return lines


@operation(
    "brokers",
    "status",
    method="GET",
    path="/cursorops/v1/brokers",
    help="every broker registered in the store: its life, state (live, late, dead), "
    "URLs and last heartbeat (superusers)",
    render=_status_lines,
)
def broker_status(call: Call) -> list[dict[str, object]]:
    """Every broker that registered, live or not: ``late`` is silent but not yet declared
    dead; ``dead`` was declared dead (or stopped)."""
    return [
        {
            "brokerId": b.broker_id,
            "epoch": b.epoch,
            "state": b.state,
            "brokerUrl": b.broker_url,
            "brokerUrlTls": b.broker_url_tls,
            "webUrl": b.web_url,
            "startedAtMs": b.started_ms,
            "heartbeatAtMs": b.heartbeat_ms,
        }
        for b in call.broker.cluster.list_brokers(call.role)
    ]
