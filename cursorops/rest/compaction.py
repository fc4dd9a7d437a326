"""Pulsar admin v2 routes of topic compaction: trigger it, and read its status."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from cursorops.rest.deps import BrokerDep, RoleDep
from cursorops.rest.paths import TOPIC, topic_name

router = APIRouter(tags=["compaction"])

Name = Annotated[str, Path(min_length=1)]
COMPACTION = TOPIC + "/compaction"

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid request"},
    403: {"description": "Not authorized"},
    404: {"description": "Topic not found"},
    503: {"description": "The stores failed"},
}


@router.put(COMPACTION, status_code=204, responses=_ERRORS)
def compact(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> Response:
    """Compact the topic through its last message (tenant admins). Done when it answers."""
    broker.compact(role, str(topic_name(tenant, namespace, topic)))
    return Response(status_code=204)


@router.get(COMPACTION, responses=_ERRORS)
def compaction_status(
    tenant: Name, namespace: Name, topic: Name, broker: BrokerDep, role: RoleDep
) -> dict[str, str]:
    """Pulsar's ``LongRunningProcessStatus``: ``NOT_RUN`` or ``SUCCESS``."""
    status = broker.compaction_status(role, str(topic_name(tenant, namespace, topic)))
    return {"status": status, "lastError": ""}
