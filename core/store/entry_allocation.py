"""Entry ids for new segments: the partitions locked, room taken in their current ledgers.

One rule for every append, whoever writes: a producer's append
(:meth:`~cursorops.core.store.ledger_index.LedgerIndex.append_entries_many`, a transaction of
its own) and a redrive's publish
(:meth:`~cursorops.core.store.cursor_door.CursorTransaction.append_entries`,
inside the cursor transaction that moves the cursors too). Plain ``?`` statements
(:mod:`cursorops.core.store.statements`), so either transaction runs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from cursorops.core.domain.errors import InvalidArgumentError, TopicNotFoundError
from cursorops.core.store.checks import canonical_topic, check_int
from cursorops.core.store.statements import Statements
from cursorops.core.store.values import Allocation


@contextmanager
def allocated_entries(
    statements: Statements, requests: Sequence[tuple[str, int]], max_entries_per_ledger: int
) -> Iterator[list[Allocation]]:
    """Reserve entry ids for ``requests`` = ``(topic partition, n_entries)``, each partition
    once, in the caller's transaction: the allocations in the same order, registered (the
    segments inserted, the ledgers' counts bumped) when the block ends normally, committed
    (or not) with the rest of the caller's transaction.

    Each allocation's ``count`` is the room left in the partition's current ledger (a new
    ledger, with a store-wide unique id, is started when it is full or there is none); the
    caller sets ``path`` and ``messages`` inside the block. The partitions' rows are locked
    in name order (no deadlock between two appends) and stay locked until that transaction
    ends. Ledger rows are read when the block starts: a second allocation in one
    transaction (the rest of an append that filled a ledger) sees the counts the first one
    wrote.
    """
    names = [canonical_topic(topic_partition) for topic_partition, _ in requests]
    if len(set(names)) != len(names):
        raise InvalidArgumentError("append_entries_many: a partition is named twice")
    for _, n_entries in requests:
        check_int("number of entries", n_entries, 1)
    check_int("max entries per ledger", max_entries_per_ledger, 1)
    marks = ", ".join("?" * len(names))
    # One statement locks every partition (rows are locked as the sorted scan returns them)
    # and one reads their latest ledgers.
    lock = " FOR UPDATE" if statements.postgres else ""
    locked = {
        str(name)
        for (name,) in statements.rows(
            f"SELECT name FROM topic_partitions WHERE name IN ({marks}) ORDER BY name{lock}",
            tuple(names),
        )
    }
    missing = sorted(set(names) - locked)
    if missing:
        raise TopicNotFoundError(f"Topic partition '{missing[0]}' not found")
    current: dict[str, tuple[int, int, int]] = {}
    for ledger_id, partition, entries, messages in statements.rows(
        "SELECT ledger_id, topic_partition, entries, messages FROM ledgers WHERE ledger_id IN "
        f"(SELECT max(ledger_id) FROM ledgers WHERE topic_partition IN ({marks}) "
        "GROUP BY topic_partition)",
        tuple(names),
    ):
        current[str(partition)] = (int(ledger_id), int(entries), int(messages))
    reserved: list[tuple[tuple[int, int, int], Allocation]] = []
    # New ledgers in request order: the ids come out as from one append after another.
    for name, (_, n_entries) in zip(names, requests, strict=True):
        ledger = current.get(name)
        if ledger is None or ledger[1] >= max_entries_per_ledger:
            (created,) = statements.rows(
                "INSERT INTO ledgers (topic_partition, entries, messages) VALUES (?, 0, 0) "
                "RETURNING ledger_id",
                (name,),
            )
            ledger = (int(created[0]), 0, 0)
        count = min(n_entries, max_entries_per_ledger - ledger[1])
        reserved.append((ledger, Allocation(ledger[0], ledger[1], count)))
    yield [allocation for _, allocation in reserved]
    for _, allocation in reserved:
        if not isinstance(allocation.path, str) or not allocation.path:
            raise InvalidArgumentError("append_entries: the segment path was not set")
        check_int("number of messages", allocation.messages, allocation.count)
    # Two statements for all partitions.
    statements.execute_many(
        "INSERT INTO segments (ledger_id, first_entry, last_entry, messages, path) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (
                ledger_id,
                allocation.first_entry,
                allocation.first_entry + allocation.count - 1,
                allocation.messages,
                allocation.path,
            )
            for (ledger_id, _, _), allocation in reserved
        ],
    )
    statements.execute_many(
        "UPDATE ledgers SET entries = ?, messages = ? WHERE ledger_id = ?",
        [
            (entries + allocation.count, messages + allocation.messages, ledger_id)
            for (ledger_id, entries, messages), allocation in reserved
        ],
    )


__all__ = ["allocated_entries"]
