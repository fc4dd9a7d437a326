"""Undo of a skip through ``Broker.undo``: exactly the skipped messages come back, once.

Ledgers here hold five entries, so the ten messages of ``TOPIC`` are on two ledgers
(``0:0-4`` and the next), and a retention that deletes the first can be played.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, delete
from sqlalchemy.pool import NullPool

from cursorops.core.domain.acks.cursor import AckTarget, CursorState
from cursorops.core.domain.config import Config
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    CursorOpsError,
    InvalidArgumentError,
    InvalidSkipPlanError,
    SkipAlreadyUndoneError,
    SkipNotFoundError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.gating import undo_skip
from cursorops.core.services.gating.undo_skip import UndoPartition, UndoPlan
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.services.reading.dispatch import Consumer
from cursorops.core.store.tables import LedgerRow, SegmentRow
from tests.conftest import acknowledge, acknowledge_cumulative

from .conftest import TOPIC, chunk_entries, plain_entry


@pytest.fixture
def home_config(tmp_path: Path, metadata_url: str) -> Config:
    return Config.from_home(tmp_path / "home", metadata_url=metadata_url, max_entries_per_ledger=5)


def drain(consumer: Consumer) -> list[bytes]:
    """Every message the consumer can receive now, acknowledged; their payloads."""
    received = consumer.receive_many(100)
    if received:
        consumer.acknowledge(received)
    return sorted(m.payload for m in received)


def states(broker: Broker) -> CursorState:
    return broker.analysis.cursor_state("admin", TOPIC, "s")


def refused(
    broker: Broker, call: Callable[[], object], error: type[CursorOpsError], match: str
) -> None:
    """``call`` raises ``error``, and neither the cursor nor the audit log changed."""
    before = (states(broker), len(broker.workflow.audit_log("admin", TOPIC, limit=1000)))
    with pytest.raises(error, match=match):
        call()
    assert (states(broker), len(broker.workflow.audit_log("admin", TOPIC, limit=1000))) == before


def test_every_skipped_message_is_delivered_once_again_and_nothing_else(
    broker: Broker, ids: list[MessageId]
) -> None:
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[2], ids[5], ids[7]])
    assert skipped.skip_id is not None
    assert skipped.to_pulsar_json()["skipId"] == skipped.skip_id
    assert drain(consumer) == [b"0", b"1", b"3", b"4", b"6", b"8", b"9"]
    assert drain(consumer) == []
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    assert (plan.messages, plan.still_acknowledged) == (3, 3)
    outcome = undo_skip.apply_undo_skip(broker.gated, "admin", plan, via="cli")
    assert sorted(outcome.unacknowledged) == sorted(m.triplet() for m in skipped.skipped)
    assert outcome.not_acknowledged == ()
    # The same dispatcher, its cursor cached: it reads the undo by the cursor's version.
    assert drain(consumer) == [b"2", b"5", b"7"]
    assert drain(consumer) == []
    [record] = broker.workflow.audit_log("admin", TOPIC, kind="undo-skip")
    assert (record.id, record.detail["skipId"], record.detail["via"]) == (
        outcome.undo_id,
        skipped.skip_id,
        "cli",
    )
    [listed] = undo_skip.list_skips(broker.gated, "admin", TOPIC, "s")
    assert (listed.skip_id, listed.ids, listed.undone_by) == (
        skipped.skip_id,
        3,
        outcome.undo_id,
    )


def test_undo_after_a_later_cumulative_ack_moves_mark_delete_back(
    broker: Broker, ids: list[MessageId]
) -> None:
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[3], ids[6]])
    assert skipped.skip_id is not None
    acknowledge_cumulative(broker, TOPIC, "s", ids[8].position)
    assert states(broker).mark_delete == ids[8].position
    outcome = undo_skip.apply_undo_skip(
        broker.gated,
        "admin",
        undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id),
    )
    assert len(outcome.unacknowledged) == 2
    after = states(broker)
    assert after.mark_delete == ids[2].position
    for i, message in enumerate(ids):
        assert after.is_acked(message.position) == (i not in (3, 6, 9)), i
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
    assert drain(consumer) == [b"3", b"6", b"9"]


def test_a_batch_index_comes_back_alone(broker: Broker) -> None:
    topic = "persistent://acme/ops/batched"
    broker.admin.create_topic("admin", topic)
    broker.admin.create_subscription(
        "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce(
        "admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)], batch_size=3
    )
    skipped = skips.skip_messages(broker.gated, "admin", topic, "s", [ids[1], ids[4]])
    assert skipped.skip_id is not None
    consumer = broker.reading.dispatcher("admin", topic, "s").subscribe("c")
    assert drain(consumer) == [b"0", b"2", b"3", b"5"]
    undo_skip.apply_undo_skip(
        broker.gated,
        "admin",
        undo_skip.plan_undo_skip(broker.gated, "admin", topic, "s", skipped.skip_id),
    )
    assert drain(consumer) == [b"1", b"4"]
    assert drain(consumer) == []


def test_a_partitioned_topics_skip_comes_back_on_each_partition(broker: Broker) -> None:
    topic = "persistent://acme/ops/parts"
    broker.admin.create_topic("admin", topic, 3)
    broker.admin.create_subscription(
        "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce("admin", topic, [OutgoingMessage(b"%d" % i) for i in range(9)])
    chosen = [ids[0], ids[4], ids[8]]
    skipped = skips.skip_messages(broker.gated, "admin", topic, "s", chosen)
    assert skipped.skip_id is not None and len(skipped.skipped) == 3
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", topic, "s", skipped.skip_id)
    assert sum(plan.preview()["perPartition"].values()) == 3  # type: ignore[attr-defined]
    outcome = undo_skip.apply_undo_skip(broker.gated, "admin", plan)
    assert sum(outcome.per_partition.values()) == 3
    consumer = broker.reading.dispatcher("admin", topic, "s").subscribe("c")
    assert drain(consumer) == sorted(b"%d" % i for i in range(9))


def test_undo_is_refused_when_a_ledger_is_no_longer_retained(
    broker: Broker, ids: list[MessageId]
) -> None:
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [ids[1], ids[7]])
    assert skipped.skip_id is not None
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    first = ids[0].position.ledger_id
    assert ids[7].position.ledger_id != first
    engine = create_engine(broker.config.metadata_url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.execute(delete(SegmentRow).where(SegmentRow.ledger_id == first))
        connection.execute(delete(LedgerRow).where(LedgerRow.ledger_id == first))
    engine.dispose()
    message = (
        f"Cannot undo skip {skipped.skip_id}: ledger no longer retained for {ids[1].triplet()}"
    )
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id or 0),
        InvalidArgumentError,
        message,
    )
    refused(
        broker,
        lambda: undo_skip.apply_undo_skip(broker.gated, "admin", plan),
        InvalidArgumentError,
        message,
    )


def test_a_skip_is_undone_once(broker: Broker, ids: list[MessageId]) -> None:
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:2])
    assert skipped.skip_id is not None
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    done = undo_skip.apply_undo_skip(broker.gated, "admin", plan)
    match = f"Skip {skipped.skip_id} was undone already \\(undo {done.undo_id} by 'admin'\\)"
    refused(
        broker,
        lambda: undo_skip.apply_undo_skip(broker.gated, "admin", plan),
        SkipAlreadyUndoneError,
        match,
    )
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id or 0),
        SkipAlreadyUndoneError,
        match,
    )
    # An undo's own id is no skip: it is not undone (skip the messages again instead).
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", done.undo_id),
        InvalidArgumentError,
        "an undo is not undone; skip the messages again",
    )


def test_bad_skip_ids_are_refused(broker: Broker, ids: list[MessageId]) -> None:
    broker.admin.create_subscription(
        "admin", TOPIC, "other", SubscriptionType.SHARED, initial_position="earliest"
    )
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:1])
    assert skipped.skip_id is not None
    other = broker.workflow.record_audit("admin", "note", TOPIC, "s", {"text": "not a skip"})
    for bad, error, match in [
        (0, InvalidArgumentError, "Invalid skip id 0"),
        (-3, InvalidArgumentError, "Invalid skip id -3"),
        (True, InvalidArgumentError, "Invalid skip id True"),
        (2**63, InvalidArgumentError, "Invalid skip id"),
        (10_000, SkipNotFoundError, "No skip 10000 on"),
        (other, SkipNotFoundError, "it records a note"),
    ]:
        refused(
            broker,
            lambda bad=bad: undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", bad),  # type: ignore[misc]
            error,
            match,
        )
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(
            broker.gated, "admin", TOPIC, "other", skipped.skip_id or 0
        ),
        SkipNotFoundError,
        "it skipped on 's'",
    )
    broker.admin.create_topic("admin", "persistent://acme/ops/elsewhere")
    broker.admin.create_subscription("admin", "persistent://acme/ops/elsewhere", "s")
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(
            broker.gated, "admin", "persistent://acme/ops/elsewhere", "s", skipped.skip_id or 0
        ),
        SkipNotFoundError,
        "No skip",
    )


def test_a_forged_plan_is_refused(broker: Broker, ids: list[MessageId]) -> None:
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:2])
    assert skipped.skip_id is not None
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    assert UndoPlan.from_json(plan.dumps()) == plan
    with pytest.raises(InvalidSkipPlanError, match="does not match its content"):
        UndoPlan.from_json(plan.dumps().replace(ids[0].triplet(), ids[5].triplet()))
    [part] = plan.partitions
    wider = dataclasses.replace(
        plan,
        partitions=(
            UndoPartition(
                part.topic_partition,
                (*part.ledger_ids, ids[5].position.ledger_id),
                (*part.entry_ids, ids[5].position.entry_id),
                (*part.batch_indexes, -1),
            ),
        ),
    )
    refused(
        broker,
        lambda: undo_skip.apply_undo_skip(broker.gated, "admin", UndoPlan.from_json(wider.dumps())),
        InvalidSkipPlanError,
        "does not name the messages skip",
    )


def test_undo_needs_skip_permission_and_is_refused_where_approval_is_required(
    broker: Broker, ids: list[MessageId]
) -> None:
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", ids[:3])
    assert skipped.skip_id is not None
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["produce"])
    refused(
        broker,
        lambda: undo_skip.plan_undo_skip(broker.gated, "reader", TOPIC, "s", skipped.skip_id or 0),
        CursorOpsError,
        "not authorized to skip",
    )
    assert [s.skip_id for s in undo_skip.list_skips(broker.gated, "reader", TOPIC)] == [
        skipped.skip_id
    ]
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    refused(
        broker,
        lambda: undo_skip.apply_undo_skip(broker.gated, "admin", plan),
        ApprovalRequiredError,
        "approval for undo-skip",
    )
    # Planning changes nothing: still allowed, for the workflow that gates the apply.
    assert (
        undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id).messages == 3
    )


def chunked(broker: Broker) -> int:
    """A, a message in three chunks with x between its first two, then y; A's ledger."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    entries = [a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"y")]
    return broker.producing.append_entries("admin", TOPIC, entries)[0].ledger_id


def unacknowledged(broker: Broker, ledger: int) -> list[int]:
    state = states(broker)
    return [e for e in range(5) if not state.is_acked(Position(ledger, e))]


def test_a_skipped_chunked_message_comes_back_whole(broker: Broker) -> None:
    ledger = chunked(broker)
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [MessageId(ledger, 2)])
    assert skipped.skip_id is not None
    assert unacknowledged(broker, ledger) == [1, 4]
    outcome = undo_skip.apply_undo_skip(
        broker.gated,
        "admin",
        undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id),
    )
    assert sorted(outcome.unacknowledged) == [f"{ledger}:{e}" for e in (0, 2, 3)]
    assert unacknowledged(broker, ledger) == [0, 1, 2, 3, 4]


def test_an_undo_takes_back_every_chunk_whichever_the_skip_names(broker: Broker) -> None:
    # A skip recorded as naming one chunk of A (its other chunks acknowledged otherwise,
    # as a skip made before a skip took chunked messages whole left them).
    ledger = chunked(broker)
    acknowledge(broker, TOPIC, "s", [AckTarget(Position(ledger, e)) for e in (0, 2, 3)])
    skip_id = broker.metadata.record_audit(
        "skip", TOPIC, "s", "admin", {"skipped": [f"{ledger}:2"], "via": "cli"}, 1
    )
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skip_id)
    assert plan.partitions[0].triplets() == [f"{ledger}:{e}" for e in (2, 0, 3)]
    # A is one message to every count, whichever of its chunks are listed.
    assert (plan.ids, plan.messages, plan.still_acknowledged) == (3, 1, 1)
    undo_skip.apply_undo_skip(broker.gated, "admin", plan)
    assert unacknowledged(broker, ledger) == [0, 1, 2, 3, 4]


def test_the_preview_of_an_undo_counts_a_chunked_message_once(broker: Broker) -> None:
    """The skip took A (three chunks) and x: the approver reads 2 messages of 4 ids; a
    message of which only some chunks are acknowledged still counts once."""
    ledger = chunked(broker)
    skipped = skips.skip_messages(
        broker.gated, "admin", TOPIC, "s", [MessageId(ledger, 3), MessageId(ledger, 1)]
    )
    assert skipped.skip_id is not None
    plan = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id)
    (part,) = plan.partitions
    assert part.triplets() == [f"{ledger}:{e}" for e in (3, 1, 0, 2)]
    assert part.chunked_messages == ((0, 2, 3),)
    preview = plan.preview()
    assert (preview["messages"], preview["stillAcknowledged"]) == (2, 2)
    assert preview["perPartition"] == {TOPIC: 2}
    assert (len(preview["ids"]), preview["idsNotListed"]) == (4, 0)  # type: ignore[arg-type]
    assert '"chunkedMessages":[[0,2,3]]' in plan.dumps()
    assert UndoPlan.from_json(plan.dumps()) == plan
    undo_skip.apply_undo_skip(broker.gated, "admin", plan)
    # Two of A's chunks acknowledged again, x not: a skip recorded as naming x and A's
    # last chunk has one message still acknowledged, A.
    acknowledge(broker, TOPIC, "s", [AckTarget(Position(ledger, e)) for e in (2, 3)])
    record = broker.metadata.record_audit(
        "skip", TOPIC, "s", "admin", {"skipped": [f"{ledger}:{e}" for e in (1, 3)]}, 2
    )
    partly = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", record)
    assert partly.partitions[0].chunked_messages == ((1, 2, 3),)
    assert (partly.ids, partly.messages, partly.still_acknowledged) == (4, 2, 1)


def test_an_undo_plan_with_malformed_chunked_messages_is_refused(broker: Broker) -> None:
    ledger = chunked(broker)
    skipped = skips.skip_messages(broker.gated, "admin", TOPIC, "s", [MessageId(ledger, 0)])
    assert skipped.skip_id is not None
    text = undo_skip.plan_undo_skip(broker.gated, "admin", TOPIC, "s", skipped.skip_id).dumps()
    for wrong, message in (("[[0,1,9]]", "outside"), ("[]", "left out"), ("[[0]]", "two or more")):
        forged = text.replace('"chunkedMessages":[[0,1,2]]', f'"chunkedMessages":{wrong}')
        assert forged != text
        with pytest.raises(InvalidSkipPlanError, match=message):
            UndoPlan.from_json(forged)
