"""Matching positions against a set of positions, in bulk (numpy): its own module, so that
naming a position (:mod:`cursorops.core.domain.ids.position`) imports no numpy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cursorops.core.domain.acks.range_set import ENTRY_ID_LIMIT


def match_positions(
    ledger_ids: npt.ArrayLike,
    entry_ids: npt.ArrayLike,
    set_ledger_ids: npt.ArrayLike,
    set_entry_ids: npt.ArrayLike,
) -> npt.NDArray[np.int64]:
    """For each position ``(ledger_ids[i], entry_ids[i])``, the index of an equal one in the set.

    -1 where the set has no equal position. Positions need not be sorted and
    may repeat on the left; on the right, a repeated position answers with one
    of its indexes. Any int64 values are accepted, on either side.

    Positions are never packed as ``(ledger << 32) + entry``: that sends an
    entry id of ``2**32`` or a negative one onto a real entry of a neighbouring
    ledger, and overflows for large ledger ids. Each ledger id is replaced by
    its rank among the ledger ids of both sides (fewer than ``2**31`` of them),
    so ``rank * 2**32 + entry`` is collision-free for entries in
    ``[0, 2**32)``; a position with an entry outside that range matches
    nothing. Cost: O((n + m) log(n + m)).
    """
    ledgers = np.asarray(ledger_ids, dtype=np.int64)
    entries = np.asarray(entry_ids, dtype=np.int64)
    set_ledgers = np.asarray(set_ledger_ids, dtype=np.int64)
    set_entries = np.asarray(set_entry_ids, dtype=np.int64)
    out = np.full(ledgers.shape, -1, dtype=np.int64)
    if ledgers.size == 0 or set_ledgers.size == 0:
        return out
    ranks = np.unique(np.concatenate((ledgers, set_ledgers)))
    keys = _ranked_keys(ranks, ledgers, entries, invalid=-1)
    set_keys = _ranked_keys(ranks, set_ledgers, set_entries, invalid=-2)
    order = np.argsort(set_keys, kind="stable")
    sorted_keys = set_keys[order]
    at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    found = (sorted_keys[at] == keys) & (keys >= 0)
    out[found] = order[at[found]]
    return out


def _ranked_keys(
    ranks: npt.NDArray[np.int64],
    ledgers: npt.NDArray[np.int64],
    entries: npt.NDArray[np.int64],
    invalid: int,
) -> npt.NDArray[np.int64]:
    """``rank(ledger) * 2**32 + entry``; ``invalid`` (negative) where the entry is out of range."""
    in_range = (entries >= 0) & (entries < ENTRY_ID_LIMIT)
    rank = np.searchsorted(ranks, ledgers).astype(np.int64)
    return np.where(in_range, rank * ENTRY_ID_LIMIT + np.where(in_range, entries, 0), invalid)
