"""The poison-pill radar through the Broker and the CLI, on a real home: a consumer
negatively acknowledges one message of a batch over and over while acknowledging the rest."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from core.analysis.poison_radar import RadarLimits
from core.broker import Broker
from core.config import Config
from core.producer import OutgoingMessage
from core.subscription import SubscriptionType

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
    broker.create_topic("admin", TOPIC)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    broker.create_subscription(
        "admin", TOPIC, "idle", SubscriptionType.SHARED, initial_position="earliest"
    )
    orders = [OutgoingMessage(b"order %d" % i, key=f"customer-{i}") for i in range(10)]
    broker.produce("admin", TOPIC, orders, batch_size=4)
    consumer = broker.dispatcher("admin", TOPIC, "s").subscribe("c", receiver_queue_size=100)
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
    radars = {r.subscription: r for r in broker.poison_radar("admin", TOPIC)}
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
    (later,) = broker.poison_radar("admin", TOPIC, "s")
    assert later.result.listed[0].behind_acks and later.result.listed[0].age_ms == 600_000
    # Above its count, it is no longer a redelivery finding; off, it is not behind either.
    quiet = broker.poison_radar("admin", TOPIC, "s", RadarLimits(NACKS + 1, None, 50))
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
    broker.create_topic("admin", TOPIC)
    broker.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    a = chunk_entries(b"A" * 30, 3, uuid="big-7")
    stored = broker.append_entries(
        "admin", TOPIC, [a[0], plain_entry(b"x"), a[1], a[2], plain_entry(b"y")]
    )
    consumer = broker.dispatcher("admin", TOPIC, "s").subscribe("c", receiver_queue_size=100)
    for _ in range(NACKS):
        for message in consumer.receive_many(100):
            if message.chunk is not None:
                consumer.negative_acknowledge(message)
            else:
                consumer.acknowledge(message)
    consumer.close()
    # Its chunks were published long ago (at 1 s), before y, acknowledged: behind too.
    (radar,) = broker.poison_radar("admin", TOPIC, "s")
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
        "error: Invalid --max-listed 5000: must be from 0 to 1000"
    )
