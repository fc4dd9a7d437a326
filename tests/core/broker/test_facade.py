"""The Broker is one façade: each public method delegates to the collaborator that owns it,
with the same signature, and every collaborator shares the Broker's one context."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

import cursorops.core.services.broker
from cursorops.core.services.broker import Broker
from cursorops.core.services.broker.access import Access
from cursorops.core.services.broker.admin import Admin
from cursorops.core.services.broker.analysis import Analysis
from cursorops.core.services.broker.compaction import Compaction
from cursorops.core.services.broker.context import BrokerContext
from cursorops.core.services.broker.deletion import Deletion
from cursorops.core.services.broker.gated import GatedOperations
from cursorops.core.services.broker.policies import Policies
from cursorops.core.services.broker.produce import Producing
from cursorops.core.services.broker.read import Reading
from cursorops.core.services.broker.schemas import Schemas
from cursorops.core.services.broker.workflow import Workflow
from cursorops.core.services.gating import redrive, reset, undo_skip, unsubscribe
from cursorops.core.services.gating import skip as skips

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
SLICES = {
    "redrive": redrive,
    "skips": skips,
    "reset": reset,
    "undo_skip": undo_skip,
    "unsubscribe": unsubscribe,
}
"""The gated operations whose own door the façade still keeps: a method delegates to a
function of the operation's slice, with the Broker's gated services first."""
OWN = {"close", "migrate_metadata"}
"""What the façade does itself: it owns the stores it opens."""


def public_methods() -> list[str]:
    return sorted(
        name
        for name, value in vars(Broker).items()
        if not name.startswith("_") and callable(value) and name not in OWN
    )


def owner(name: str) -> str:
    found = [attr for attr, cls in PARTS.items() if name in vars(cls)]
    found += [slice_name for slice_name, module in SLICES.items() if name in vars(module)]
    assert len(found) == 1, f"{name} is owned by {found}"
    return found[0]


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
        "wall_clock_ms",
    ]
    for name in cursorops.core.services.broker.__all__:
        assert getattr(cursorops.core.services.broker, name) is not None


def test_every_public_method_has_one_owner() -> None:
    assert len(public_methods()) >= 40
    for name in public_methods():
        owner(name)


@pytest.mark.parametrize("name", public_methods())
def test_a_method_has_its_owners_signature(name: str) -> None:
    mine = inspect.signature(getattr(Broker, name))
    where = owner(name)
    if where in SLICES:
        theirs = inspect.signature(getattr(SLICES[where], name))
        [services, *rest] = theirs.parameters.values()
        assert services.name == "services"
        theirs = theirs.replace(parameters=rest)
        [_self, *mine_rest] = mine.parameters.values()
        mine = mine.replace(parameters=mine_rest)
    else:
        theirs = inspect.signature(getattr(PARTS[where], name))
    assert mine == theirs


@pytest.mark.parametrize("name", public_methods())
def test_a_method_is_one_statement_of_delegation(name: str) -> None:
    function = ast.parse(textwrap.dedent(inspect.getsource(getattr(Broker, name)))).body[0]
    assert isinstance(function, ast.FunctionDef)
    [statement] = function.body
    assert isinstance(statement, (ast.Return, ast.Expr))
    call = statement.value
    assert isinstance(call, ast.Call)
    if owner(name) in SLICES:
        assert ast.unparse(call.func) == f"{owner(name)}.{name}"
        assert ast.unparse(call.args[0]) == "self.gated"
    else:
        assert ast.unparse(call.func) == f"self.{owner(name)}.{name}"


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
