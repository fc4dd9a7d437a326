"""``undoSkip``: the REST door of an undo, and the skip id on ``skipByMessageIds``' 204."""

from __future__ import annotations

from typing import Any

from cursorops.core.services.gating import skip as skips
from tests.dags.conftest import SUBSCRIPTION, label
from tests.plugins.conftest import APPROVAL_NS, Api, rest_path

SEEDED_BACKLOG = 56


def _skip(api: Api, user: str, topic: str, ids: list[str]) -> Any:
    path = rest_path(topic) + f"/subscription/{SUBSCRIPTION}/skipByMessageIds"
    return api.call(user, "POST", path, json=ids)


def _undo(api: Api, user: str, topic: str, skip_id: object, sub: str = SUBSCRIPTION) -> Any:
    return api.call(user, "POST", rest_path(topic) + f"/subscription/{sub}/undoSkip/{skip_id}")


def test_a_skip_is_undone_through_rest(api: Api) -> None:
    seeded = api.seeded()
    open_ids = seeded.unacknowledged()
    chosen = [m for m in seeded.ids if label(m) in open_ids][:4]
    skipped = _skip(api, "alice", seeded.topic, [m.to_base64() for m in chosen])
    assert skipped.status_code == 204
    skip_id = int(skipped.headers["X-Cursorops-Skip-Id"])
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 4

    undone = _undo(api, "bob", seeded.topic, skip_id)
    assert undone.status_code == 200, undone.text
    body = undone.json()
    assert (body["skipId"], sum(body["perPartition"].values())) == (skip_id, 4)
    assert sorted(body["unacknowledged"]) == sorted(m.triplet() for m in chosen)
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert api.audit(seeded.topic).count("undo-skip") == 1

    for answer, status, said in [
        (_undo(api, "alice", seeded.topic, skip_id), 409, "undone already"),
        (_undo(api, "alice", seeded.topic, 987_654_321), 404, "No skip 987654321"),
        (_undo(api, "alice", seeded.topic, 0), 400, "Invalid skip id 0"),
        (_undo(api, "alice", seeded.topic, skip_id, sub="nosuch"), 404, "it skipped on"),
        (_undo(api, "carol", seeded.topic, skip_id), 403, "not authorized"),
    ]:
        assert answer.status_code == status, answer.text
        assert said in answer.json()["reason"]
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG
    assert api.audit(seeded.topic).count("undo-skip") == 1


def test_undo_needs_a_reason_to_start_its_workflow_on_an_approval_namespace(api: Api) -> None:
    from cursorops.core.services.broker import Broker

    seeded = api.seeded(APPROVAL_NS)
    open_ids = seeded.unacknowledged()
    chosen = [m for m in seeded.ids if label(m) in open_ids][:2]
    # A skip made before the namespace required approval.
    with Broker(api.config) as broker:
        broker.admin.set_namespace_policy("admin", APPROVAL_NS, skip_requires_approval=False)
        try:
            skip_id = skips.skip_messages(
                broker.gated, "alice", seeded.topic, SUBSCRIPTION, chosen
            ).skip_id
        finally:
            broker.admin.set_namespace_policy("admin", APPROVAL_NS, skip_requires_approval=True)
    # Without a reason nothing starts; with one, cursorops_undo_skip would (tests/dags).
    answer = _undo(api, "alice", seeded.topic, skip_id)
    assert answer.status_code == 400, answer.text
    assert "A reason is required: undo-skip" in answer.json()["reason"]
    assert api.backlog(seeded.topic) == SEEDED_BACKLOG - 2
