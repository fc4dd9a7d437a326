"""The metadata store's schema history: Alembic's ``env.py`` and one file per revision.

Run by :mod:`cursorops.core.store.migrate` (no ``alembic.ini``). ``versions/v0001_baseline.py``
is the schema as it stood before migrations existed; each later change to
:mod:`cursorops.core.store.tables` is a new file here whose ``down_revision`` is the previous
head, and :data:`cursorops.core.store.schema.HEAD_REVISION` names the new head (a test holds
the two equal, and the migrated schema equal to the tables).
"""
