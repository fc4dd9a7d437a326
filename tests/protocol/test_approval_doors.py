"""Cursor moves over the wire where the namespace requires approval: a consumer's unsubscribe
is the unsubscribe workflow's, a name with history is subscribed again at latest only, a
reader still comes and goes (its own subscription is no one's cursor), and a consumer
acknowledges only what it was handed (docs/decisions/2026-12-07-an-approval-namespace-
refuses-acks-of-messages-not-delivered.md): an ack of anything else is refused, audited,
and moves nothing."""

from __future__ import annotations

import datetime
import time
import uuid

import pulsar
import pytest

from cursorops.core.domain.plans.plan_record import PlanBinding
from cursorops.core.services.gating import unsubscribe
from cursorops.wire.commands import CommandType, ServerError, SubType
from cursorops.wire.frames import command
from tests.protocol.harness import Standalone, drain
from tests.protocol.raw import RawClient

pytestmark = pytest.mark.slow

NAMESPACE = "public/vault"


@pytest.fixture(scope="module")
def vault(standalone: Standalone) -> str:
    with standalone.broker() as broker:
        broker.admin.create_namespace("admin", NAMESPACE)
        broker.admin.set_namespace_policy("admin", NAMESPACE, skip_requires_approval=True)
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
        assert [s.name for s in broker.admin.list_subscriptions("admin", topic)] == ["ledger"]
        plan = unsubscribe.plan_unsubscribe(broker.gated, "admin", topic, "ledger")
        binding = PlanBinding("cursorops_unsubscribe", "manual__w", "alice", "admin", "unsubscribe")
        record = broker.workflow.save_plan_record(binding, plan, {})
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
        assert broker.admin.list_subscriptions("admin", topic) == []


REFUSED = "refused-cursor-move"


def _backlog(standalone: Standalone, topic: str, subscription: str) -> list[int]:
    with standalone.broker() as broker:
        rows = broker.analysis.analyze_backlog("admin", topic, subscription)
    return [row.result.messages for row in sorted(rows, key=lambda r: r.topic_partition)]


def _refusals(standalone: Standalone, topic: str, wait_s: float = 10.0) -> list[dict[str, object]]:
    """The topic's audit records of refused cursor moves, waiting for the first (an ack
    without a receipt is sent, grouped, a moment after the call)."""
    deadline = time.monotonic() + wait_s
    while True:
        with standalone.broker() as broker:
            found = broker.workflow.audit_log("admin", topic, kind=REFUSED)
        if found or time.monotonic() > deadline:
            return [dict(record.detail) for record in found]
        time.sleep(0.1)


def test_an_ack_of_a_delayed_message_never_delivered_is_refused(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = producer.send(b"later", deliver_after=datetime.timedelta(hours=1))
    assert drain(consumer, 300) == []
    assert _backlog(standalone, topic, "work") == [1]
    forged = pulsar.MessageId(sent.partition(), sent.ledger_id(), sent.entry_id(), -1)
    consumer.acknowledge(forged)
    (refusal,) = _refusals(standalone, topic)
    assert "not delivered to the consumer" in str(refusal["what"])
    assert _backlog(standalone, topic, "work") == [1]
    consumer.close()
    # Logged once, by the door that refused it: the wire adds no "ACK failed" line.
    log = standalone.log_text().splitlines()
    door = [line for line in log if "cursor door: refused" in line and topic in line]
    assert len(door) == 1, door
    wire = [line for line in log if "ACK failed" in line and "approval" in line]
    assert wire == []


def test_a_cumulative_ack_of_nothing_received_moves_nothing(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    with standalone.broker() as broker:
        broker.admin.create_topic("admin", topic, 2)
    partition = f"{topic}-partition-0"
    # A zero receiver queue asks for no message before a receive: none is delivered.
    consumer = client.subscribe(partition, "work", receiver_queue_size=0)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"m%d" % i, partition_key=str(i)) for i in range(40)]
    before = _backlog(standalone, topic, "work")
    assert sum(before) == 40 and before[0] > 0
    last = max((m for m in ids if m.partition() == 0), key=lambda m: m.entry_id())
    forged = pulsar.MessageId(0, last.ledger_id(), last.entry_id(), -1)
    consumer.acknowledge_cumulative(forged)
    assert _refusals(standalone, topic)
    assert _backlog(standalone, topic, "work") == before
    consumer.close()


def test_a_cumulative_ack_moves_mark_delete_over_what_was_handed_only(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    with standalone.broker() as broker:
        broker.admin.create_topic("admin", topic)
    # A zero receiver queue: each receive asks for one message, so one is handed over.
    consumer = client.subscribe(topic, "work", receiver_queue_size=0)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"m%d" % i) for i in range(10)]
    first = consumer.receive()  # a zero queue takes no timeout
    assert first.data() == b"m0"
    consumer.acknowledge_cumulative(ids[-1])
    deadline = time.monotonic() + 10
    while _backlog(standalone, topic, "work") != [9] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _backlog(standalone, topic, "work") == [9]
    consumer.close()


def test_an_ack_with_a_receipt_is_answered_with_the_refusal(
    standalone: Standalone, vault: str
) -> None:
    topic = _topic(vault)
    with RawClient(standalone.port) as raw:
        raw.connect()
        raw.subscribe(topic, "work", SubType.Shared)
        raw.producer(topic)
        receipt = raw.send_message(b"x", 0)
        mid = receipt["message_id"]
        raw.send(
            command(
                CommandType.ACK,
                consumer_id=1,
                ack_type=0,
                message_id=[{"ledgerId": mid["ledgerId"], "entryId": mid["entryId"]}],
                request_id=7,
            )
        )
        answer = raw.expect(CommandType.ACK_RESPONSE)
        assert answer["request_id"] == 7
        assert answer["error"] == ServerError.AuthorizationError
        assert "approval" in answer["message"]
    assert _backlog(standalone, topic, "work") == [1]
    assert _refusals(standalone, topic)


def test_an_ack_of_a_message_received_goes_through(
    standalone: Standalone, client: pulsar.Client, vault: str
) -> None:
    topic = _topic(vault)
    consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send_async(b"m%d" % i, None)
    producer.flush()
    for message in drain(consumer):
        consumer.acknowledge(message)
    deadline = time.monotonic() + 10
    while _backlog(standalone, topic, "work") != [0] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _backlog(standalone, topic, "work") == [0]
    with standalone.broker() as broker:
        assert broker.workflow.audit_log("admin", topic, kind=REFUSED) == []
    consumer.close()


@pytest.mark.parametrize("kind", ["cumulative", "individual"])
def test_acks_of_batches_received_move_the_cursor_as_on_an_ordinary_namespace(
    standalone: Standalone, client: pulsar.Client, vault: str, kind: str
) -> None:
    """Batches of 10, all received: acknowledging the seventh message of the second batch
    (cumulatively), or every message of the first batch and three of the second, leaves the
    same backlog as on an ordinary namespace (the sizes of the batches acknowledged one by
    one are the ledger's)."""
    left = []
    for namespace in ("public/default", vault):
        topic = _topic(namespace)
        consumer = client.subscribe(topic, "work")
        producer = client.create_producer(
            topic, batching_max_messages=10, batching_max_publish_delay_ms=60_000
        )
        for i in range(30):
            producer.send_async(b"m%d" % i, None)
        producer.flush()
        received = [consumer.receive(5000) for _ in range(30)]
        if kind == "cumulative":
            consumer.acknowledge_cumulative(received[16])
        else:
            for message in received[:10] + received[12:15]:
                consumer.acknowledge(message)
        consumer.close()
        left.append(_backlog(standalone, topic, "work"))
        with standalone.broker() as broker:
            assert broker.workflow.audit_log("admin", topic, kind=REFUSED) == []
    assert left[0] == left[1]
    assert left[1][0] < 30
