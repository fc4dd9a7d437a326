"""The binary protocol's edge of the error tree: one ``ServerError`` per
``cursorops.core.domain.errors`` leaf, as the official client reads them.

Families: bad input and conflicts are ``NotAllowedError``, not found ``NotAllowedError``
too, not authorized ``AuthorizationError``, a store failure ``PersistenceError``. The
leaves Pulsar's client treats differently have their own code: a busy consumer
(``ConsumerBusy``, the client retries), an incompatible schema, an invalid topic name, a
missing topic or subscription. A missing tenant or namespace is ``TopicNotFound``, as
Pulsar's clients expect of a producer or consumer on one; it reaches the wire only where
the caller may learn what exists (authentication off, or a superuser): any other role is
refused first (:meth:`cursorops.core.services.broker.access.Access.check`), so it reads
``AuthorizationError`` (docs/decisions/2026-12-07-wire-errors-a-client-can-act-on.md).
``tests/protocol/test_wire_errors.py`` checks that every leaf has its code.
"""

from __future__ import annotations

from cursorops.core.domain.errors import (
    ConflictError,
    ConsumerBusyError,
    CursorOpsError,
    IncompatibleSchemaError,
    InvalidInputError,
    InvalidTopicNameError,
    NamespaceNotFoundError,
    NotAuthorizedError,
    NotFoundError,
    OutcomeTable,
    StoreError,
    SubscriptionNotFoundError,
    TenantNotFoundError,
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
        TenantNotFoundError: ServerError.TopicNotFound,
        NamespaceNotFoundError: ServerError.TopicNotFound,
        SubscriptionNotFoundError: ServerError.SubscriptionNotFound,
    },
    default=ServerError.UnknownError,
)

CODES: dict[type[CursorOpsError], ServerError] = _TABLE.leaves()
"""The protocol's error code of every leaf of the error tree."""


def server_error(error: BaseException) -> ServerError:
    """The protocol's error code for ``error`` (``UnknownError`` for what is not ours)."""
    return _TABLE.of(error)
