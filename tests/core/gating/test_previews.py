"""Every gated request previews in one shape (``preview_of``): a heading that counts
what changes, the request, per partition before and after, the effect counted, ordered
details. Each operation's request is planned against small real stores (the seeded
topics of ``test_gated_requests``: 10 messages in batches of 2, a dead-letter topic of 3)
and its preview checked against what the stores say."""

from __future__ import annotations

import pytest

from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.plans.plan_record import PlanRecord
from cursorops.core.domain.plans.preview import Effects, predicate_text, time_text
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import Pending, ResetCursor, SkipMessages, UndoSkip
from cursorops.core.services.gating.registry import preview_of
from tests.core.test_gated_requests import ALICE, REQUESTS, SUB, VAULT, Runs, ids, seeded

__all__ = ["seeded"]


def pending(broker: Broker, operation: str, arguments: object) -> PlanRecord:
    made = broker.request(operation, ALICE, arguments, Runs())
    assert isinstance(made, Pending)
    return made.record


def test_a_skip_counts_what_changes_and_who_asked(seeded: Broker) -> None:
    record = pending(seeded, "skip-messages", REQUESTS["skip-messages"](seeded, VAULT))
    preview = preview_of(record)
    assert preview.heading == "Skip 3 message(s), 3 id(s)"
    assert preview.effects == Effects(acknowledged=3, redelivered=0, unchanged=0)
    request = preview.request
    assert (request.requester, request.role, request.reason, request.ticket) == (
        "alice",
        "alice",
        "poison pill",
        "OPS-1",
    )
    assert request.approvals_needed == 1 and request.undone_skip_approvals is None
    [partition] = preview.partitions
    assert (partition.backlog_before, partition.backlog_after, partition.ids) == (10, 7, 3)
    assert partition.acknowledged == 3
    assert [m.id for m in preview.messages] == [m.triplet() for m in ids(seeded, VAULT)[:3]]
    assert [label for label, _ in preview.details] == ["Ids named"]
    assert preview.backlog == (10, 7)


def test_a_rerun_whose_ids_are_partly_acknowledged_counts_only_what_changes(
    seeded: Broker,
) -> None:
    first = ids(seeded, VAULT)[:3]
    seeded.apply_approved_plan(
        pending(
            seeded,
            "skip-messages",
            SkipMessages(topic=VAULT, subscription=SUB, ids=first[:2], reason="r"),
        ),
        [{"approver": "bob"}],
    )
    again = pending(
        seeded, "skip-messages", SkipMessages(topic=VAULT, subscription=SUB, ids=first, reason="r")
    )
    preview = preview_of(again)
    assert preview.heading == "Skip 1 message(s), 1 id(s); 2 already acknowledged"
    assert preview.effects == Effects(acknowledged=1, unchanged=2)
    notes = [m.note for m in preview.messages]
    assert notes.count("already acknowledged") == 2


def test_a_head_skip_and_a_matching_skip_say_how_they_chose(seeded: Broker) -> None:
    head = preview_of(pending(seeded, "skip-head", REQUESTS["skip-head"](seeded, VAULT)))
    # 4 messages per partition: two whole batches of 2, so 2 ids.
    assert head.heading == "Skip 4 message(s), 2 id(s)"
    assert dict(head.details)["Chosen as"].startswith("the first 4 unacknowledged message(s)")
    matching = pending(seeded, "skip-matching", REQUESTS["skip-matching"](seeded, VAULT))
    assert dict(preview_of(matching).details)["Matching"] == 'payload contains "m1"'


def test_a_reset_back_says_how_many_are_redelivered_per_partition(seeded: Broker) -> None:
    skip = pending(seeded, "skip-head", REQUESTS["skip-head"](seeded, VAULT))
    seeded.apply_approved_plan(skip, [{"approver": "bob"}])
    first = ids(seeded, VAULT)[0].position  # the backlog is 6 now
    back = ResetCursor(
        topic=VAULT, subscription=SUB, position=Position(first.ledger_id, 0), reason="replay"
    )
    preview = preview_of(pending(seeded, "reset-cursor", back))
    assert preview.heading == "Reset cursor: redeliver 4 message(s)"
    assert preview.effects == Effects(acknowledged=0, redelivered=4)
    [partition] = preview.partitions
    assert (partition.backlog_before, partition.backlog_after) == (6, 10)
    assert (partition.redelivered, partition.acknowledged) == (4, 0)
    assert partition.next_read_after == f"{first.ledger_id}:0" and partition.mark_delete_before
    assert preview.moves_mark_delete
    assert dict(preview.details)["Reset to"] == f"the message id {first.ledger_id}:0"


def test_a_reset_forward_says_how_many_are_acknowledged(seeded: Broker) -> None:
    preview = preview_of(pending(seeded, "reset-cursor", REQUESTS["reset-cursor"](seeded, VAULT)))
    assert preview.heading == "Reset cursor: acknowledge 6 message(s)"
    assert preview.effects == Effects(acknowledged=6, redelivered=0)
    [partition] = preview.partitions
    assert (partition.backlog_before, partition.backlog_after, partition.acknowledged) == (10, 4, 6)


def test_a_reset_to_a_time_says_the_time_in_utc(seeded: Broker) -> None:
    arguments = ResetCursor(topic=VAULT, subscription=SUB, timestamp_ms=0, reason="all again")
    details = dict(preview_of(pending(seeded, "reset-cursor", arguments)).details)
    assert details["Reset to"] == (
        "the first message published at or after 1970-01-01 00:00:00.000 UTC"
    )


def test_an_undo_shows_the_approvals_of_the_skip_it_undoes_and_none_of_its_own(
    seeded: Broker,
) -> None:
    skip = pending(seeded, "skip-messages", REQUESTS["skip-messages"](seeded, VAULT))
    seeded.apply_approved_plan(skip, [{"approver": "bob"}])
    [audit] = seeded.workflow.audit_log("admin", VAULT, kind="skip")
    undo = UndoSkip(topic=VAULT, subscription=SUB, skip_id=audit.id, reason="wrong ids")
    preview = preview_of(pending(seeded, "undo-skip", undo))
    assert preview.heading == f"Undo skip {audit.id}: redeliver 3 message(s)"
    assert preview.request.undone_skip_approvals == ("bob",)
    assert preview.request.reason == "wrong ids" and preview.request.approvals_needed == 1
    assert preview.effects == Effects(
        redelivered=3, unchanged=0, unchanged_as="no longer acknowledged"
    )
    details = dict(preview.details)
    assert details["Its approvals"] == "bob" and details["Its reason"] == "poison pill"
    assert "approved" not in " ".join(label.lower() for label in details)
    assert [p.ids for p in preview.partitions] == [3]
    assert all(not m.content for m in preview.messages) and len(preview.messages) == 3


def test_an_undo_of_a_direct_skip_says_it_had_no_approval(seeded: Broker) -> None:
    from tests.core.test_gated_requests import ORDINARY

    done = seeded.request(
        "skip-messages", ALICE, REQUESTS["skip-messages"](seeded, ORDINARY), Runs()
    )
    seeded.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    undo = UndoSkip(topic=ORDINARY, subscription=SUB, skip_id=done.outcome["skipId"], reason="r")
    preview = preview_of(pending(seeded, "undo-skip", undo))
    assert preview.request.undone_skip_approvals == ()


def test_a_redrive_counts_what_is_redelivered_and_acknowledged(seeded: Broker) -> None:
    preview = preview_of(pending(seeded, "redrive", REQUESTS["redrive"](seeded, VAULT)))
    assert preview.heading == "Redrive 3 message(s) from the dead-letter topic"
    assert preview.effects.redelivered == 3
    details = dict(preview.details)
    assert details["Which"] == "every message on it"
    assert details["From the dead-letter topic"] == f"{VAULT}-{SUB}-DLQ"
    assert [(p.partition, p.ids) for p in preview.partitions] == [(f"{VAULT}-{SUB}-DLQ", 3)]
    assert [m.key for m in preview.messages] == ["k", "k", "k"]


def test_an_unsubscribe_counts_what_it_drops(seeded: Broker) -> None:
    preview = preview_of(pending(seeded, "unsubscribe", REQUESTS["unsubscribe"](seeded, VAULT)))
    assert preview.heading == "Unsubscribe: delete the subscription and drop 10 message(s)"
    assert preview.effects.dropped == 10
    [partition] = preview.partitions
    assert (partition.backlog_before, partition.gone) == (10, True)
    assert dict(preview.details)["Even with consumers connected"] == "no"


@pytest.mark.parametrize(
    ("predicate", "words"),
    [
        (None, "every message"),
        ({"publishTime": {"after": 0}}, "everything"),
        (
            {"publishTime": {"after": 0}, "key": "order-42"},
            'key is "order-42"',
        ),
        (
            {"publishTime": {"after": 1_767_225_600_000, "before": "now"}},
            "published at or after 2026-01-01 00:00:00.000 UTC and before the time of the scan",
        ),
        ({"deliverAt": {"after": "2h"}}, "delayed, due at or after 2h before the scan"),
        (
            {"properties": {"region": "eu", "pii": "yes"}, "payloadContains": "timeout"},
            'property "region" is "eu" and property "pii" is "yes" and payload contains "timeout"',
        ),
        (
            {"jsonField": {"path": "order.id", "equals": 42}, "producer": "svc"},
            'JSON field "order.id" equals 42 and producer is "svc"',
        ),
    ],
)
def test_a_predicate_reads_as_words(predicate: dict[str, object] | None, words: str) -> None:
    assert predicate_text(predicate) == words


def test_times_are_in_utc() -> None:
    assert time_text(0) == "1970-01-01 00:00:00.000 UTC"
    assert time_text(None) == "" and time_text("now") == "now"


def test_a_preview_is_json(seeded: Broker) -> None:
    record = pending(seeded, "reset-cursor", REQUESTS["reset-cursor"](seeded, VAULT))
    body = preview_of(record).to_json()
    assert body["effects"]["acknowledged"] == 6 and body["request"]["requester"] == "alice"
    assert body["partitions"][0]["backlogBefore"] == 10
