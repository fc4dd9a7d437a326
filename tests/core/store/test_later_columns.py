"""Columns added to the ledger after the first segments: older segments read them as null."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow.parquet as pq

from cursorops.core.domain.config import Config
from cursorops.core.domain.subscription import SubscriptionType
from cursorops.core.services.broker import Broker
from cursorops.core.services.producer import Entry, OutgoingMessage
from cursorops.core.store.ledger import LATER_COLUMNS

TOPIC = "persistent://public/default/t"


def test_a_segment_written_before_the_later_columns_reads_them_as_absent(
    tmp_path: Path,
) -> None:
    with Broker(Config.from_home(tmp_path)) as broker:
        broker.admin.create_tenant("admin", "public")
        broker.admin.create_namespace("admin", "public/default")
        broker.admin.create_topic("admin", TOPIC)
        old = Entry.of_messages(
            [OutgoingMessage(b"old", sequence_id=0)], False, "p", 1, [5], [b"k"]
        )
        broker.producing.append_entries("admin", TOPIC, [old])
        (path,) = glob.glob(str(tmp_path / "**" / "*.parquet"), recursive=True)
        # The segment as it was written before the columns existed.
        table = pq.read_table(path)
        table = table.drop_columns([c for c in LATER_COLUMNS if c in table.column_names])
        stat = os.stat(path)
        pq.write_table(table, path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        new = Entry.of_messages(
            [OutgoingMessage(b"new", sequence_id=1)], False, "p", 2, [7], [b"o"]
        )
        broker.producing.append_entries("admin", TOPIC, [new])
        broker.admin.create_subscription(
            "admin", TOPIC, "s", SubscriptionType.SHARED, initial_position="earliest"
        )
        peeked = broker.reading.peek_messages("admin", TOPIC, "s", 10)
        assert [(m.payload, m.event_time, m.ordering_key) for m in peeked] == [
            (b"old", None, None),
            (b"new", 7, b"o"),
        ]
        table = broker.ledgers.read_table(TOPIC, ["payload", "event_time", "ordering_key"])
        assert table.to_pylist() == [
            {"payload": b"old", "event_time": None, "ordering_key": None},
            {"payload": b"new", "event_time": 7, "ordering_key": b"o"},
        ]
        consumer = broker.reading.dispatcher("admin", TOPIC, "s").subscribe("c")
        received = consumer.receive_many(10)
        assert [(m.event_time, m.ordering_key) for m in received] == [(None, None), (7, b"o")]
