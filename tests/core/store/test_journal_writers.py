"""One door for cursor changes: only :mod:`cursorops.core.store.cursor_door` writes cursor state.

Every change of a cursor (a consumer's acknowledgement, individual or cumulative; a
dispatch's fold; a skip, by ids, matching, ``skip -n`` or clear-backlog; a reset or
seek; an undo; a redrive; creating and deleting a subscription) is a
``CursorTransaction`` of that module, as a Pulsar subscription's changes all go through
its ``ManagedCursor`` (docs/architecture.md, "Cursor durability"). No other module may
write the tables ``cursors`` and ``cursor_deltas``, insert or delete a subscription (its
cursors come and go with it), read the journal, or call the door's own repository.

Every ``core`` module is read as text: a write is a SQLAlchemy ``insert``, ``update`` or
``delete`` of the rows' classes, a new row object, or SQL text that inserts into,
updates or deletes from the tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "core"
DOOR = "core/store/cursor_door.py"
ROWS = r"(?:CursorRow|CursorDeltaRow|SubscriptionRow)"
TABLE = (
    r"(?:cursors|cursor_deltas|subscriptions"
    r"|\{(?:CursorRow|CursorDeltaRow|SubscriptionRow)\.__tablename__\})"
)
WRITES = re.compile(
    rf"\b(?:insert|update|delete)\(\s*{ROWS}\b"
    rf"|(?<!class )\b{ROWS}\("
    rf"|\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+{TABLE}(?![\w])",
)
"""A write of cursor state: the journal tables, or a subscription's row (created and deleted
with its cursors). Updating a subscription's type or properties moves no cursor, so only
inserts and deletes of ``subscriptions`` count."""

JOURNAL_READS = re.compile(r"\bFROM\s+cursor_deltas\b|\bselect\(\s*CursorDeltaRow\b")
"""Reading the journal's deltas (replay input belongs to the door too)."""

NOT_WRITERS = ("core/store/tables.py", "core/store/migrations/")
"""Where the tables are declared and migrated, not written."""

REPOSITORY_CALLS = re.compile(
    r"\b_?(?:journal|cursors|Journal)(?:\([^()]*\))?\."
    r"(?:create|append|append_each|append_to|append_by_subscription|compact|fold|read_locked)\("
)
"""A call of one of the door's repository's writing (or locking) methods."""

DOOR_USERS = {
    "core/services/reading/dispatch.py": "consumer acknowledgements, cumulative ones, dispatches",
    "core/services/gating/skip.py": "skips by ids, matching, skip -n and clear-backlog",
    "core/services/gating/reset.py": "reset-cursor and a consumer's seek",
    "core/services/gating/undo_skip.py": "undo of a skip",
    "core/services/gating/redrive.py": "redrive",
    "core/services/gating/unsubscribe.py": "unsubscribe (and the live consumers it refuses on)",
    "core/services/broker/deletion.py": "deleting a topic with its subscriptions and their cursors",
    "core/store/tenancy.py": "creating and deleting a subscription with its cursors",
    "core/store/metadata.py": "the store's own appends and folds, and releasing consumers",
}
"""Every module that opens a transaction of the door, and what it changes there."""

OPENS_THE_DOOR = re.compile(r"\.(?:cursor_transaction|subscription_transaction)\(")


def writes_in(text: str) -> list[str]:
    return [match.group(0) for match in WRITES.finditer(text)]


def core_modules() -> list[tuple[str, str]]:
    found = []
    for path in sorted(CORE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if not name.startswith(NOT_WRITERS):
            found.append((name, path.read_text(encoding="utf-8")))
    return found


@pytest.mark.parametrize(
    "source",
    [
        "session.execute(update(CursorRow).values(version=2))",
        "insert(CursorDeltaRow).values(cursor_id=1)",
        "delete(CursorDeltaRow).where(x)",
        "session.add(CursorRow(topic_partition=p))",
        "session.add(SubscriptionRow(topic=t, name=n))",
        "delete(SubscriptionRow).where(SubscriptionRow.name == n)",
        '"UPDATE cursors SET version = version + 1 WHERE id = ?"',
        '"INSERT INTO cursor_deltas (cursor_id, version, payload) VALUES (?, ?, ?)"',
        'f"UPDATE {CursorRow.__tablename__} SET version = version + :n"',
        '"DELETE FROM cursor_deltas WHERE cursor_id = ?"',
        '"INSERT INTO subscriptions (topic, name) VALUES (?, ?)"',
        '"DELETE FROM subscriptions WHERE id = ?"',
    ],
)
def test_the_detector_sees_each_kind_of_write(source: str) -> None:
    assert writes_in(source), source


@pytest.mark.parametrize(
    "source",
    [
        "select(CursorRow).where(CursorRow.id == 1)",
        '"SELECT version FROM cursors WHERE id = ?"',
        '"UPDATE cursors_archive SET x = 1"',
        "update(TopicRow).values(partitions=2)",
        "class SubscriptionRow(Base):",
        '"SELECT id FROM subscriptions WHERE topic = ?"',
    ],
)
def test_reads_and_other_tables_are_not_writes(source: str) -> None:
    assert writes_in(source) == [], source


def test_only_the_door_writes_cursor_state() -> None:
    writers = {name for name, text in core_modules() if writes_in(text)}
    assert writers == {DOOR}


def test_only_the_door_reads_the_journal() -> None:
    readers = {name for name, text in core_modules() if JOURNAL_READS.search(text)}
    assert readers == {DOOR}


@pytest.mark.parametrize(
    "source",
    [
        "work.cursors.append(cursor_id, [payload])",
        "self._journal.append_by_subscription(1, 's', 't', b'')",
        "self._cursors(session).compact(name, sub, data, 3)",
        "work.cursors.fold(i, s, v, p)",
        "Journal(statements).read_locked(t, s, ps)",
    ],
)
def test_the_detector_sees_each_repository_call(source: str) -> None:
    assert REPOSITORY_CALLS.search(source), source


def test_only_the_door_calls_its_repository() -> None:
    callers = {name for name, text in core_modules() if REPOSITORY_CALLS.search(text)}
    assert callers == {DOOR}


def test_every_cursor_change_opens_the_door_where_listed() -> None:
    """A module that changes cursors does it in a transaction of the door: the list says
    which, so a new one is added knowingly (and the lock rule of docs/decisions/,
    "One door for cursor changes", is its rule too)."""
    users = {
        name
        for name, text in core_modules()
        if OPENS_THE_DOOR.search(text) and name not in {DOOR, "core/store/store_base.py"}
    }
    assert users == set(DOOR_USERS)
