"""The one exception hierarchy of cursorops.

Every front door maps each leaf of this tree, in one table per edge: the exit
code (:mod:`core.exit_codes`, checked by ``tests/cli/test_cli.py``), the Airflow
task outcome (``airflow_glue/outcomes.py``, checked by ``tests/dags/test_glue.py``)
and the HTTP status (``cursorops_api/errors.py``, checked by
``tests/plugins/test_errors.py``).

::

    CursorOpsError
    ├── InvalidInputError                 bad request: nothing was changed
    │   ├── InvalidTopicNameError
    │   ├── InvalidMessageIdError
    │   ├── InvalidBatchIndexError
    │   ├── PositionOutOfRangeError       beyond the last entry of the topic
    │   ├── InvalidSkipPayloadError
    │   ├── InvalidSkipPlanError          a plan document malformed, altered, or not of this topic
    │   ├── InvalidPredicateError
    │   └── InvalidArgumentError
    ├── NotFoundError
    │   ├── TenantNotFoundError
    │   ├── NamespaceNotFoundError
    │   ├── TopicNotFoundError
    │   ├── SubscriptionNotFoundError
    │   └── EntryNotFoundError            no such entry in the topic's ledgers
    ├── ConflictError
    │   ├── AlreadyExistsError
    │   ├── UnsupportedSubscriptionTypeError
    │   ├── ConsumerBusyError             Exclusive consumer is already connected
    │   ├── SubscriptionBusyError         unsubscribe while consumers are connected
    │   └── ConcurrentModificationError   optimistic retry exhausted
    ├── NotAuthorizedError
    └── StoreError                        the stores failed, not the request
        ├── MetadataStoreError
        └── LedgerStoreError
"""

from __future__ import annotations


class CursorOpsError(Exception):
    """Base of every error cursorops raises on purpose."""


class InvalidInputError(CursorOpsError):
    """The request is malformed; nothing was changed."""


class InvalidTopicNameError(InvalidInputError):
    pass


class InvalidMessageIdError(InvalidInputError):
    pass


class InvalidBatchIndexError(InvalidInputError):
    pass


class PositionOutOfRangeError(InvalidInputError):
    pass


class InvalidSkipPayloadError(InvalidInputError):
    pass


class InvalidSkipPlanError(InvalidInputError):
    pass


class InvalidPredicateError(InvalidInputError):
    pass


class InvalidArgumentError(InvalidInputError):
    pass


class NotFoundError(CursorOpsError):
    """A named thing does not exist."""


class TenantNotFoundError(NotFoundError):
    pass


class NamespaceNotFoundError(NotFoundError):
    pass


class TopicNotFoundError(NotFoundError):
    pass


class SubscriptionNotFoundError(NotFoundError):
    pass


class EntryNotFoundError(NotFoundError):
    pass


class ConflictError(CursorOpsError):
    """The request is valid but conflicts with the current state."""


class AlreadyExistsError(ConflictError):
    pass


class UnsupportedSubscriptionTypeError(ConflictError):
    pass


class ConsumerBusyError(ConflictError):
    """Another live consumer holds an Exclusive subscription (Pulsar's ConsumerBusyException)."""


class SubscriptionBusyError(ConflictError):
    """Unsubscribe refused: live consumers are connected (Pulsar's PreconditionFailed)."""


class ConcurrentModificationError(ConflictError):
    pass


class NotAuthorizedError(CursorOpsError):
    """The role may not perform this operation."""


class StoreError(CursorOpsError):
    """A store failed; the request itself may be fine."""


class MetadataStoreError(StoreError):
    pass


class LedgerStoreError(StoreError):
    pass


def leaf_classes() -> list[type[CursorOpsError]]:
    """Every concrete error class (the leaves of the tree), for edge mappings."""
    found: list[type[CursorOpsError]] = []
    stack: list[type[CursorOpsError]] = [CursorOpsError]
    while stack:
        cls = stack.pop()
        subs = cls.__subclasses__()
        if not subs:
            found.append(cls)
        stack.extend(subs)
    return sorted(found, key=lambda c: c.__name__)
