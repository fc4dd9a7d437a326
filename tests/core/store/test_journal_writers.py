"""Which modules write the cursor journal tables (``cursors``, ``cursor_deltas``): a ratchet.

Cursor state is meant to have one write path: one module that appends a delta
with its version, compacts, and takes the locks. Today three modules write these
tables, in three SQL styles (ORM statements in ``metadata.py``, a hand-built
statement in ``delta_journal.py``, SQL strings in ``dispatch_state.py``). This
test names them, so that no fourth appears unnoticed, and must be edited when one
of them stops writing: the set only shrinks, down to the one repository.

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

WRITERS = {
    "core/store/delta_journal.py",
    "core/store/dispatch_state.py",
    "core/store/metadata.py",
}
"""The modules that write the journal tables today (one, once the repository exists)."""

NOT_WRITERS = ("core/store/tables.py", "core/store/migrations/")
"""Where the tables are declared and migrated, not written."""


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
