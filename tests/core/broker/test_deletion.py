"""Deleting tenants, namespaces and topics, and creating a topic on first use: pulsar-admin's
rules, authorization, and what a refusal leaves (everything as it was)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cursorops.core.domain.errors import (
    ApprovalRequiredError,
    InvalidArgumentError,
    NotAuthorizedError,
    NotEmptyError,
    SubscriptionBusyError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
    TopicNotFoundError,
)
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import unsubscribe
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/orders"
PARTITIONED = "persistent://acme/ops/events"
GATED_NS = "acme/gated"
GATED = f"persistent://{GATED_NS}/orders"


def _state(broker: Broker) -> object:
    """What a refusal must leave as it was: tenants, namespaces, topics, subscriptions,
    backlogs and the audit log."""
    namespaces = {
        t: broker.admin.list_namespaces("admin", t) for t in broker.admin.list_tenants("admin")
    }
    topics = {
        ns: broker.admin.list_topics("admin", ns) for names in namespaces.values() for ns in names
    }
    subscriptions = {
        t.name: [
            (
                s.name,
                broker.analysis.topic_stats("admin", t.name).to_pulsar_json()["subscriptions"][
                    s.name
                ]["msgBacklog"],
            )
            for s in broker.admin.list_subscriptions("admin", t.name)
        ]
        for listed in topics.values()
        for t in listed
    }
    audit = {t: len(broker.metadata.audit_log(t)) for t in subscriptions}
    return namespaces, topics, subscriptions, audit


@pytest.fixture
def seeded(broker: Broker) -> Broker:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_topic("admin", PARTITIONED, 3)
    for topic in (TOPIC, PARTITIONED):
        broker.admin.create_subscription(
            "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        broker.producing.produce("admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)])
    broker.admin.create_namespace("admin", GATED_NS)
    broker.admin.set_namespace_policy("admin", GATED_NS, skip_requires_approval=True)
    broker.admin.create_topic("admin", GATED)
    broker.admin.create_subscription(
        "admin", GATED, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.producing.produce("admin", GATED, [OutgoingMessage(b"x")])
    return broker


def _refused(broker: Broker, call: object, error: type[Exception], match: str | None = None) -> str:
    before = _state(broker)
    with pytest.raises(error, match=match) as info:
        call()  # type: ignore[operator]
    assert _state(broker) == before
    return str(info.value)


def test_a_tenant_or_namespace_with_something_left_is_not_deleted(seeded: Broker) -> None:
    said = _refused(seeded, lambda: seeded.deletion.delete_tenant("admin", "acme"), NotEmptyError)
    assert said.startswith("The tenant still has active namespaces: acme/gated, acme/ops")
    said = _refused(
        seeded, lambda: seeded.deletion.delete_namespace("admin", "acme/ops"), NotEmptyError
    )
    assert said.startswith("Cannot delete non empty namespace acme/ops")
    assert "topics delete" in said


def test_deleting_everything_in_order(seeded: Broker) -> None:
    seeded.deletion.delete_topic("admin", TOPIC, partitioned=False)
    seeded.deletion.delete_topic("admin", PARTITIONED, partitioned=True)
    assert seeded.admin.list_topics("admin", "acme/ops") == []
    seeded.admin.grant_permission("admin", "acme/ops", "ops", ["consume"])
    seeded.deletion.delete_namespace("admin", "acme/ops")
    assert "acme/ops" not in seeded.admin.list_namespaces("admin", "acme")
    # Its permissions and policies went with it: a namespace of the same name starts bare.
    seeded.admin.create_namespace("admin", "acme/ops")
    assert seeded.metadata.get_namespace("acme/ops").permissions == {}
    seeded.deletion.delete_namespace("admin", "acme/ops")
    seeded.admin.set_namespace_policy("admin", GATED_NS, skip_requires_approval=False)
    unsubscribe.delete_subscription(seeded.gated, "admin", GATED, "s")
    seeded.deletion.delete_topic("admin", GATED, partitioned=False)
    seeded.deletion.delete_namespace("admin", GATED_NS)
    seeded.deletion.delete_tenant("admin", "acme")
    assert "acme" not in seeded.admin.list_tenants("admin")
    with pytest.raises(TenantNotFoundError):
        seeded.deletion.delete_tenant("admin", "acme")


def test_who_may_delete(seeded: Broker) -> None:
    seeded.admin.grant_permission("admin", "acme/ops", "ops", ["consume", "produce"])
    for role in ("ops", "stranger"):
        _refused(
            seeded,
            lambda role=role: seeded.deletion.delete_topic(role, TOPIC, partitioned=False),
            NotAuthorizedError,
        )
        _refused(
            seeded,
            lambda role=role: seeded.deletion.delete_namespace(role, "acme/ops"),
            NotAuthorizedError,
        )
    # A tenant admin deletes inside the tenant, never the tenant itself.
    _refused(
        seeded, lambda: seeded.deletion.delete_tenant("acme-admin", "acme"), NotAuthorizedError
    )
    seeded.deletion.delete_topic("acme-admin", TOPIC, partitioned=False)
    # A refusal says nothing of whether a topic exists.
    said = _refused(
        seeded,
        lambda: seeded.deletion.delete_topic(
            "ops", "persistent://acme/ops/nosuch", partitioned=False
        ),
        NotAuthorizedError,
    )
    assert "not found" not in said


def test_the_kind_must_match(seeded: Broker) -> None:
    said = _refused(
        seeded,
        lambda: seeded.deletion.delete_topic("admin", PARTITIONED, partitioned=False),
        InvalidArgumentError,
    )
    assert "delete-partitioned-topic" in said
    said = _refused(
        seeded,
        lambda: seeded.deletion.delete_topic("admin", TOPIC, partitioned=True),
        InvalidArgumentError,
    )
    assert "topics delete" in said
    _refused(
        seeded,
        lambda: seeded.deletion.delete_topic(
            "admin", f"{PARTITIONED}-partition-0", partitioned=False
        ),
        InvalidArgumentError,
        "names a partition",
    )
    _refused(
        seeded,
        lambda: seeded.deletion.delete_topic(
            "admin", "persistent://acme/ops/nosuch", partitioned=False
        ),
        TopicNotFoundError,
    )


def test_a_connected_consumer_keeps_the_topic_unless_forced(seeded: Broker) -> None:
    consumer = seeded.reading.dispatcher("admin", PARTITIONED, "s").subscribe("worker")
    said = _refused(
        seeded,
        lambda: seeded.deletion.delete_topic("admin", PARTITIONED, partitioned=True),
        SubscriptionBusyError,
    )
    assert "active producers/subscriptions" in said and "force" in said
    assert seeded.deletion.delete_topic("admin", PARTITIONED, partitioned=True, force=True) == ["s"]
    # The forced delete took the consumer's subscription: nothing is left for it to close.
    with pytest.raises(SubscriptionNotFoundError):
        consumer.close()
    assert [t.name for t in seeded.admin.list_topics("admin", "acme/ops")] == [TOPIC]


def test_a_deleted_topic_leaves_its_history_and_no_files(seeded: Broker) -> None:
    root = Path(seeded.config.ledger_root)
    folder = root / "acme" / "ops" / "events"
    assert list(folder.rglob("*.parquet"))
    seeded.admin.create_subscription("admin", PARTITIONED, "other", SubscriptionType.SHARED)
    assert seeded.deletion.delete_topic("admin", PARTITIONED, partitioned=True, via="cli") == [
        "other",
        "s",
    ]
    assert not folder.exists()
    records = seeded.metadata.audit_log(PARTITIONED)
    kinds = sorted((r.kind, r.subscription) for r in records)
    assert kinds[:1] == [("delete-topic", None)]
    assert ("unsubscribe", "s") in kinds and ("unsubscribe", "other") in kinds
    topic_record = next(r for r in records if r.kind == "delete-topic")
    assert topic_record.detail["subscriptions"] == ["other", "s"]
    assert topic_record.detail["via"] == "cli"
    # Created again, the topic starts empty; its old data is nowhere.
    seeded.admin.create_topic("admin", PARTITIONED, 3)
    seeded.admin.create_subscription(
        "admin", PARTITIONED, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    assert (
        seeded.analysis.topic_stats("admin", PARTITIONED).to_pulsar_json()["subscriptions"]["s"][
            "msgBacklog"
        ]
        == 0
    )


def test_an_approval_namespace_keeps_a_topic_that_has_subscriptions(seeded: Broker) -> None:
    """Deleting the topic would drop its subscriptions' backlogs without the approval an
    unsubscribe needs there: refused, forced or not, naming the gated path."""
    for force in (False, True):
        said = _refused(
            seeded,
            lambda force=force: seeded.deletion.delete_topic(
                "admin", GATED, partitioned=False, force=force
            ),
            ApprovalRequiredError,
        )
        assert "cursorops_unsubscribe" in said and "nothing deleted" in said
    # No way around the gate by deleting and creating again: once the subscriptions are
    # gone through their workflow, the topic goes, and a subscription created again under
    # the old name starts at the latest message only.
    # (What the approved workflow applies: an audited unsubscribe.)
    seeded.admin.set_namespace_policy("admin", GATED_NS, skip_requires_approval=False)
    unsubscribe.delete_subscription(seeded.gated, "admin", GATED, "s")
    seeded.admin.set_namespace_policy("admin", GATED_NS, skip_requires_approval=True)
    seeded.deletion.delete_topic("admin", GATED, partitioned=False)
    seeded.admin.create_topic("admin", GATED)
    _refused(
        seeded,
        lambda: seeded.admin.create_subscription(
            "admin", GATED, "s", SubscriptionType.SHARED, initial_position="earliest"
        ),
        ApprovalRequiredError,
    )


def test_a_topic_deleted_with_its_subscriptions_gives_them_history(seeded: Broker) -> None:
    """On an open namespace that later requires approval, a subscription deleted with its
    topic counts as unsubscribed: created again, it starts at the latest message only."""
    seeded.deletion.delete_topic("admin", TOPIC, partitioned=False)
    seeded.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    seeded.admin.create_topic("admin", TOPIC)
    seeded.producing.produce("admin", TOPIC, [OutgoingMessage(b"new")])
    with pytest.raises(ApprovalRequiredError, match="has history"):
        seeded.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )


def test_produce_and_subscribe_create_a_missing_topic_where_allowed(seeded: Broker) -> None:
    seeded.admin.grant_permission("admin", "acme/ops", "writer", ["produce"])
    seeded.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    fresh = "persistent://acme/ops/fresh"
    seeded.producing.produce("writer", fresh, [OutgoingMessage(b"a")])
    assert fresh in [t.name for t in seeded.admin.list_topics("admin", "acme/ops")]
    other = "persistent://acme/ops/other"
    seeded.admin.create_subscription("reader", other, "s", SubscriptionType.SHARED)
    assert [s.name for s in seeded.admin.list_subscriptions("admin", other)] == ["s"]
    # A role that may not produce there creates nothing, and learns nothing.
    with pytest.raises(NotAuthorizedError):
        seeded.producing.produce("reader", "persistent://acme/ops/third", [OutgoingMessage(b"a")])
    assert "persistent://acme/ops/third" not in [
        t.name for t in seeded.admin.list_topics("admin", "acme/ops")
    ]


def test_a_namespace_that_does_not_create_topics_names_topics_create(seeded: Broker) -> None:
    with pytest.raises(NotAuthorizedError):
        seeded.policies.set_auto_topic_creation("ops", "acme/ops", False)
    seeded.policies.set_auto_topic_creation("acme-admin", "acme/ops", False)
    assert seeded.policies.auto_topic_creation_policy("admin", "acme/ops") is False
    fresh = "persistent://acme/ops/fresh"
    said = _refused(
        seeded,
        lambda: seeded.producing.produce("admin", fresh, [OutgoingMessage(b"a")]),
        TopicNotFoundError,
    )
    assert f"cursorops topics create {fresh}" in said
    _refused(
        seeded,
        lambda: seeded.admin.create_subscription("admin", fresh, "s", SubscriptionType.SHARED),
        TopicNotFoundError,
        "topics create",
    )
    # An existing topic is used as before.
    seeded.producing.produce("admin", TOPIC, [OutgoingMessage(b"a")])
    seeded.policies.set_auto_topic_creation("admin", "acme/ops", None)
    assert seeded.policies.auto_topic_creation_policy("admin", "acme/ops") is None
    seeded.producing.produce("admin", fresh, [OutgoingMessage(b"a")])
