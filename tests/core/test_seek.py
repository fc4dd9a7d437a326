"""A consumer's seek: a reset-cursor of one partition that clamps ids, keeps a batch id's
ack set, and is gated on an approval namespace unless the subscription is a reader's."""

from __future__ import annotations

import pytest

from cursorops.core.domain.acks.cursor_targets import seek_target
from cursorops.core.domain.acks.ledger_layout import LedgerLayout
from cursorops.core.domain.errors import ApprovalRequiredError
from cursorops.core.domain.ids.position import EARLIEST, Position
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import reset
from cursorops.core.services.producer import OutgoingMessage

TOPIC = "persistent://acme/ops/seek"


def _topic(broker: Broker, topic: str = TOPIC, batch_size: int = 1) -> list[Position]:
    broker.admin.create_topic("admin", topic, partitions=0)
    broker.admin.create_subscription(
        "admin", topic, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce(
        "admin", topic, [OutgoingMessage(b"%d" % i) for i in range(6)], batch_size=batch_size
    )
    return list(dict.fromkeys(Position(m.ledger_id, m.entry_id) for m in ids))


def test_a_seek_target_is_the_first_entry_at_or_after_the_id() -> None:
    layout = LedgerLayout.of([(3, 2), (5, 0), (7, 4)])
    assert seek_target(Position(3, 1), layout) == Position(3, 1)
    assert seek_target(Position(3, 2), layout) == Position(7, 0)
    assert seek_target(Position(4, 0), layout) == Position(7, 0)
    assert seek_target(EARLIEST, layout) == Position(3, 0)
    assert seek_target(Position(2**63 - 1, 2**63 - 1), layout) == Position(7, 4)
    assert seek_target(Position(2**63 - 1, 2**63 - 1), LedgerLayout.empty()) == EARLIEST


def test_a_seek_past_the_end_leaves_nothing_to_read(broker: Broker) -> None:
    entries = _topic(broker)
    mark = reset.seek(broker.gated, "admin", TOPIC, "s", position=Position(2**63 - 1, 2**63 - 1))
    assert mark == entries[-1]
    assert broker.reading.consume("admin", TOPIC, "s", 10) == []
    assert reset.seek(broker.gated, "admin", TOPIC, "s", position=EARLIEST) == EARLIEST
    assert len(broker.reading.consume("admin", TOPIC, "s", 10)) == 6


def test_a_batch_id_with_an_ack_set_keeps_the_indexes_before_it(broker: Broker) -> None:
    entry = _topic(broker, batch_size=6)[0]
    reset.seek(broker.gated, "admin", TOPIC, "s", position=entry, ack_bits=0b110000)
    state = broker.analysis.cursor_state("admin", TOPIC, "s")
    assert [i for i in range(6) if state.is_acked(entry, i)] == [0, 1, 2, 3]
    assert [m.payload for m in broker.reading.consume("admin", TOPIC, "s", 10)] == [b"4", b"5"]


def test_a_durable_seek_is_gated_and_a_readers_is_not(broker: Broker) -> None:
    entries = _topic(broker)
    broker.admin.set_namespace_policy("admin", "acme/ops", skip_requires_approval=True)
    reset.seek(broker.gated, "admin", TOPIC, "s", position=entries[4], non_durable=True)
    before = broker.analysis.cursor_state("admin", TOPIC, "s")
    with pytest.raises(ApprovalRequiredError, match="cursorops_reset_cursor"):
        reset.seek(broker.gated, "admin", TOPIC, "s", position=EARLIEST)
    assert broker.analysis.cursor_state("admin", TOPIC, "s") == before
    assert [m.payload for m in broker.reading.consume("admin", TOPIC, "s", 10)] == [b"4", b"5"]
