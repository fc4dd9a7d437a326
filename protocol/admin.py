"""Admin REST paths the standalone adds to the plugin's app: those a Pulsar client
library's own tests call on ``pulsar standalone`` (create a topic, partitioned or
not) and the broker health check. Errors go through the app's error table."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Body, Depends, Request, Response
from fastapi.responses import PlainTextResponse

from core.broker import Broker

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"


def router(broker: Broker, role_of: Callable[[Request], str], own_role: str) -> APIRouter:
    """The routes; ``role_of`` names the caller's role (it refuses unauthenticated calls),
    ``own_role`` is the standalone's, which the health check uses."""
    routes = APIRouter(tags=["standalone"])
    # Dependencies as defaults: the routes are local, and their annotations (strings
    # under postponed evaluation) must resolve from the module alone.
    caller = Depends(role_of)
    count = Body()

    @routes.get("/admin/v2/brokers/health", response_class=PlainTextResponse)
    def health() -> str:
        """Pulsar's health check: ``ok`` while the broker's stores answer (no login)."""
        broker.list_namespaces(own_role, "public")
        return "ok"

    @routes.put(TOPIC + "/partitions", status_code=204)
    def create_partitioned_topic(
        tenant: str, namespace: str, topic: str, role: str = caller, partitions: int = count
    ) -> Response:
        """``pulsar-admin topics create-partitioned-topic``: the body is the count."""
        broker.create_topic(role, f"persistent://{tenant}/{namespace}/{topic}", partitions)
        return Response(status_code=204)

    @routes.put(TOPIC, status_code=204)
    def create_topic(tenant: str, namespace: str, topic: str, role: str = caller) -> Response:
        """``pulsar-admin topics create``: a non-partitioned topic."""
        broker.create_topic(role, f"persistent://{tenant}/{namespace}/{topic}", 0)
        return Response(status_code=204)

    return routes
