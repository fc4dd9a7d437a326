"""A dispatch's read of a cursor and a compaction from elsewhere: no acknowledgement lost.

A dispatcher that has no state of a cursor yet reads its stored row, its
snapshot, then the deltas after that snapshot, in three statements of its
transaction. A compaction (another process folding the journal into a new
snapshot and deleting the deltas it covers) that commits between the snapshot
read and the deltas read would leave the reader the old snapshot without the
deleted deltas: acknowledged messages delivered again, and a compaction from
that state would make the loss permanent. The cursor row stays locked against
compaction for the reader's transaction; here a compaction is started in
exactly that window, from another thread with its own connection.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from cursorops.core.domain.acks import cursor_codec
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.gating import skip as skips
from cursorops.core.services.producer import OutgoingMessage
from cursorops.core.store.cursor_state import replay
from cursorops.core.store.dispatch_state import SubscriptionTransaction

TOPIC = "persistent://acme/ops/compaction-race"


def test_a_compaction_cannot_commit_inside_a_dispatchs_read_of_the_cursor(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.admin.create_topic("admin", TOPIC)
    broker.admin.create_subscription(
        "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
    )
    ids = broker.producing.produce("admin", TOPIC, [OutgoingMessage(b"%d" % i) for i in range(40)])
    acked = ids[:30]
    for chunk in range(0, len(acked), 3):
        skips.skip_messages(broker.gated, "admin", TOPIC, "s", acked[chunk : chunk + 3])
    record = broker.metadata.load_cursor(TOPIC, "s")
    assert len(record.deltas) == 10
    layout = broker.context.layout(TOPIC)
    snapshot = cursor_codec.encode(replay(record, layout))

    compaction: list[threading.Thread] = []
    rows = SubscriptionTransaction._driver_rows

    def rows_then_compact(
        txn: SubscriptionTransaction, sql: str, parameters: tuple[object, ...]
    ) -> Sequence[Sequence[Any]]:
        found = rows(txn, sql, parameters)
        if sql.startswith("SELECT snapshot FROM cursors") and not compaction:
            # Between the snapshot read and the deltas read: fold every delta into a new
            # snapshot and delete them, from another connection.
            worker = threading.Thread(
                target=broker.metadata.compact_cursor,
                args=(TOPIC, "s", snapshot, record.version),
                daemon=True,
            )
            compaction.append(worker)
            worker.start()
            worker.join(timeout=3)
        return found

    monkeypatch.setattr(SubscriptionTransaction, "_driver_rows", rows_then_compact)
    consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe(
        "c", receiver_queue_size=100
    )
    delivered = consumer.receive_many(100)
    monkeypatch.undo()
    assert compaction, "the dispatch read no snapshot"
    compaction[0].join(timeout=60)
    assert not compaction[0].is_alive()
    # Only what nobody acknowledged, and the compaction did happen (after the dispatch).
    assert [m.message_id for m in delivered] == list(ids[30:])
    assert broker.metadata.load_cursor(TOPIC, "s").deltas == []
    assert broker.analysis.topic_stats("admin", TOPIC).subscriptions["s"].msg_backlog == 10
