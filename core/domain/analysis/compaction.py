"""Topic compaction as a view: the latest message of each key, up to a horizon.

As Pulsar's compactor: reading a partition from its start through the horizon
(inclusive), each key keeps only its latest message; a message with a null
value (``null_value``) or an empty payload deletes its key, and a message
without a key is not kept (``topicCompactionRetainNullKey`` false, Pulsar's
default). Every message of a batch counts on its own. What the view does not
keep is *compacted away*: a reader of the compacted topic never receives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cursorops.core.domain.ids.position import Position

Ints = npt.NDArray[np.int64]

COLUMNS = ("ledger_id", "entry_id", "batch_index", "batch_size", "key", "null_value", "payload")
"""The ledger columns the pass reads."""


@dataclass(frozen=True)
class CompactedAway:
    """Messages of one partition the compacted view drops, as aligned arrays."""

    ledger_id: Ints
    entry_id: Ints
    batch_index: Ints
    batch_size: Ints

    def __len__(self) -> int:
        return len(self.ledger_id)


def compacted_away(table: pa.Table, horizon: Position) -> CompactedAway:
    """The rows of ``table`` (sorted by position, :data:`COLUMNS`) at or before ``horizon``
    that the compacted view does not keep. One pass; cost linear in the rows."""
    ledger = table.column("ledger_id").to_numpy().astype(np.int64)
    entry = table.column("entry_id").to_numpy().astype(np.int64)
    inside = (ledger < horizon.ledger_id) | (
        (ledger == horizon.ledger_id) & (entry <= horizon.entry_id)
    )
    # Imported here: pyarrow.compute is slow to import, and every command imports this
    # module through the Broker (tests/cli/test_import_budget.py).
    import pyarrow.compute as pc

    keys = table.column("key").to_pylist()
    null = pc.fill_null(table.column("null_value"), False).to_numpy(zero_copy_only=False)
    empty = (pc.binary_length(table.column("payload")).to_numpy() == 0) | null
    latest: dict[str, int] = {}
    for row in np.flatnonzero(inside).tolist():
        key = keys[row]
        if key is None:
            continue
        if empty[row]:
            latest.pop(key, None)
        else:
            latest[key] = row
    keep = np.zeros(len(ledger), dtype=np.bool_)
    keep[list(latest.values())] = True
    away = inside & ~keep
    return CompactedAway(
        ledger[away],
        entry[away],
        table.column("batch_index").to_numpy().astype(np.int64)[away],
        table.column("batch_size").to_numpy().astype(np.int64)[away],
    )
