"""Alembic's environment for the metadata store: online only, on the caller's connection.

:mod:`cursorops.core.store.migrate` opens the transaction, takes the schema lock and passes
its connection in ``config.attributes["connection"]``; every revision then runs
inside that one transaction (Alembic sees it as the caller's and neither begins
nor commits one).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from cursorops.core.store.tables import Base

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("cursorops.core.store.migrate runs the migrations on its own connection")
# Batch mode: SQLite alters a table by copying it, which a later column change needs.
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
