"""The shared context's partition reads, through ``Broker.context``."""

from __future__ import annotations

from cursorops.core.domain.acks.cursor import AckTarget
from cursorops.core.domain.authz import Operation
from cursorops.core.domain.ids.message_id import MessageId
from cursorops.core.domain.ids.position import EARLIEST
from cursorops.core.services.broker import Broker
from tests.conftest import acknowledge

from .conftest import TOPIC


def test_the_layout_ends_at_the_last_entry(broker: Broker, ids: list[MessageId]) -> None:
    assert broker.context.layout(TOPIC).last_position == ids[-1].position


def test_a_cursor_state_is_the_stored_state(broker: Broker, ids: list[MessageId]) -> None:
    assert broker.context.cursor_state(TOPIC, "s").mark_delete == EARLIEST
    acknowledge(broker, TOPIC, "s", [AckTarget(ids[0].position, -1, 1)])
    assert broker.context.cursor_state(TOPIC, "s").mark_delete == ids[0].position
    assert broker.analysis.cursor_state("admin", TOPIC, "s").mark_delete == ids[0].position


def test_the_entry_index_holds_every_entry(broker: Broker, ids: list[MessageId]) -> None:
    facts = broker.context.entry_arrays(TOPIC)
    assert facts.ledger_ids.tolist() == [m.ledger_id for m in ids]
    assert facts.entry_ids.tolist() == [m.entry_id for m in ids]
    assert facts.layout.last_position == ids[-1].position


def test_partition_topics_parse_each_partition(broker: Broker) -> None:
    broker.admin.create_topic("admin", TOPIC, partitions=3)
    info = broker.access.authorized_topic("admin", Operation.CONSUME, TOPIC)
    names = broker.context.partition_topics(info)
    assert [str(n) for n in names] == info.partition_names()
    assert [n.partition_index for n in names] == [0, 1, 2]
