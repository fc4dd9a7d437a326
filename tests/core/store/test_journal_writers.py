"""Only the cursor-state repository writes the journal tables (``cursors``, ``cursor_deltas``).

Cursor state has one write path: :mod:`core.store.cursor_state` appends a delta
with its version, compacts, creates cursors and takes the locks. It is called in
a transaction that holds the cursor's row lock: the dispatcher's subscription
transaction (consumer acknowledgements) or the metadata store's unit of work
(skip, reset, undo, redrive, clear-backlog; creating and folding cursors). No
other module may write the tables, nor read the journal itself, nor call the
repository's writing methods (docs/architecture.md, "Cursor durability").

Every ``core`` module is read as text: a write is a SQLAlchemy ``insert``,
``update`` or ``delete`` of ``CursorRow``/``CursorDeltaRow``, a new row object of
either class, or SQL text that inserts into, updates or deletes from the tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "core"
JOURNAL_TABLES = ("cursors", "cursor_deltas")
ROWS = r"(?:CursorRow|CursorDeltaRow)"
TABLE = r"(?:cursors|cursor_deltas|\{CursorRow\.__tablename__\}|\{CursorDeltaRow\.__tablename__\})"
WRITES = re.compile(
    rf"\b(?:insert|update|delete)\(\s*{ROWS}\b"
    rf"|\b{ROWS}\("
    rf"|\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+{TABLE}(?![\w])",
)

WRITERS = {"core/store/cursor_door.py"}
"""The one module that writes the journal tables."""

JOURNAL_READS = re.compile(r"\bFROM\s+cursor_deltas\b|\bselect\(\s*CursorDeltaRow\b")
"""Reading the journal's deltas (replay belongs to the repository too)."""

NOT_WRITERS = ("core/store/tables.py", "core/store/migrations/")
"""Where the tables are declared and migrated, not written."""


WRITE_CALLS = re.compile(
    r"\b(?:_?cursors|_?journal)(?:\([^()]*\))?\."
    r"(?:create|append|append_each|append_to|append_by_subscription|compact|fold)\("
)
"""A call of one of :class:`~core.store.cursor_state.CursorStates`' writing methods."""

WRITE_CALLERS = {
    "core/store/cursor_door.py": "the door: consumer acknowledgements, dispatches' folds",
    "core/store/tenancy.py": "a new subscription's cursors, with the subscription",
    "core/broker/reset.py": "reset-cursor, in a unit of work",
    "core/broker/undo.py": "undo of a skip, in a unit of work",
    "core/broker/redrive.py": "redrive, in a unit of work",
}
"""Every module that changes cursor state, and the transaction it does it in."""


def writes_in(text: str) -> list[str]:
    return [match.group(0) for match in WRITES.finditer(text)]


def journal_writers() -> set[str]:
    found = set()
    for path in CORE.rglob("*.py"):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(NOT_WRITERS):
            continue
        if writes_in(path.read_text(encoding="utf-8")):
            found.add(name)
    return found


@pytest.mark.parametrize(
    "source",
    [
        "session.execute(update(CursorRow).values(version=2))",
        "insert(CursorDeltaRow).values(cursor_id=1)",
        "delete(CursorDeltaRow).where(x)",
        "session.add(CursorRow(topic_partition=p))",
        '"UPDATE cursors SET version = version + 1 WHERE id = ?"',
        '"INSERT INTO cursor_deltas (cursor_id, version, payload) VALUES (?, ?, ?)"',
        'f"UPDATE {CursorRow.__tablename__} SET version = version + :n"',
        '"DELETE FROM cursor_deltas WHERE cursor_id = ?"',
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
        "update(SubscriptionRow).values(type='Shared')",
    ],
)
def test_reads_and_other_tables_are_not_writes(source: str) -> None:
    assert writes_in(source) == [], source


def test_only_the_known_modules_write_the_cursor_journal() -> None:
    assert journal_writers() == WRITERS


def test_only_the_repository_reads_the_journal() -> None:
    readers = set()
    for path in CORE.rglob("*.py"):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(NOT_WRITERS):
            continue
        if JOURNAL_READS.search(path.read_text(encoding="utf-8")):
            readers.add(name)
    assert readers == WRITERS


@pytest.mark.parametrize(
    "source",
    [
        "work.cursors.append(cursor_id, [payload])",
        "self._journal.append_by_subscription(1, 's', 't', b'')",
        "self._cursors(session).compact(name, sub, data, 3)",
        "work.cursors.fold(i, s, v, p)",
    ],
)
def test_the_detector_sees_each_writing_call(source: str) -> None:
    assert WRITE_CALLS.search(source), source


def test_only_the_known_transactions_change_cursor_state() -> None:
    callers = set()
    for path in CORE.rglob("*.py"):
        name = path.relative_to(ROOT).as_posix()
        if WRITE_CALLS.search(path.read_text(encoding="utf-8")):
            callers.add(name)
    assert callers == set(WRITE_CALLERS)
