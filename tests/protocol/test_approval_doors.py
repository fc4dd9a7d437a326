"""Cursor moves over the wire where the namespace requires approval: a consumer's unsubscribe
is the unsubscribe workflow's, a name with history is subscribed again at latest only, and
a reader still comes and goes (its own subscription is no one's cursor)."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from cursorops.core.skipping.plan_record import PlanBinding
from tests.protocol.harness import Standalone, drain

pytestmark = pytest.mark.slow

NAMESPACE = "public/vault"


@pytest.fixture(scope="module")
def vault(standalone: Standalone) -> str:
    with standalone.broker() as broker:
        broker.create_namespace("admin", NAMESPACE)
        broker.set_namespace_policy("admin", NAMESPACE, skip_requires_approval=True)
    return NAMESPACE


def _topic(namespace: str) -> str:
    return f"persistent://{namespace}/t-{uuid.uuid4().hex[:10]}"


def test_unsubscribe_then_subscribe_at_earliest_moves_no_cursor(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(b"m%d" % i)
    earliest = pulsar.InitialPosition.Earliest
    consumer = client.subscribe(topic, "ledger", initial_position=earliest)
    for message in drain(consumer):
        consumer.acknowledge(message)
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        consumer.unsubscribe()
    consumer.close()
    with standalone.broker() as broker:
        assert [s.name for s in broker.list_subscriptions("admin", topic)] == ["ledger"]
        plan = broker.plan_unsubscribe("admin", topic, "ledger")
        binding = PlanBinding("cursorops_unsubscribe", "manual__w", "alice", "admin", "unsubscribe")
        record = broker.save_plan_record(binding, plan, {})
        broker.apply_approved_plan(record, [{"approver": "bob"}])
    with pytest.raises(pulsar.exceptions.AuthorizationError):
        client.subscribe(topic, "ledger", initial_position=earliest)
    again = client.subscribe(topic, "ledger")  # latest: nothing comes back
    assert drain(again, 500) == []
    again.close()


def test_a_reader_comes_and_goes_on_an_approval_namespace(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    client.create_producer(topic).send(b"x")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(5000).data() == b"x"
    reader.close()
    time.sleep(0.3)
    with standalone.broker() as broker:
        assert broker.list_subscriptions("admin", topic) == []
