"""The domain layer: pure values and rules (ids, acks, analysis, schemas' rules,
plans, errors, ...).

Imports nothing of ``cursorops.core.store`` or ``cursorops.core.services``
(``tests/test_layers.py``)."""
