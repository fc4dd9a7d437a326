"""The one exception hierarchy of cursorops.

Every front door maps each leaf of this tree, in one :class:`OutcomeTable` per
edge that declares only its families and its exceptions: the exit code
(:mod:`cursorops.core.domain.exit_codes`, checked by ``tests/cli/test_cli.py``), the Airflow task
outcome (``cursorops/airflow/outcomes.py``, checked by ``tests/dags/test_glue.py``) and
the HTTP status (``cursorops/rest/errors.py``, checked by ``tests/plugins/test_errors.py``).

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
    │   ├── InvalidQueryError             SQL over the backlog refused, or failed
    │   └── InvalidArgumentError
    ├── NotFoundError
    │   ├── TenantNotFoundError
    │   ├── NamespaceNotFoundError
    │   ├── TopicNotFoundError
    │   ├── SubscriptionNotFoundError
    │   ├── EntryNotFoundError            no such entry in the topic's ledgers
    │   └── SkipNotFoundError             no applied skip of that id on the topic and subscription
    ├── ConflictError
    │   ├── AlreadyExistsError
    │   ├── UnsupportedSubscriptionTypeError
    │   ├── ConsumerBusyError             Exclusive consumer is already connected
    │   ├── SubscriptionBusyError         unsubscribe while consumers are connected
    │   ├── NotEmptyError                 delete a tenant or namespace that still holds some
    │   ├── PlanAlreadyAppliedError       a plan record is applied at most once
    │   ├── SkipAlreadyUndoneError        a skip is undone at most once
    │   └── IncompatibleSchemaError       a schema the topic's compatibility strategy refuses
    ├── NotAuthorizedError
    │   └── ApprovalRequiredError         only an approved workflow applies on this namespace
    └── StoreError                        the stores failed, not the request
        ├── MetadataStoreError
        │   └── SchemaOutOfDateError      a shared store's schema is behind: cursorops db migrate
        ├── LedgerStoreError
        ├── StandaloneError               the home's standalone failed to start, stop or answer
        └── BrokerFencedError             this broker's life was declared dead: it writes no more
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


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


class InvalidQueryError(InvalidInputError):
    """A user's SQL over the backlog relation was refused (not one read-only SELECT, or it
    reaches for files, the network or the configuration) or failed; nothing was written."""


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
    @classmethod
    def of(cls, topic: str, subscription: str) -> SubscriptionNotFoundError:
        """The one wording: which subscription, on which topic or partition."""
        return cls(f"Subscription '{subscription}' not found on topic '{topic}'")


class EntryNotFoundError(NotFoundError):
    pass


class SkipNotFoundError(NotFoundError):
    """No ``skip`` audit record of that id on the topic and subscription named."""


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


class NotEmptyError(ConflictError):
    """A tenant with namespaces or a namespace with topics cannot be deleted (Pulsar's 409)."""


class PlanAlreadyAppliedError(ConflictError):
    """A plan record is applied at most once; this one was applied already."""


class SkipAlreadyUndoneError(ConflictError):
    """A skip is undone at most once; an ``undo-skip`` audit record names this one."""


class IncompatibleSchemaError(ConflictError):
    """The schema is refused by the topic's compatibility strategy, or the topic has no
    schema to check a consumer's against (Pulsar's IncompatibleSchemaException)."""


class NotAuthorizedError(CursorOpsError):
    """The role may not perform this operation."""


class ApprovalRequiredError(NotAuthorizedError):
    """The namespace requires a second person's approval: only an approved workflow applies."""


class CursorMoveRefusedError(ApprovalRequiredError):
    """The cursor door refused a write on a namespace that requires approval; the door has
    logged and audited the refusal (``refused-cursor-move``), so a caller need not."""


class StoreError(CursorOpsError):
    """A store failed; the request itself may be fine."""


class MetadataStoreError(StoreError):
    pass


class SchemaOutOfDateError(MetadataStoreError):
    """A shared (PostgreSQL) metadata store's schema is older than this code; nothing ran.

    ``cursorops db migrate`` brings it up to date; only an embedded SQLite store
    migrates itself when opened.
    """


class LedgerStoreError(StoreError):
    pass


class StandaloneError(StoreError):
    """The standalone serving a home (``cursorops standalone``) failed to start, to stop
    or to answer, or its socket folder is not this user's only."""


class BrokerFencedError(StoreError):
    """The cluster declared this broker's life dead (its heartbeat stopped, or a later
    life took its place): the write was refused, and the broker must serve no more as
    that life (:mod:`cursorops.core.store.broker_registry`)."""


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


@dataclass(frozen=True)
class OutcomeTable(Generic[T]):
    """How one edge (exit code, Airflow outcome, HTTP status) answers each error.

    An error's outcome is that of the nearest class along its MRO that ``overrides``
    or ``families`` names, else ``default``. ``overrides`` holds the few classes
    that differ from their family.
    """

    families: Mapping[type[CursorOpsError], T]
    default: T
    overrides: Mapping[type[CursorOpsError], T] = field(default_factory=dict)

    def leaves(self) -> dict[type[CursorOpsError], T]:
        """The outcome of every leaf of the tree; a leaf under no mapped class is left out,
        so each edge's every-leaf-mapped test names it."""
        table: dict[type[CursorOpsError], T] = {}
        for leaf in leaf_classes():
            mapped = self._mapped(leaf)
            if mapped is not None:
                table[leaf] = mapped[0]
        return table

    def of(self, error: BaseException) -> T:
        """The outcome of ``error``: its class's, else its nearest mapped ancestor's."""
        mapped = self._mapped(type(error))
        return self.default if mapped is None else mapped[0]

    def _mapped(self, cls: type[BaseException]) -> tuple[T] | None:
        # A 1-tuple, so that a falsy outcome (exit code 0) is still a hit.
        for ancestor in cls.__mro__:
            if ancestor in self.overrides:
                return (self.overrides[ancestor],)
            if ancestor in self.families:
                return (self.families[ancestor],)
        return None
