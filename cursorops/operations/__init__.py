"""The admin operations, each declared once (:mod:`cursorops.operations.declaration`):
the CLI's commands and the REST app's routes are generated from them."""

from __future__ import annotations

from cursorops.operations.declaration import Operation, registered

GROUPS = (
    "cursorops.operations.namespaces",
    "cursorops.operations.topics",
    "cursorops.operations.cursor_moves",
    "cursorops.operations.backlog_analysis",
    "cursorops.operations.backlog_query",
    "cursorops.operations.audit",
    "cursorops.operations.policies",
    "cursorops.operations.schemas",
    "cursorops.operations.messages",
    "cursorops.operations.brokers",
)
"""The modules that declare operations, in the order the CLI lists them."""

GROUP_HELP = {
    "backlog": "the backlog as a table: SQL over a subscription's unacknowledged messages",
    "schemas": "a topic's schema and its versions (pulsar-admin schemas)",
    "brokers": "the brokers sharing this store (pulsar-admin brokers)",
}
"""The help of a command group only declared operations make."""


def all_operations() -> list[Operation]:
    """Every declared operation (importing the declaring modules imports no core module)."""
    import importlib

    for module in GROUPS:
        importlib.import_module(module)
    return registered()
