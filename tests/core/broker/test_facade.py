"""The Broker is its doors: the gated operations' request, preview, plan and approved apply,
and the lifecycle of the stores it opens. Everything else belongs to a collaborator, an
attribute of the Broker, and every collaborator shares the Broker's one context."""

from __future__ import annotations

import cursorops.core.services.broker
from cursorops.core.services.broker import Broker
from cursorops.core.services.broker.access import Access
from cursorops.core.services.broker.admin import Admin
from cursorops.core.services.broker.analysis import Analysis
from cursorops.core.services.broker.cluster import Cluster
from cursorops.core.services.broker.compaction import Compaction
from cursorops.core.services.broker.context import BrokerContext
from cursorops.core.services.broker.deletion import Deletion
from cursorops.core.services.broker.gated import GatedOperations
from cursorops.core.services.broker.policies import Policies
from cursorops.core.services.broker.produce import Producing
from cursorops.core.services.broker.read import Reading
from cursorops.core.services.broker.schemas import Schemas
from cursorops.core.services.broker.workflow import Workflow

PARTS = {
    "access": Access,
    "admin": Admin,
    "deletion": Deletion,
    "producing": Producing,
    "reading": Reading,
    "gated": GatedOperations,
    "analysis": Analysis,
    "workflow": Workflow,
    "schemas": Schemas,
    "policies": Policies,
    "compaction": Compaction,
}
DOORS = {"request", "preview_request", "plan_request", "apply_approved_plan"}
"""The gated operations' doors, which the façade owns."""
OWN = {"close", "migrate_metadata"}
"""The lifecycle: the façade owns the stores it opens."""


def public_methods() -> set[str]:
    return {
        name for name, value in vars(Broker).items() if not name.startswith("_") and callable(value)
    }


def test_the_public_names_stay_importable() -> None:
    assert sorted(cursorops.core.services.broker.__all__) == [
        "AuditRecord",
        "BacklogProjection",
        "Broker",
        "BrokerContext",
        "MessageDescription",
        "PAYLOAD_EXCERPT_BYTES",
        "PartitionProjection",
        "PlannedRequest",
        "new_run_id",
        "wall_clock_ms",
    ]
    for name in cursorops.core.services.broker.__all__:
        assert getattr(cursorops.core.services.broker, name) is not None


def test_the_facade_is_its_doors_and_its_lifecycle() -> None:
    assert public_methods() == DOORS | OWN


def test_no_collaborator_keeps_a_door() -> None:
    for cls in (*PARTS.values(), Cluster):
        assert not DOORS & set(vars(cls)), cls


def test_the_collaborators_share_one_context(broker: Broker) -> None:
    assert isinstance(broker.context, BrokerContext)
    assert broker.context.metadata is broker.metadata
    assert broker.context.ledgers is broker.ledgers
    assert broker.context.clock is broker.clock
    assert broker.context.config is broker.config
    assert broker.context.access is broker.access
    for attr, cls in PARTS.items():
        part = getattr(broker, attr)
        assert isinstance(part, cls)
        if attr != "access":
            assert part.context is broker.context
    assert isinstance(broker.cluster, Cluster)
