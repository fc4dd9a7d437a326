"""Redriving a subscription's dead-letter topic: only that subscription sees the messages
again, keys, ordering keys, properties and event times kept, provenance added; every
refusal changes nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from cursorops.core.domain.acks.cursor import AckTarget
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    NotAuthorizedError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.topic_name import TopicName, dead_letter_topic
from cursorops.core.domain.redriven_metadata import redriven_metadata
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import redrive, unsubscribe
from cursorops.core.services.gating.redrive import (
    ORIGIN_PROPERTY,
    ORIGIN_TOPIC_PROPERTY,
    REDRIVE_PROPERTY,
    RedrivePlan,
)
from cursorops.core.services.gating.registry import topics_of
from cursorops.core.services.producer import Entry, OutgoingMessage
from tests.conftest import acknowledge
from tests.core.test_admin_rules import _refused

from .conftest import chunk_entries, plain_entry

TOPIC = "persistent://acme/ops/orders"
DLQ = "persistent://acme/ops/orders-billing-DLQ"
SUBSCRIPTIONS = ("audit", "billing", "shipping")


def backlog(broker: Broker, topic: str, subscription: str) -> int:
    return len(broker.reading.peek_messages("admin", topic, subscription, 1_000_000))


@pytest.fixture
def seeded(broker: Broker) -> Broker:
    """Three subscriptions on TOPIC, each with 4 of its 6 messages still to consume; 5
    messages dead-lettered for ``billing``, as a client's dead-letter producer writes them
    (key, ordering key, event time and the client's properties), read by the DLQ's
    ``dlq-reader``."""
    broker.admin.create_topic("admin", TOPIC)
    for sub in SUBSCRIPTIONS:
        broker.admin.create_subscription(
            "admin", TOPIC, sub, SubscriptionType.SHARED, initial_position="earliest"
        )
    broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"m%d" % i) for i in range(6)])
    for sub in SUBSCRIPTIONS:
        broker.reading.consume("admin", TOPIC, sub, 2, ack=True)
    broker.admin.create_topic("admin", DLQ)
    broker.admin.create_subscription(
        "admin", DLQ, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
    )
    messages = [
        OutgoingMessage(
            b"pill-%d" % i,
            key=None if i == 4 else f"k{i % 2}",
            properties={"REAL_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": f"1:{i}:-1", "n": str(i)},
        )
        for i in range(5)
    ]
    entries = [
        Entry.of_messages(
            [m],
            False,
            "dlq-producer",
            1_600_000_000_000 + i,
            event_times=[1_500_000_000_000 + i],
            ordering_keys=[b"ok%d" % i],
        )
        for i, m in enumerate(messages)
    ]
    for entry, sequence in zip(entries, range(5), strict=True):
        broker.producing.append_entries("admin", DLQ, [_with_sequence(entry, sequence)])
    return broker


def _with_sequence(entry: Entry, sequence: int) -> Entry:
    return Entry(
        entry.batched,
        entry.producer_name,
        entry.publish_time,
        entry.payloads,
        [sequence],
        entry.keys,
        entry.properties,
        entry.deliver_at,
        entry.event_times,
        entry.ordering_keys,
    )


def test_the_clients_dead_letter_topic_name() -> None:
    # The Java client's default (RetryMessageUtil.DLQ_GROUP_TOPIC_SUFFIX), and the Python
    # client's, as tests/protocol/test_standalone.py sees it written.
    assert str(dead_letter_topic(TopicName.parse(TOPIC), "billing")) == DLQ
    partition = TopicName.parse(TOPIC).partition(2)
    assert str(dead_letter_topic(partition, "billing")) == DLQ
    assert str(dead_letter_topic(TopicName.parse("orders"), "s")) == (
        "persistent://public/default/orders-s-DLQ"
    )


def test_only_the_failing_subscription_sees_the_redriven_messages(seeded: Broker) -> None:
    broker = seeded
    before = {sub: backlog(broker, TOPIC, sub) for sub in SUBSCRIPTIONS}
    assert before == dict.fromkeys(SUBSCRIPTIONS, 4)
    dead = broker.reading.peek_messages("admin", DLQ, "dlq-reader", 100)

    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    assert plan.messages == 5
    assert plan.dead_letter_topic == DLQ
    assert plan.dead_letter_subscriptions == ("dlq-reader",)
    assert plan.other_subscriptions == ("audit", "shipping")
    assert RedrivePlan.from_json(plan.dumps()) == plan
    preview = plan.preview()
    assert preview["messages"] == 5 and preview["distinctKeys"] == 2
    assert [m["key"] for m in preview["firstMessages"]] == ["k0", "k1", "k0", "k1", None]

    outcome = redrive.apply_redrive(broker.gated, "admin", plan, via="cli")
    assert len(outcome.redriven) == 5 and outcome.acknowledged_meanwhile == ()
    assert outcome.acknowledged_on == ("audit", "shipping")

    # The other subscriptions: backlog unchanged, the redriven messages never delivered.
    for sub in ("audit", "shipping"):
        assert backlog(broker, TOPIC, sub) == 4
        got = broker.reading.consume("admin", TOPIC, sub, 100, ack=True)
        assert [m.payload for m in got] == [b"m%d" % i for i in range(2, 6)]
    # The failing subscription receives them, after its own backlog, in the DLQ's order.
    got = broker.reading.consume("admin", TOPIC, "billing", 100, ack=True)
    assert [m.payload for m in got] == [b"m%d" % i for i in range(2, 6)] + [
        b"pill-%d" % i for i in range(5)
    ]
    redriven = got[4:]
    for i, (message, original) in enumerate(zip(redriven, dead, strict=True)):
        assert message.key == original.key
        assert message.ordering_key == b"ok%d" % i
        assert message.event_time == 1_500_000_000_000 + i
        assert message.properties == {
            **original.properties,
            ORIGIN_PROPERTY: original.message_id.triplet(),
            ORIGIN_TOPIC_PROPERTY: DLQ,
            REDRIVE_PROPERTY: plan.plan_id,
        }
        assert message.message_id == outcome.published[i]
    # The dead-letter subscription has them acknowledged.
    assert broker.reading.peek_messages("admin", DLQ, "dlq-reader", 100) == []
    (record,) = broker.workflow.audit_log("admin", TOPIC, kind="redrive")
    assert record.id == outcome.redrive_id
    assert record.detail["planId"] == plan.plan_id
    assert record.detail["via"] == "cli"
    assert record.detail["deadLetterIds"] == [m.message_id.triplet() for m in dead]
    assert record.detail["newIds"] == [m.triplet() for m in outcome.published]
    # Applying again publishes nothing more: the DLQ's subscription acknowledged them.
    again = redrive.apply_redrive(broker.gated, "admin", plan)
    assert again.redriven == () and len(again.acknowledged_meanwhile) == 5
    assert backlog(broker, TOPIC, "billing") == 0


def test_a_predicate_redrives_the_matching_messages_only(seeded: Broker) -> None:
    broker = seeded
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing", predicate={"key": "k1"})
    assert plan.messages == 2 and plan.predicate == {"key": "k1"}
    redrive.apply_redrive(broker.gated, "admin", plan)
    got = broker.reading.consume("admin", TOPIC, "billing", 100, ack=True)
    assert [m.payload for m in got][4:] == [b"pill-1", b"pill-3"]
    left = broker.reading.peek_messages("admin", DLQ, "dlq-reader", 100)
    assert [m.payload for m in left] == [b"pill-0", b"pill-2", b"pill-4"]


def test_messages_acknowledged_on_the_dlq_meanwhile_are_reported_not_redriven(
    seeded: Broker,
) -> None:
    broker = seeded
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    broker.reading.consume("admin", DLQ, "dlq-reader", 2, ack=True)
    outcome = redrive.apply_redrive(broker.gated, "admin", plan)
    assert len(outcome.redriven) == 3
    assert outcome.acknowledged_meanwhile == plan.ids[:2]
    assert backlog(broker, TOPIC, "billing") == 4 + 3


def test_a_dlq_without_subscriptions_is_read_whole_and_acknowledged_nowhere(
    seeded: Broker,
) -> None:
    broker = seeded
    unsubscribe.delete_subscription(broker.gated, "admin", DLQ, "dlq-reader", force=True)
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    assert plan.messages == 5 and plan.dead_letter_subscriptions == ()
    outcome = redrive.apply_redrive(broker.gated, "admin", plan)
    assert len(outcome.redriven) == 5
    assert backlog(broker, TOPIC, "billing") == 4 + 5
    assert backlog(broker, TOPIC, "audit") == 4


def test_a_partitioned_topic_gets_keyed_messages_on_their_keys_partition(broker: Broker) -> None:
    topic = "persistent://acme/ops/spread"
    broker.admin.create_topic("admin", topic, 3)
    for sub in ("a", "b"):
        broker.admin.create_subscription("admin", topic, sub, SubscriptionType.SHARED)
    dlq = f"{topic}-a-DLQ"
    broker.admin.create_topic("admin", dlq)
    broker.producing.produce(
        "admin", dlq, [OutgoingMessage(b"%d" % i, key=f"k{i}") for i in range(6)]
    )
    outcome = redrive.apply_redrive(
        broker.gated, "admin", redrive.plan_redrive(broker.gated, "admin", topic, "a")
    )
    from cursorops.core.services.producer import key_partition

    assert [m.partition for m in outcome.published] == [key_partition(f"k{i}", 3) for i in range(6)]
    assert sorted(m.payload for m in broker.reading.consume("admin", topic, "a", 100)) == sorted(
        b"%d" % i for i in range(6)
    )
    assert broker.reading.peek_messages("admin", topic, "b", 100) == []


def test_bad_requests_change_nothing(seeded: Broker) -> None:
    broker = seeded
    _refused(
        broker,
        lambda: redrive.plan_redrive(broker.gated, "admin", TOPIC, "nobody"),
        SubscriptionNotFoundError,
    )
    _refused(
        broker,
        lambda: redrive.apply_redrive(
            broker.gated, "admin", redrive.plan_redrive(broker.gated, "admin", TOPIC, "audit")
        ),
        TopicNotFoundError,
    )
    broker.admin.create_topic("admin", f"{TOPIC}-shipping-DLQ")
    message = _refused(
        broker, lambda: redrive.plan_redrive(broker.gated, "admin", TOPIC, "shipping")
    )
    assert "Nothing to redrive" in message
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    broker.admin.grant_permission("admin", "acme/ops", "producer-only", ["produce"])
    broker.admin.grant_permission("admin", "acme/ops", "consumer-only", ["consume"])
    for role in ("producer-only", "consumer-only", "stranger"):
        _refused(
            broker,
            lambda r=role: redrive.plan_redrive(broker.gated, r, TOPIC, "billing"),
            NotAuthorizedError,
        )
        _refused(
            broker, lambda r=role: redrive.apply_redrive(broker.gated, r, plan), NotAuthorizedError
        )
    # A plan altered after it was written, or naming a message the DLQ does not hold.
    document = plan.dumps().replace('"billing"', '"audit"', 1)
    _refused(broker, lambda: RedrivePlan.from_json(document))
    forged = RedrivePlan(
        plan.topic,
        plan.subscription,
        plan.dead_letter_topic,
        plan.dead_letter_subscriptions,
        plan.other_subscriptions,
        (*plan.ids[:4], type(plan.ids[0])(999, 0)),
        plan.keys,
        plan.sample,
        None,
        plan.planned_at,
    )
    assert "not in" in _refused(
        broker, lambda: redrive.apply_redrive(broker.gated, "admin", forged)
    )
    empty = RedrivePlan(TOPIC, "billing", DLQ, (), (), (), (), (), None, plan.planned_at)
    assert "no message" in _refused(
        broker, lambda: redrive.apply_redrive(broker.gated, "admin", empty)
    )


def test_a_namespace_that_requires_approval_refuses_the_direct_door(seeded: Broker) -> None:
    broker = seeded
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    message = _refused(
        broker, lambda: redrive.apply_redrive(broker.gated, "admin", plan), ApprovalRequiredError
    )
    assert "redrive" in message


def test_an_invalid_plan_document_is_refused() -> None:
    for text in ("", "[]", '{"kind": "skip"}', '{"kind": "redrive"}'):
        with pytest.raises(InvalidArgumentError, match="Invalid redrive plan"):
            RedrivePlan.from_json(text)


def test_a_redrive_takes_the_stricter_policy_of_its_two_namespaces(broker: Broker) -> None:
    """The trial's door: a dead-letter topic in a vault (quorum 2) redriven into an ordinary
    namespace asked for one approval, and the vault's log recorded nothing."""
    from cursorops.core.domain.plans.plan_record import PlanBinding

    vault_dlq = "persistent://acme/vault/orders-billing-DLQ"
    broker.admin.create_namespace("admin", "acme/vault")
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription("admin", TOPIC, "billing", SubscriptionType.SHARED)
    broker.admin.create_topic("admin", vault_dlq)
    broker.producing.produce(
        "admin", vault_dlq, [OutgoingMessage(b"pill-%d" % i) for i in range(3)]
    )
    broker.admin.set_namespace_policy("admin", "acme/vault", skip_requires_approval=True)
    broker.admin.set_approval_quorum("admin", "acme/vault", large_above_messages=0, approvals=2)
    for role in ("alice", "bob"):
        for namespace in ("acme/ops", "acme/vault"):
            broker.admin.grant_permission("admin", namespace, role, ["produce", "consume"])
    plan = redrive.plan_redrive(broker.gated, "alice", TOPIC, "billing", dead_letter=vault_dlq)
    with pytest.raises(ApprovalRequiredError, match="acme/vault"):
        redrive.apply_redrive(broker.gated, "alice", plan)
    binding = PlanBinding("cursorops_redrive", "manual__1", "alice", "alice", "redrive")
    record = broker.workflow.save_plan_record(binding, plan, {})
    assert record.required_approvals == 2
    assert topics_of(record) == (TOPIC, vault_dlq)
    # A requester must be permitted on both: carol may consume on ops only.
    broker.admin.grant_permission("admin", "acme/ops", "carol", ["produce", "consume"])
    carol = PlanBinding("cursorops_redrive", "manual__2", "carol", "carol", "redrive")
    with pytest.raises(NotAuthorizedError):
        broker.workflow.save_plan_record(carol, plan, {})
    broker.apply_approved_plan(record, [{"approver": "bob"}, {"approver": "dave"}])
    [mine] = broker.workflow.audit_log("admin", TOPIC, kind="redrive")
    [theirs] = broker.workflow.audit_log("admin", vault_dlq, kind="redrive")
    assert theirs.detail["planDigest"] == mine.detail["planDigest"] == record.digest
    assert theirs.detail["redrivenTo"] == TOPIC and len(theirs.detail["deadLetterIds"]) == 3
    assert backlog(broker, TOPIC, "billing") == 3


def test_a_chunked_dead_letter_is_redriven_whole(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC)
    for sub in ("audit", "billing"):
        broker.admin.create_subscription(
            "admin", TOPIC, sub, SubscriptionType.SHARED, initial_position="earliest"
        )
    broker.admin.create_topic("admin", DLQ)
    broker.admin.create_subscription(
        "admin", DLQ, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
    )
    big = bytes(range(256)) * 3
    a = chunk_entries(big, 3, uuid="dlq-producer-7", producer="dlq-producer")
    b = chunk_entries(b"B" * 40, 2, uuid="other-1", producer="other", send=1)
    dead = broker.producing.append_entries(
        "admin", DLQ, [plain_entry(b"p0"), a[0], plain_entry(b"p1"), a[1], a[2], *b]
    )
    chunks = [dead[i] for i in (1, 3, 4)]
    # One chunk of A acknowledged on the DLQ already, another after planning: A goes whole.
    acknowledge(broker, DLQ, "dlq-reader", [AckTarget(chunks[1])])
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing", predicate={"key": "big"})
    # B has no last chunk: no message yet, not planned.
    assert [m.position for m in plan.ids] == chunks
    acknowledge(broker, DLQ, "dlq-reader", [AckTarget(chunks[0])])
    outcome = redrive.apply_redrive(broker.gated, "admin", plan)
    assert [m.position for m in outcome.redriven] == chunks
    assert outcome.acknowledged_meanwhile == ()
    assert [m.payload for m in broker.reading.peek_messages("admin", DLQ, "dlq-reader", 10)] == [
        b"p0",
        b"p1",
        b"B" * 20,
    ]
    assert broker.reading.peek_messages("admin", TOPIC, "audit", 10) == []
    got = broker.reading.peek_messages("admin", TOPIC, "billing", 10)
    assert b"".join(m.payload for m in got) == big
    assert [m.message_id for m in got] == list(outcome.published)
    (uuid,) = {m.chunk[0] for m in got if m.chunk is not None}
    assert uuid != "dlq-producer-7"
    assert [m.chunk[1:] for m in got if m.chunk is not None] == [(i, 3, len(big)) for i in range(3)]
    assert {m.sequence_id for m in got} == {got[0].sequence_id}
    assert {m.properties[ORIGIN_PROPERTY] for m in got} == {f"{chunks[0][0]}:{chunks[0][1]}"}


def test_a_redriven_chunk_keeps_its_metadata_but_what_a_redrive_owns() -> None:
    from cursorops.wire import commands
    from cursorops.wire.proto import decode, encode

    sent = {
        "producer_name": "dlq-producer",
        "sequence_id": 7,
        "publish_time": 1234,
        "properties": [{"key": "REAL_TOPIC", "value": "t"}],
        "partition_key": "big",
        "compression": 1,
        "uncompressed_size": 99,
        "deliver_at_time": 5000,
        "uuid": "dlq-producer-7",
        "num_chunks_from_msg": 3,
        "total_chunk_msg_size": 99,
        "chunk_id": 1,
        "encryption_keys": [{"key": "k", "value": b"secret"}],
        "schema_version": b"\x00" * 8,
    }
    out = redriven_metadata(
        encode(commands.MessageMetadata, sent),
        producer_name="cursorops-redrive",
        sequence_id=3,
        publish_time=2000,
        properties=[("REAL_TOPIC", "t"), (ORIGIN_PROPERTY, "5:6")],
        uuid="cursorops-redrive-x-3",
    )
    got = decode(commands.MessageMetadata, out)
    assert got["producer_name"] == "cursorops-redrive"
    assert (got["sequence_id"], got["publish_time"], got["uuid"]) == (
        3,
        2000,
        "cursorops-redrive-x-3",
    )
    assert [(p["key"], p["value"]) for p in got["properties"]] == [
        ("REAL_TOPIC", "t"),
        (ORIGIN_PROPERTY, "5:6"),
    ]
    assert "deliver_at_time" not in got
    for field in (
        "partition_key",
        "compression",
        "uncompressed_size",
        "num_chunks_from_msg",
        "total_chunk_msg_size",
        "chunk_id",
        "schema_version",
    ):
        assert got[field] == sent[field]
    assert got["encryption_keys"][0]["value"] == b"secret"
    with pytest.raises(InvalidArgumentError, match="Invalid message metadata"):
        redriven_metadata(
            b"\x0a\x50abc",
            producer_name="p",
            sequence_id=0,
            publish_time=0,
            properties=[],
            uuid="u",
        )


def test_a_chunked_dead_letter_counts_once_in_the_preview_and_the_quorum(broker: Broker) -> None:
    """A, three chunks with p0 between its first two: the approver reads 2 messages (4 ids),
    and a quorum for more than 2 messages is not asked; one more dead letter asks it."""
    from cursorops.core.domain.plans.plan_record import PlanBinding

    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription("admin", TOPIC, "billing", SubscriptionType.SHARED)
    broker.admin.create_topic("admin", DLQ)
    a = chunk_entries(b"A" * 90, 3, uuid="dlq-producer-7", producer="dlq-producer")
    dead = broker.producing.append_entries("admin", DLQ, [a[0], plain_entry(b"p0"), a[1], a[2]])
    broker.admin.set_approval_quorum("admin", "acme/ops", large_above_messages=2, approvals=2)
    plan = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    assert [m.position for m in plan.ids] == dead
    assert plan.chunked_messages == ((0, 2, 3),)
    preview = plan.preview()
    assert (preview["messages"], preview["ids"], preview["keyedMessages"]) == (2, 4, 1)
    assert preview["distinctKeys"] == 1
    # The grouping is part of what the plan's id is taken over, and read back as written.
    assert '"chunkedMessages":[[0,2,3]]' in plan.dumps()
    assert RedrivePlan.from_json(plan.dumps()) == plan
    binding = PlanBinding("cursorops_redrive", "manual__1", "admin", "admin", "redrive")
    assert broker.workflow.save_plan_record(binding, plan, {}).required_approvals == 1

    broker.producing.append_entries("admin", DLQ, [plain_entry(b"p1")])
    bigger = redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    assert (bigger.messages, len(bigger.ids)) == (3, 5)
    again = PlanBinding("cursorops_redrive", "manual__2", "admin", "admin", "redrive")
    assert broker.workflow.save_plan_record(again, bigger, {}).required_approvals == 2


def test_a_plan_without_a_chunked_message_is_spelled_as_before(seeded: Broker) -> None:
    plan = redrive.plan_redrive(seeded.gated, "admin", TOPIC, "billing")
    assert plan.chunked_messages == () and "chunkedMessages" not in plan.dumps()
    assert plan.messages == len(plan.ids) == plan.preview()["ids"]


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([], "left out when there is none"),
        ([[0]], "two or more indexes"),
        ([[0, 9]], "outside 0..2"),
        ([[1, 0]], "ascending"),
        ([[0, 1], [1, 2]], "another one"),
        ([[1, 2], [0, 0]], "ascending"),
        ("0,1", "must be a list"),
        ([[0, True]], "two or more indexes"),
    ],
)
def test_a_plan_whose_chunked_messages_are_malformed_is_refused(
    groups: object, message: str
) -> None:
    import json

    from cursorops.core.domain.ids.message_id import MessageId

    plan = RedrivePlan(
        TOPIC,
        "billing",
        DLQ,
        (),
        (),
        tuple(MessageId(3, e) for e in range(3)),
        (None, None, None),
        (),
        None,
        1,
    )
    content = plan.content() | {"chunkedMessages": groups}
    document = json.dumps({"planId": "0" * 64, **content})
    with pytest.raises(InvalidArgumentError, match=message):
        RedrivePlan.from_json(document)
