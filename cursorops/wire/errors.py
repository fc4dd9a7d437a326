"""The binary protocol's edge of the error tree: one ``ServerError`` per
``cursorops.core.errors`` leaf, as the official client reads them.

Families: bad input and conflicts are ``NotAllowedError``, not found ``NotAllowedError``
too (Pulsar answers a missing namespace so), not authorized ``AuthorizationError``, a
store failure ``PersistenceError``. The leaves Pulsar's client treats differently have
their own code: a busy consumer (``ConsumerBusy``, the client retries), an incompatible
schema, an invalid topic name, a missing topic or subscription.
``tests/protocol/test_wire_errors.py`` checks that every leaf has its code.
"""

from __future__ import annotations

from cursorops.core.errors import (
    ConflictError,
    ConsumerBusyError,
    CursorOpsError,
    IncompatibleSchemaError,
    InvalidInputError,
    InvalidTopicNameError,
    NotAuthorizedError,
    NotFoundError,
    OutcomeTable,
    StoreError,
    SubscriptionNotFoundError,
    TopicNotFoundError,
)
from cursorops.wire.commands import ServerError

_TABLE = OutcomeTable(
    families={
        InvalidInputError: ServerError.NotAllowedError,
        NotFoundError: ServerError.NotAllowedError,
        ConflictError: ServerError.NotAllowedError,
        NotAuthorizedError: ServerError.AuthorizationError,
        StoreError: ServerError.PersistenceError,
    },
    overrides={
        ConsumerBusyError: ServerError.ConsumerBusy,
        IncompatibleSchemaError: ServerError.IncompatibleSchema,
        InvalidTopicNameError: ServerError.InvalidTopicName,
        TopicNotFoundError: ServerError.TopicNotFound,
        SubscriptionNotFoundError: ServerError.SubscriptionNotFound,
    },
    default=ServerError.UnknownError,
)

CODES: dict[type[CursorOpsError], ServerError] = _TABLE.leaves()
"""The protocol's error code of every leaf of the error tree."""


def server_error(error: BaseException) -> ServerError:
    """The protocol's error code for ``error`` (``UnknownError`` for what is not ours)."""
    return _TABLE.of(error)
