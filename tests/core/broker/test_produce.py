"""Producing through ``Broker.producing``."""

from __future__ import annotations

import pytest

from cursorops.core.domain.errors import NotAuthorizedError
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import OutgoingMessage

from .conftest import TOPIC


def test_messages_are_appended_in_order(broker: Broker, ids: list[MessageId]) -> None:
    more = broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"10")], batch_size=1)
    assert more[0].position > ids[-1].position
    assert broker.analysis.entry_count("admin", TOPIC) == 11


def test_batches_number_their_messages(broker: Broker, ids: list[MessageId]) -> None:
    batch = [OutgoingMessage(b"b%d" % i) for i in range(3)]
    sent = broker.producing.produce("admin", TOPIC, batch, batch_size=3)
    assert [m.batch_index for m in sent] == [0, 1, 2]
    assert len({m.position for m in sent}) == 1


def test_columns_write_what_messages_write(broker: Broker, ids: list[MessageId]) -> None:
    columns = broker.producing.produce_columns("admin", TOPIC, [b"x", b"y"], batch_size=2)
    assert len(columns) == 2
    payloads = [m.payload for m in broker.reading.peek_messages("admin", TOPIC, "s", 12)]
    assert payloads[-2:] == [b"x", b"y"]


def test_producing_needs_produce(broker: Broker, ids: list[MessageId]) -> None:
    broker.admin.grant_permission("admin", "acme/ops", "reader", ["consume"])
    with pytest.raises(NotAuthorizedError):
        broker.producing.produce("reader", TOPIC, [OutgoingMessage(b"no")])
    with pytest.raises(NotAuthorizedError):
        broker.producing.append_entries("reader", TOPIC, [])
    assert broker.analysis.entry_count("admin", TOPIC) == 10


def test_no_entries_append_nothing(broker: Broker, ids: list[MessageId]) -> None:
    assert broker.producing.append_entries("admin", TOPIC, []) == []
    assert broker.analysis.entry_count("admin", TOPIC) == 10
