"""Appending in a cursor transaction (a redrive publishes in the one that moves the cursors):
the segments become readable with its commit and never without it, across ledgers that
fill up inside the one transaction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cursorops.core.domain.config import Config
from cursorops.core.domain.ids.position import Position
from cursorops.core.domain.ids.topic_name import TopicName
from cursorops.core.store.ledger import LedgerStore
from cursorops.core.store.metadata import AuditEntry, MetadataStore

TOPIC = "persistent://acme/ops/orders"


def columns(payloads: list[bytes]) -> dict[str, pa.Array]:
    n = len(payloads)
    return {
        "batch_index": pa.array([-1] * n, pa.int32()),
        "batch_size": pa.array([0] * n, pa.int32()),
        "publish_time": pa.array([1] * n, pa.int64()),
        "deliver_at": pa.nulls(n, pa.int64()),
        "key": pa.nulls(n, pa.string()),
        "properties": pa.array([[]] * n, pa.map_(pa.string(), pa.string())),
        "payload": pa.array(payloads, pa.binary()),
        "producer_name": pa.array(["p"] * n, pa.string()),
        "sequence_id": pa.array(range(n), pa.int64()),
    }


@pytest.fixture
def stores(tmp_path: Path, metadata_url: str) -> tuple[MetadataStore, LedgerStore]:
    config = Config.from_home(tmp_path, metadata_url=metadata_url, max_entries_per_ledger=3)
    metadata = MetadataStore(metadata_url)
    metadata.create_tenant("acme")
    metadata.create_namespace("acme/ops")
    metadata.create_topic(TOPIC, 0)
    return metadata, LedgerStore.from_config(config, metadata)


def test_an_append_in_a_cursor_transaction_commits_with_it(
    stores: tuple[MetadataStore, LedgerStore],
) -> None:
    metadata, ledgers = stores
    name = TopicName.parse(TOPIC)
    payloads = [b"%d" % i for i in range(7)]
    with metadata.cursor_transaction() as work:
        (positions,) = ledgers.append_columns_many(
            [(name, np.ones(7, np.int64), columns(payloads))], work=work
        )
        # Three ledgers filled in one transaction, each allocation seeing the last one's.
        assert [p.entry_id for p in positions] == [0, 1, 2, 0, 1, 2, 0]
        assert len({p.ledger_id for p in positions}) == 3
        assert metadata.segments(TOPIC) == []
        work.record_audit(AuditEntry("test", TOPIC, None, "admin", {}, 1))
    assert ledgers.read_table(name).column("payload").to_pylist() == payloads
    assert [(i.entries, i.messages) for i in metadata.ledgers(TOPIC)] == [(3, 3), (3, 3), (1, 1)]
    metadata.close()


def test_an_append_in_a_cursor_transaction_that_fails_stays_invisible(
    stores: tuple[MetadataStore, LedgerStore],
) -> None:
    metadata, ledgers = stores
    name = TopicName.parse(TOPIC)
    with pytest.raises(RuntimeError), metadata.cursor_transaction() as work:
        ledgers.append_columns_many(
            [(name, np.ones(2, np.int64), columns([b"a", b"b"]))], work=work
        )
        raise RuntimeError("the caller's next step failed")
    assert metadata.segments(TOPIC) == [] and metadata.ledgers(TOPIC) == []
    assert ledgers.read_table(name).num_rows == 0
    # The next append takes the same place (a file of its own).
    positions = ledgers.append_columns(name, np.ones(1, np.int64), columns([b"c"]))
    assert positions[0].entry_id == 0 and isinstance(positions[0], Position)
    assert ledgers.read_table(name).column("payload").to_pylist() == [b"c"]
    metadata.close()
