"""The one mechanism of every gated plan's JSON: an id over its content, two spellings kept
byte for byte, and a document altered, malformed or of another kind refused."""

from __future__ import annotations

import hashlib
import json

import pytest

from cursorops.core.domain.acks.skip_plan import PlannedSkip, SkipPlan
from cursorops.core.domain.errors import InvalidArgumentError, InvalidSkipPlanError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.portable_plan import PortablePlan, Spelling, canonical_json
from cursorops.core.services.gating.redrive import RedriveMessage, RedrivePlan
from cursorops.core.services.gating.reset import PartitionReset, ResetPlan
from cursorops.core.services.gating.undo_skip import UndoPartition, UndoPlan
from cursorops.core.services.gating.unsubscribe import UnsubscribePlan

TOPIC = "persistent://acme/ops/orders"

PLANS: dict[str, PortablePlan] = {
    "skip": SkipPlan(TOPIC, "s", [PlannedSkip(TOPIC, -1, 3, 4, -1, 0, None, False)], 7),
    "undo": UndoPlan(
        TOPIC,
        "s",
        12,
        (UndoPartition(TOPIC, (3,), (4,), (-1,)),),
        1,
        8,
        6,
        "alice",
        reason="Zürich “order”",
    ),
    "reset": ResetPlan(
        TOPIC, "s", (PartitionReset(TOPIC, Position(3, 2), Position(3, 0), 5, 2),), 9, None
    ),
    "unsubscribe": UnsubscribePlan(TOPIC, "s", ((TOPIC, 4),), False, 10),
    "redrive": RedrivePlan(
        TOPIC,
        "s",
        f"{TOPIC}-s-DLQ",
        (),
        ("audit",),
        (MessageId(5, 0),),
        ("clé",),
        (RedriveMessage(MessageId(5, 0), "clé", {"raison": "échec"}, 11),),
        None,
        12,
    ),
}


@pytest.mark.parametrize("kind", sorted(PLANS))
def test_the_id_is_the_content_hash_and_the_text_reads_back(kind: str) -> None:
    plan = PLANS[kind]
    ascii_only = plan.SPELLING is Spelling.ID_FIRST
    content = canonical_json(plan.content(), ascii_only=ascii_only)
    assert plan.plan_id == hashlib.sha256(content.encode("utf-8")).hexdigest()
    text = plan.dumps()
    if plan.SPELLING is Spelling.ID_FIRST:
        assert text == f'{{"planId":"{plan.plan_id}",' + content[1:]
        assert text.isascii()
    else:
        assert text == canonical_json({"planId": plan.plan_id, **plan.content()})
    again = type(plan).from_json(text)
    assert again == plan and again.plan_id == plan.plan_id and again.dumps() == text
    assert type(plan).from_json(json.loads(text)) == plan


@pytest.mark.parametrize("kind", sorted(PLANS))
def test_an_altered_or_malformed_document_is_refused(kind: str) -> None:
    plan = PLANS[kind]
    cls = type(plan)
    document = json.loads(plan.dumps())
    altered = {**document, "subscription": "other"}
    bad: list[object] = [
        "",
        "not json",
        "[]",
        json.dumps(altered),
        json.dumps({k: v for k, v in document.items() if k != "planId"}),
        json.dumps({**document, "unexpected": 1}),
        json.dumps({"planId": plan.plan_id}),
    ]
    for text in bad:
        with pytest.raises(cls.INVALID, match=f"Invalid {cls.KIND}"):
            cls.from_json(text)  # type: ignore[arg-type]
    with pytest.raises(cls.INVALID, match="does not match its content"):
        cls.from_json(json.dumps(altered))


def test_each_plan_refuses_with_its_own_error() -> None:
    assert {k: type(p).INVALID for k, p in PLANS.items()} == {
        "skip": InvalidSkipPlanError,
        "undo": InvalidSkipPlanError,
        "reset": InvalidArgumentError,
        "unsubscribe": InvalidArgumentError,
        "redrive": InvalidArgumentError,
    }
