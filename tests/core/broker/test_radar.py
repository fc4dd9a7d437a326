"""The poison-pill radar through the Broker and the CLI, on a real home: a consumer
negatively acknowledges one message of a batch over and over while acknowledging the rest."""

from __future__ import annotations

import json

import pytest

from cursorops.cli.main import main
from cursorops.core.domain.analysis.poison_radar import RadarLimits
from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import redrive, reset
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage

from ..conftest import Clock
from .conftest import chunk_entries, plain_entry

TOPIC = "persistent://acme/ops/payments"
POISON = b"order 5"
NACKS = 4


@pytest.fixture(params=["sqlite"])
def metadata_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    return f"sqlite:///{tmp_path / 'metadata.db'}"


def poison_pill(broker: Broker) -> None:
    """Ten orders in batches of 4, keyed; order 5 (entry 1, index 1) is negatively
    acknowledged ``NACKS`` times, every other order is acknowledged."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.admin.create_subscription(
        "admin", TOPIC, "idle", SubscriptionType.SHARED, initial_position="earliest"
    )
    orders = [OutgoingMessage(b"order %d" % i, key=f"customer-{i}") for i in range(10)]
    broker.producing.produce("admin", TOPIC, orders, batch_size=4)
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", receiver_queue_size=100
    )
    for _ in range(NACKS):
        for message in consumer.receive_many(100):
            if message.payload == POISON:
                consumer.negative_acknowledge(message)
            else:
                consumer.acknowledge(message)
    consumer.close()


def test_the_radar_lists_exactly_the_poison_pill(
    broker: Broker, clock: Clock, home_config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    poison_pill(broker)
    radars = {r.subscription: r for r in broker.analysis.poison_radar("admin", TOPIC)}
    found = radars["s"].result
    assert (found.stuck, found.redelivered, found.behind_acks) == (1, 1, 0)
    (pill,) = found.listed
    assert (pill.triplet, pill.key, pill.redelivery_count, pill.partition) == (
        f"{pill.ledger_id}:1:1",
        "customer-5",
        NACKS,
        -1,
    )
    assert pill.redelivered and not pill.behind_acks
    # Nobody consumed on "idle": nothing redelivered, nothing acknowledged after anything.
    assert radars["idle"].result.stuck == 0
    # Ten minutes later it is also old and behind the acknowledged orders 6 to 9.
    clock.advance(600_000)
    (later,) = broker.analysis.poison_radar("admin", TOPIC, "s")
    assert later.result.listed[0].behind_acks and later.result.listed[0].age_ms == 600_000
    # Above its count, it is no longer a redelivery finding; off, it is not behind either.
    quiet = broker.analysis.poison_radar("admin", TOPIC, "s", RadarLimits(NACKS + 1, None, 50))
    assert quiet[0].result.stuck == 0

    home = ["--home", str(home_config.home), "--metadata-url", home_config.metadata_url]
    code = main([*home, "-o", "json", "audit", "radar", TOPIC, "-s", "s"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    document = json.loads(printed.out)
    (row,) = document
    assert [f["messageId"] for f in row["listed"]] == [pill.triplet]
    assert row["listed"][0]["redeliveryCount"] == NACKS
    assert row["skipRequest"]["conf"]["message_ids"] == [pill.triplet]
    assert row["skipRequest"]["command"].startswith(f"cursorops topics skip-messages {TOPIC}")


def test_a_chunked_poison_pill_is_one_finding(broker: Broker) -> None:
    """A, in three chunks with x between its first two, is negatively acknowledged
    ``NACKS`` times; x and y after it are acknowledged. A is one stuck message, listed at
    its last chunk, the id a skip takes whole."""
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    stored = broker.producing.append_entries(
        "admin", TOPIC, [a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"y")]
    )
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", receiver_queue_size=100
    )
    for _ in range(NACKS):
        for message in consumer.receive_many(100):
            if message.chunk is not None:
                consumer.negative_acknowledge(message)
            else:
                consumer.acknowledge(message)
    consumer.close()
    # Its chunks were published long ago (at 1 s), before y, acknowledged: behind too.
    (radar,) = broker.analysis.poison_radar("admin", TOPIC, "s")
    assert (radar.result.stuck, radar.result.redelivered, radar.result.behind_acks) == (1, 1, 1)
    (pill,) = radar.result.listed
    assert (pill.triplet, pill.key, pill.redelivery_count) == (
        f"{stored[3][0]}:{stored[3][1]}",
        "big",
        NACKS,
    )
    assert pill.redelivered and pill.behind_acks
    assert radar.lines()[0].startswith(f"{TOPIC} / s: 1 stuck message(s)")
    assert radar.to_json()["skipRequest"]["conf"]["message_ids"] == [pill.triplet]  # type: ignore[index]


def test_the_cli_refuses_bad_limits(
    home_config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--home", str(home_config.home), "audit", "radar", TOPIC, "--max-listed", "5000"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "error: Invalid maxListed 5000: must be from 0 to 1000"
    )


def test_the_seeded_case_lists_every_pill_and_no_healthy_message(
    broker: Broker, clock: Clock
) -> None:
    """A topic of 2 partitions with known pills and known healthy messages, after an
    operator's skip and a redrive: the radar finds exactly the pills.

    ``billing``'s consumer takes the first 24 orders: it negatively acknowledges two pills
    ``NACKS`` times (redelivered) and holds a third without acknowledging it while it
    acknowledges the orders after it (behind a consumer's acknowledgement); it acknowledges
    every other. 16 orders come later, nobody has received them yet, and an operator skips
    the last one of each partition. A redrive of ``billing``'s dead letters publishes two
    messages to the topic, acknowledged on ``audit`` (which no consumer read) and on the
    dead-letter topic's reader. Ten minutes later every message is old: the acknowledgements
    of the skip and the redrive are no evidence, so precision and recall are both 1."""
    dlq = f"{TOPIC}-billing-DLQ"
    broker.admin.create_topic("admin", TOPIC, 2)
    for name in ("billing", "audit"):
        broker.admin.create_subscription(
            "admin", TOPIC, name, SubscriptionType.SHARED, initial_position="earliest"
        )
    broker.admin.create_topic("admin", dlq)
    broker.admin.create_subscription(
        "admin", dlq, "dlq-reader", SubscriptionType.SHARED, initial_position="earliest"
    )
    nacked = {b"order 5", b"order 14"}
    held = b"order 2"
    first = [OutgoingMessage(b"order %d" % i, key=f"customer-{i % 5}") for i in range(24)]
    produced = broker.producing.produce("admin", TOPIC, first, batch_size=4)
    consumer = broker.reading.dispatcher("admin", TOPIC, "billing").subscribe(
        "c", receiver_queue_size=100
    )
    for _ in range(NACKS):
        for message in consumer.receive_many(100):
            if message.payload in nacked:
                consumer.negative_acknowledge(message)
            elif message.payload != held:
                consumer.acknowledge(message)
    consumer.close()
    later = [OutgoingMessage(b"order %d" % i, key=f"customer-{i % 5}") for i in range(24, 40)]
    produced += broker.producing.produce("admin", TOPIC, later)
    last_of_each = {m.partition: m for m in produced[24:]}
    skips.skip_messages(broker.gated, "admin", TOPIC, "billing", list(last_of_each.values()))
    broker.producing.produce(
        "admin", dlq, [OutgoingMessage(b"dead %d" % i, key=f"customer-{i}") for i in range(2)]
    )
    redriven = redrive.apply_redrive(
        broker.gated, "admin", redrive.plan_redrive(broker.gated, "admin", TOPIC, "billing")
    )
    assert len(redriven.published) == 2
    clock.advance(600_000)

    payload_of = {
        (m.partition, m.triplet()): bytes(p.payload)
        for m, p in zip(produced, first + later, strict=True)
    }
    pills = {t for t, p in payload_of.items() if p in nacked | {held}}
    healthy = {t for t, p in payload_of.items() if t not in pills}
    radars = {r.subscription: r for r in broker.analysis.poison_radar("admin", TOPIC)}
    listed = {(m.partition, m.triplet) for m in radars["billing"].result.listed}
    found = listed & pills
    precision = len(found) / len(listed)
    recall = len(found) / len(pills)
    assert (precision, recall) == (1.0, 1.0), (listed - pills, pills - listed)
    assert not listed & healthy
    by_payload = {payload_of[(m.partition, m.triplet)]: m for m in radars["billing"].result.listed}
    assert all(by_payload[p].redelivered for p in nacked)
    assert by_payload[held].behind_acks and not by_payload[held].redelivered
    assert radars["billing"].result.stuck == 3
    # Nobody consumed on "audit": the redrive's acknowledgements there are no evidence.
    assert radars["audit"].result.stuck == 0
    (dead,) = broker.analysis.poison_radar("admin", dlq)
    assert dead.result.stuck == 0


def test_a_reset_leaves_no_consumer_acknowledgement_to_be_behind(
    broker: Broker, clock: Clock
) -> None:
    """The consumers' mark is raised by their acknowledgements alone and cleared by a reset:
    after a reset to the start, every message is unacknowledged again, and none is behind
    until a consumer acknowledges once more."""
    poison_pill(broker)
    clock.advance(600_000)
    assert broker.metadata.consumer_acks(TOPIC, "s") != {}
    assert broker.metadata.consumer_acks(TOPIC, "idle") == {}
    skips.skip_messages(
        broker.gated,
        "admin",
        TOPIC,
        "idle",
        [broker.reading.peek_messages("admin", TOPIC, "idle", 10)[-1].message_id],
    )
    assert broker.metadata.consumer_acks(TOPIC, "idle") == {}
    (before,) = broker.analysis.poison_radar("admin", TOPIC, "s")
    assert before.result.behind_acks == 1
    reset.reset_cursor(broker.gated, "admin", TOPIC, "s", timestamp_ms=0)
    assert broker.metadata.consumer_acks(TOPIC, "s") == {}
    (after,) = broker.analysis.poison_radar("admin", TOPIC, "s")
    assert after.result.behind_acks == 0
    assert len(broker.reading.peek_messages("admin", TOPIC, "s", 100)) == 10


def test_churn_and_delayed_messages_are_no_pills(broker: Broker, clock: Clock) -> None:
    """A seeded subscription on 2 partitions where only three messages are pills.

    Consumers restart four times, each taking every order into its queue and closing
    without acknowledging (churn: no redelivery request), before the work below and after
    it, when later orders nobody processed yet are there. Four delayed messages are due in
    two hours: nobody may receive them, and the orders after them are acknowledged. A
    worker negatively acknowledges three pills ``NACKS`` times and acknowledges every other
    order. Later orders arrive, and an operator skips the last of each partition. Ten
    minutes on, every order is old: the radar lists the three pills and nothing else
    (precision and recall 1.0). Counting churn as redelivery listed the later orders;
    aging the delayed messages from their publish time listed them behind the acknowledged
    orders."""
    broker.admin.create_topic("admin", TOPIC, 2)
    broker.admin.create_subscription(
        "admin", TOPIC, "billing", SubscriptionType.SHARED, initial_position="earliest"
    )
    due = clock() + 2 * 3_600_000
    delayed = [
        OutgoingMessage(b"reminder %d" % i, key=f"customer-{i}", deliver_at=due) for i in range(4)
    ]
    produced = broker.producing.produce("admin", TOPIC, delayed)
    orders = [OutgoingMessage(b"order %d" % i, key=f"customer-{i % 5}") for i in range(30)]
    produced += broker.producing.produce("admin", TOPIC, orders, batch_size=4)
    dispatcher = broker.reading.dispatcher("admin", TOPIC, "billing")

    def restarts() -> None:
        for _ in range(NACKS):
            restarting = dispatcher.subscribe("restarting", receiver_queue_size=100)
            assert len(restarting.receive_many(5)) == 5
            restarting.close()

    restarts()
    nacked = {b"order 3", b"order 11", b"order 22"}
    worker = dispatcher.subscribe("worker", receiver_queue_size=100)
    for _ in range(NACKS):
        for message in worker.receive_many(100):
            if message.payload in nacked:
                worker.negative_acknowledge(message)
            else:
                worker.acknowledge(message)
    worker.close()
    later = [OutgoingMessage(b"order %d" % i, key=f"customer-{i % 5}") for i in range(30, 40)]
    produced += broker.producing.produce("admin", TOPIC, later)
    restarts()
    last_of_each = {m.partition: m for m in produced[-len(later) :]}
    skips.skip_messages(broker.gated, "admin", TOPIC, "billing", list(last_of_each.values()))
    clock.advance(600_000)

    payload_of = {
        (m.partition, m.triplet()): p.payload
        for m, p in zip(produced, delayed + orders + later, strict=True)
    }
    pills = {t for t, p in payload_of.items() if p in nacked}
    (radar,) = broker.analysis.poison_radar("admin", TOPIC, "billing")
    listed = {(m.partition, m.triplet) for m in radar.result.listed}
    found = listed & pills
    precision = len(found) / len(listed) if listed else 0.0
    recall = len(found) / len(pills)
    assert (precision, recall) == (1.0, 1.0), (listed - pills, pills - listed)
    assert radar.result.stuck == 3
    assert {m.redelivery_count for m in radar.result.listed} == {NACKS}
    # What the radar read is what peek-messages shows and a consumer receives.
    peeked = broker.reading.peek_messages("admin", TOPIC, "billing", 100)
    assert {m.payload: m.redelivery_count for m in peeked if m.payload in nacked} == dict.fromkeys(
        nacked, NACKS
    )
    assert {m.redelivery_count for m in peeked if m.payload not in nacked} == {0}
