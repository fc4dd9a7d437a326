"""Reading through ``Broker.reading``: consume, peek, examine, the last position."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import (
    EntryNotFoundError,
    InvalidArgumentError,
    TopicNotFoundError,
)
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker

from .conftest import TOPIC


def test_consume_without_ack_redelivers(broker: Broker, ids: list[MessageId]) -> None:
    first = broker.reading.consume("admin", TOPIC, "s", 3)
    assert [m.payload for m in first] == [b"0", b"1", b"2"]
    again = broker.reading.consume("admin", TOPIC, "s", 3, ack=True)
    assert [m.payload for m in again] == [b"0", b"1", b"2"]
    assert [m.payload for m in broker.reading.consume("admin", TOPIC, "s", 1)] == [b"3"]


def test_consume_dispatches_only_what_it_returns(broker: Broker, ids: list[MessageId]) -> None:
    """A consume call asks for exactly the messages it still wants: nothing is dispatched
    ahead to be handed back at its end, so nothing is read and recorded twice. A consume
    that does not acknowledge hands its messages back as a closing consumer does, with
    their redelivery counts unchanged."""
    first = broker.reading.consume("admin", TOPIC, "s", 4, ack=True)
    assert [m.payload for m in first] == [b"0", b"1", b"2", b"3"]
    rest = broker.reading.consume("admin", TOPIC, "s", 100)
    assert [m.payload for m in rest] == [b"%d" % i for i in range(4, 10)]
    assert [m.redelivery_count for m in rest] == [0] * 6
    again = broker.reading.consume("admin", TOPIC, "s", 6)
    assert [m.redelivery_count for m in again] == [0] * 6


def test_consume_needs_one_message_at_least(broker: Broker, ids: list[MessageId]) -> None:
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        broker.reading.consume("admin", TOPIC, "s", 0)


def test_peek_delivers_nothing(broker: Broker, ids: list[MessageId]) -> None:
    peeked = broker.reading.peek_messages("admin", TOPIC, "s", 4)
    assert [m.message_id for m in peeked] == ids[:4]
    assert broker.reading.peek_messages("admin", TOPIC, "s", 4) == peeked


def test_examine_counts_from_either_end(broker: Broker, ids: list[MessageId]) -> None:
    assert broker.reading.examine_message("admin", TOPIC, "earliest", 1).payload == b"0"
    assert broker.reading.examine_message("admin", TOPIC, "latest", 1).payload == b"9"
    assert broker.reading.examine_message("admin", TOPIC, "latest", 10).payload == b"0"
    with pytest.raises(EntryNotFoundError):
        broker.reading.examine_message("admin", TOPIC, "earliest", 11)


def test_the_last_position_is_the_last_entry(broker: Broker, ids: list[MessageId]) -> None:
    assert broker.reading.last_position("admin", TOPIC) == ids[-1].position


def test_one_partition_is_read_alone(broker: Broker) -> None:
    topic = "persistent://acme/ops/parted"
    broker.admin.create_topic("admin", topic, partitions=2)
    broker.admin.create_subscription("admin", topic, "s", initial_position="earliest")
    with pytest.raises(TopicNotFoundError):
        broker.reading.peek_messages("admin", f"{topic}-partition-2", "s", 1)
    dispatcher = broker.reading.dispatcher("admin", topic, "s", partition=1)
    assert dispatcher is not None
    with pytest.raises(InvalidArgumentError, match="no partition 2"):
        broker.reading.dispatcher("admin", topic, "s", partition=2)
