"""``skip -n`` and ``clear-backlog`` through the Broker: messages, not entries."""

from __future__ import annotations

import dataclasses

import pytest

from cursorops.core.domain.acks import skip
from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from .conftest import TOPIC, chunk_entries, plain_entry


def backlog(broker: Broker, topic: str, subscription: str) -> int:
    return sum(
        a.result.messages for a in broker.analysis.analyze_backlog("admin", topic, subscription)
    )


def batched(broker: Broker, subscription_type: SubscriptionType = SubscriptionType.SHARED) -> None:
    """Ten messages in batches of four (4 + 4 + 2 messages, three entries)."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", subscription_type, initial_position="earliest"
    )
    broker.producing.produce(
        "admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(10)], batch_size=4
    )


def test_skip_n_counts_messages_inside_batches(broker: Broker) -> None:
    batched(broker)
    outcome = skips.skip_head(broker.gated, "admin", TOPIC, "s", 6, via="cli")
    # Pulsar's skip -n 6 would count entries: all ten messages. Here: the first six.
    assert backlog(broker, TOPIC, "s") == 4
    assert sum(m.batch_index < 0 for m in outcome.skipped) == 1  # the first batch, whole
    assert [bytes(m.payload) for m in broker.reading.consume("admin", TOPIC, "s", 10)] == [
        b"6",
        b"7",
        b"8",
        b"9",
    ]
    [audit] = broker.workflow.audit_log("admin", TOPIC, kind="skip")
    assert audit.detail["via"] == "cli"


def test_skip_n_leaves_acknowledged_messages_out_of_the_count(broker: Broker) -> None:
    batched(broker)
    ids = skips.plan_skip_head(broker.gated, "admin", TOPIC, "s", 10).message_ids()
    second = [m for m in ids if m.batch_index < 0][1]
    skips.skip_messages(
        broker.gated, "admin", TOPIC, "s", [dataclasses.replace(second, batch_index=1)]
    )  # message "5"
    skips.skip_head(broker.gated, "admin", TOPIC, "s", 6)  # 0, 1, 2, 3, 4 and 6: "5" counts no more
    assert [bytes(m.payload) for m in broker.reading.consume("admin", TOPIC, "s", 10)] == [
        b"7",
        b"8",
        b"9",
    ]


def test_clear_backlog_on_any_subscription_type(broker: Broker) -> None:
    batched(broker, SubscriptionType.EXCLUSIVE)
    plan = skips.plan_skip_head(broker.gated, "admin", TOPIC, "s", None)
    assert backlog(broker, TOPIC, "s") == 10  # planning changes nothing
    assert plan.columns.batch_index.tolist() == [-1, -1, -1]  # three entries, whole
    skips.skip_head(broker.gated, "admin", TOPIC, "s", None)
    assert backlog(broker, TOPIC, "s") == 0
    assert skips.skip_head(broker.gated, "admin", TOPIC, "s", None).skipped == []


def test_each_partition_skips_its_own_n_or_one_partition_alone(broker: Broker) -> None:
    topic = "persistent://acme/ops/parted"
    broker.admin.create_topic("admin", topic, partitions=3)
    broker.admin.create_subscription(
        "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce("admin", topic, [OutgoingMessage(b"x")] * 15)  # round robin: 5 each
    skips.skip_head(broker.gated, "admin", topic, "s", 2)
    assert backlog(broker, topic, "s") == 9
    skips.skip_head(broker.gated, "admin", f"{topic}-partition-1", "s", 3)
    per = {
        a.topic_partition: a.result.messages
        for a in broker.analysis.analyze_backlog("admin", topic, "s")
    }
    assert sorted(per.values()) == [0, 3, 3]
    with pytest.raises(TopicNotFoundError):
        skips.skip_head(broker.gated, "admin", f"{topic}-partition-7", "s", 1)


@pytest.mark.parametrize("limit", [0, -1, True])
def test_bad_counts_are_refused_and_change_nothing(broker: Broker, limit: int) -> None:
    batched(broker)
    with pytest.raises(InvalidArgumentError, match="number of messages"):
        skips.skip_head(broker.gated, "admin", TOPIC, "s", limit)
    assert backlog(broker, TOPIC, "s") == 10


def test_refused_without_approval_there(broker: Broker) -> None:
    batched(broker)
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    with pytest.raises(ApprovalRequiredError):
        skips.skip_head(broker.gated, "admin", TOPIC, "s", 3)
    assert backlog(broker, TOPIC, "s") == 10
    # Planning is allowed: it is what the workflow previews.
    assert len(skips.plan_skip_head(broker.gated, "admin", TOPIC, "s", 3)) == 3


def test_an_approved_head_record_applies_on_any_type_a_plain_skip_record_does_not(
    broker: Broker,
) -> None:
    from cursorops.core.domain.errors import UnsupportedSubscriptionTypeError
    from cursorops.core.domain.plans.plan_record import PlanBinding

    batched(broker, SubscriptionType.FAILOVER)
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    plan = skips.plan_skip_head(broker.gated, "admin", TOPIC, "s", 5)
    plain = broker.workflow.save_plan_record(PlanBinding("d", "plain", "ann", "admin"), plan, {})
    with pytest.raises(UnsupportedSubscriptionTypeError):
        broker.apply_approved_plan(plain, [{"approver": "bob"}])
    head = broker.workflow.save_plan_record(
        PlanBinding("d", "head", "ann", "admin"), plan, {"head": {"messages": 5}}
    )
    applied = broker.apply_approved_plan(head, [{"approver": "bob"}])
    assert applied.changed == 2  # the first batch whole (4) and one index of the second
    assert backlog(broker, TOPIC, "s") == 5


def chunked(broker: Broker) -> None:
    """before, chunk 0 of A, x (another producer), chunks 1 and 2 (the last) of A, after,
    and the first chunk of B, whose producer has not sent the rest."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    b = chunk_entries(b"B" * 20, 2, uuid="other-1", producer="other", send=1)
    broker.producing.append_entries(
        "admin",
        TOPIC,
        [plain_entry(b"before"), a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"after"), *b],
    )


def skipped_entries(outcome: skip.SkipOutcome) -> list[int]:
    return sorted(m.entry_id for m in outcome.skipped)


def test_skip_n_takes_a_chunked_message_whole_where_a_consumer_gets_it(broker: Broker) -> None:
    chunked(broker)
    assert backlog(broker, TOPIC, "s") == 4  # before, x, A, after
    # A is received at its last chunk, after x: the first two messages are before and x.
    assert skipped_entries(skips.skip_head(broker.gated, "admin", TOPIC, "s", 2)) == [0, 2]
    assert backlog(broker, TOPIC, "s") == 2
    plan = skips.plan_skip_head(broker.gated, "admin", TOPIC, "s", 1)
    assert plan.columns.entry_id.tolist() == [1, 3, 4]  # one message: all of A's chunks
    assert skipped_entries(skips.apply_skip(broker.gated, "admin", plan)) == [1, 3, 4]
    assert backlog(broker, TOPIC, "s") == 1


def test_clear_backlog_leaves_a_message_whose_last_chunk_is_not_there(broker: Broker) -> None:
    chunked(broker)
    outcome = skips.skip_head(broker.gated, "admin", TOPIC, "s", None)
    assert skipped_entries(outcome) == [0, 1, 2, 3, 4, 5]
    assert backlog(broker, TOPIC, "s") == 0
    # B's chunk stays: taking it would leave its later chunks alone when they come.
    state = broker.analysis.cursor_state("admin", TOPIC, "s")
    assert not state.is_acked(Position(outcome.skipped[0].ledger_id, 6))
