"""The compacted view held equal to a plain model: replay the messages into a dict."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from cursorops.core.domain.analysis.compaction import compacted_away
from cursorops.core.domain.ids.position import Position


def _table(rows: list[tuple[int, int, int, int, str | None, bool, bytes]]) -> pa.Table:
    names = ["ledger_id", "entry_id", "batch_index", "batch_size", "key", "null_value", "payload"]
    columns = list(zip(*rows, strict=True)) if rows else [[]] * len(names)
    types = [pa.int64(), pa.int64(), pa.int32(), pa.int32(), pa.string(), pa.bool_(), pa.binary()]
    return pa.table([pa.array(c, t) for c, t in zip(columns, types, strict=True)], names=names)


@pytest.mark.parametrize("seed", range(30))
def test_compacted_away_is_everything_but_the_latest_live_message_per_key(seed: int) -> None:
    rng = random.Random(seed)
    rows = []
    for entry in range(rng.randint(0, 40)):
        size = rng.choice([0, 0, 3])
        for index in range(size) if size else [-1]:
            key = rng.choice([None, "a", "b", "c", "d"])
            null = rng.random() < 0.15
            payload = b"" if rng.random() < 0.1 else b"x"
            rows.append((7, entry, index, size, key, null, payload))
    horizon = Position(7, rng.randint(-1, 40))
    latest: dict[str, int] = {}
    for number, (_, entry, _, _, key, null, payload) in enumerate(rows):
        if entry > horizon.entry_id or key is None:
            continue
        if null or not payload:
            latest.pop(key, None)
        else:
            latest[key] = number
    expected = {
        (row[1], row[2])
        for number, row in enumerate(rows)
        if row[1] <= horizon.entry_id and number not in latest.values()
    }
    away = compacted_away(_table(rows), horizon)
    assert set(zip(away.entry_id.tolist(), away.batch_index.tolist(), strict=True)) == expected
    assert len(away) == len(expected)
