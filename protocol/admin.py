"""Admin REST paths the standalone adds to the plugin's app: those a Pulsar client
library's own tests call on ``pulsar standalone`` (create a topic, partitioned or
not) and the broker health check. Errors go through the app's error table."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Response

from core.broker import Broker

TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"


def router(broker: Broker, role: str) -> APIRouter:
    routes = APIRouter(tags=["standalone"])

    @routes.get("/admin/v2/brokers/health")
    def health() -> str:
        """Pulsar's health check: ``ok`` while the broker serves."""
        broker.list_tenants(role)
        return "ok"

    @routes.put(TOPIC + "/partitions", status_code=204)
    def create_partitioned_topic(
        tenant: str, namespace: str, topic: str, partitions: Annotated[int, Body()]
    ) -> Response:
        """``pulsar-admin topics create-partitioned-topic``: the body is the count."""
        broker.create_topic(role, f"persistent://{tenant}/{namespace}/{topic}", partitions)
        return Response(status_code=204)

    @routes.put(TOPIC, status_code=204)
    def create_topic(tenant: str, namespace: str, topic: str) -> Response:
        """``pulsar-admin topics create``: a non-partitioned topic."""
        broker.create_topic(role, f"persistent://{tenant}/{namespace}/{topic}", 0)
        return Response(status_code=204)

    return routes
