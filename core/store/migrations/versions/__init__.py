"""One module per revision of the metadata store's schema (Alembic skips this file)."""
