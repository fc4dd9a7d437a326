"""A gated operation, and the values a request of one takes and gives.

Every irreversible operation on a subscription (a skip by ids, by matching or of
the head, clear-backlog, reset-cursor, unsubscribe, undo of a skip, redrive) is a
:class:`GatedOperation`: it declares its name, the operation its plan records store,
its plan class and its arguments, the workflow that gates it, how many messages a
plan acts on and which topics it gates, and how it plans, applies at once and
applies an approved record. :mod:`cursorops.core.services.gating.registry` lists them;
:meth:`~cursorops.core.services.broker.Broker.request` is their one
door.

A door asks with a :class:`Caller` and the operation's arguments (a frozen
dataclass, checked when made: a bad one raises InvalidArgumentError before
anything is read). The answer is :class:`Applied` (a namespace without approval:
applied at once, with its audit record) or :class:`Pending` (the plan stored once as
a plan record, bound to a :class:`Run` that a :class:`RunStarter` of the door
started with the record's digest).

The behaviour of an operation reaches the stores only through the Broker's
collaborators (:class:`GatingServices`), which the Broker hands in: this package
imports no store and no collaborator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.plans.plan_record import (
    REDRIVE,
    RESET_CURSOR,
    SKIP,
    UNDO_SKIP,
    UNSUBSCRIBE,
)
from cursorops.core.domain.portable_plan import PortablePlan, PreviewedPlan
from cursorops.core.services.gating.inert import MAX_CHARS

if TYPE_CHECKING:
    from cursorops.core.domain.plans.plan_record import PlanRecord
    from cursorops.core.domain.plans.preview import Preview
    from cursorops.core.services.broker.access import Access
    from cursorops.core.services.broker.analysis import Analysis
    from cursorops.core.services.broker.context import BrokerContext
    from cursorops.core.store.ledger import LedgerStore
    from cursorops.core.store.metadata import MetadataStore
    from cursorops.core.store.values import TopicInfo


RUN_DIGEST = "plan_digest"
"""The one item of the conf a pending request's run is started with: its record's digest."""


REASON_CHARS = MAX_CHARS
"""The longest reason, in characters: what the approver's Markdown shows of it whole."""
TICKET_CHARS = 256
"""The longest change ticket, in characters."""


def _at_most(text: str, limit: int, what: str) -> None:
    """Counted in characters, as the person typed them, whatever a door carried them in
    (an RFC 8187 header spends up to 12 characters on one)."""
    if len(text) > limit:
        raise InvalidArgumentError(f"{what} is {len(text):,} characters; at most {limit:,}")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"Invalid {what}: must be a non-empty text")
    return value


@dataclass(frozen=True)
class Caller:
    """Who asks: the person (``requester``, recorded on a plan record and never its
    approver), the Pulsar role they act as, and the door they ask through (``rest``,
    ``cursorops.cli``, ``ui``, ``airflow``), which the audit record names."""

    role: str
    requester: str
    via: str = "broker"

    def __post_init__(self) -> None:
        _text(self.role, "caller: role")
        _text(self.requester, "caller: requester")
        _text(self.via, "caller: via")


@dataclass(frozen=True, kw_only=True)
class GatedArguments:
    """What every gated request names: the topic and the subscription, why (``reason``,
    required where approval is), and a change ticket. Each operation's arguments add
    theirs; every field is checked when the arguments are made."""

    topic: str
    subscription: str
    reason: str = ""
    ticket: str | None = None

    def __post_init__(self) -> None:
        _text(self.topic, "topic")
        _text(self.subscription, "subscription")
        if not isinstance(self.reason, str):
            raise InvalidArgumentError("Invalid reason: must be a text")
        if self.ticket is not None and not isinstance(self.ticket, str):
            raise InvalidArgumentError("Invalid ticket: must be a text")
        object.__setattr__(self, "reason", self.reason.strip())
        object.__setattr__(self, "ticket", (self.ticket or "").strip() or None)
        _at_most(self.reason, REASON_CHARS, "reason")
        _at_most(self.ticket or "", TICKET_CHARS, "ticket")


P = TypeVar("P", bound=PortablePlan)
V = TypeVar("V", bound=PreviewedPlan)
A = TypeVar("A", bound=GatedArguments)
K = TypeVar("K")


@dataclass(frozen=True)
class Planned(Generic[P]):
    """A plan and its preview document (what the approver reads besides the plan)."""

    plan: P
    document: Mapping[str, Any]


@dataclass(frozen=True)
class Applied:
    """What an apply did: the operation as the audit log names it (``skip`` for every
    skip), how many messages it changed, and its own JSON outcome."""

    operation: str
    changed: int | None
    """Ids acknowledged (skip: an id of a whole batch counts once), messages
    un-acknowledged (undo-skip), published (redrive), moved either way (reset-cursor, as
    planned) or dropped (unsubscribe); None where the apply does not count them (an
    unsubscribe at once)."""
    unchanged: int | None
    """Ids or messages of the plan left as they were (acknowledged meanwhile, gone, ...)."""
    outcome: Mapping[str, Any]
    result: object = field(default=None, compare=False)
    """The collaborator's own outcome object (a SkipOutcome, ...), for a door that renders
    more than the JSON; None where there is none."""


@dataclass(frozen=True)
class Run:
    """A workflow run a plan record is bound to: the DAG, the run, where a person sees it."""

    dag_id: str
    run_id: str
    url: str | None = None

    def __post_init__(self) -> None:
        _text(self.dag_id, "run: dag id")
        _text(self.run_id, "run: run id")


class RunStarter(Protocol):
    """What a door hands in to start the run of a pending request (Airflow, for the doors
    that run in or next to it). ``run`` is chosen by core before the record is stored, so
    the record is bound to it; the run's conf carries only ``digest``, and it is started
    as ``requester``, whose permission to start it the workflow system checks."""

    def authorize(self, workflow: str, requester: str) -> None:
        """Refuse (NotAuthorizedError) unless ``requester`` may start a run of ``workflow``,
        where the workflow system can tell without starting one (a StoreError when it
        cannot be asked). Called before anything is planned or stored."""
        ...

    def start(self, run: Run, digest: str, requester: str) -> Run:
        """Start ``run``; the run as started (with its URL, when there is one)."""
        ...


@dataclass(frozen=True)
class Pending:
    """A request that waits for approval: its plan record, stored once and recorded as
    planned, and the run that gates and applies it."""

    record: PlanRecord
    run: Run


@dataclass(frozen=True)
class Approval:
    """An approved plan record as it is applied: who approved it, through which door.

    Its :meth:`detail` goes into the apply's audit record, and the apply claims the
    record (applied at most once) in the same transaction."""

    record: PlanRecord
    approvers: tuple[str, ...]
    via: str = "airflow"

    @property
    def role(self) -> str:
        """The requester's Pulsar role: what the apply acts as."""
        return self.record.binding.role

    @property
    def digest(self) -> str:
        return self.record.digest

    def detail(self) -> dict[str, object]:
        """What an approved apply adds to its audit record (and to the record's claim)."""
        return {
            "runId": self.record.binding.run_id,
            "planDigest": self.record.digest,
            "approvedBy": list(self.approvers),
        }

    def claim(self, audit_id: int, **counts: object) -> dict[str, object]:
        """What the claim of the record says it did: the audit record's id and counts."""
        return {**self.detail(), "auditId": audit_id, **counts}


class GatingServices(Protocol):
    """What an operation plans and applies through, handed in by the Broker: the shared
    context (configuration, clock, stores, authorization), the collaborators more
    than one operation reads through, and a place for what an operation keeps across
    requests (:meth:`per_broker`)."""

    @property
    def context(self) -> BrokerContext: ...
    @property
    def access(self) -> Access: ...
    @property
    def metadata(self) -> MetadataStore: ...
    @property
    def ledgers(self) -> LedgerStore: ...
    @property
    def clock(self) -> Callable[[], int]: ...
    @property
    def analysis(self) -> Analysis: ...
    def per_broker(self, name: str, make: Callable[[], K]) -> K:
        """The Broker's one ``name`` (made by ``make`` on first use): what an operation
        keeps across its requests, such as the skips' queue of writes."""
        ...


@dataclass(frozen=True)
class GatedOperation(ABC, Generic[P, A]):
    """One gated operation: what it is, and how it plans and applies."""

    name: str
    """What a door asks for: ``skip-messages``, ``reset-cursor``, ..."""
    recorded_as: str
    """The operation its plan records and audit records store (``skip`` for every kind of
    skip): the key an approved record is applied by."""
    plan_type: type[P]
    arguments: type[A]
    workflow: str
    """The id of the workflow (DAG) that gates it."""
    step: str
    """Its workflow's step names: ``approve_<step>`` (the gates), ``apply_<step>``."""
    title: str
    """Its workflow's title, as a person reads it."""

    def messages(self, plan: P) -> int:
        """How many messages ``plan`` acts on: what the approval quorum counts."""
        return plan.messages

    def topics(self, plan: P) -> tuple[str, ...]:
        """The topics whose cursors ``plan`` moves: each namespace's policy counts (the
        strictest wins), an approver must be permitted on each, and the request is
        recorded on each."""
        return (plan.topic,)

    def check(self, arguments: object) -> A:
        """``arguments``, refused unless they are this operation's."""
        if not isinstance(arguments, self.arguments):
            raise InvalidArgumentError(
                f"Invalid arguments for {self.name}: expected {self.arguments.__name__}, "
                f"got {type(arguments).__name__}"
            )
        return arguments

    def plan_of(self, record: PlanRecord) -> P:
        """The plan stored in ``record`` (an apply's one reading of it): of this operation's
        class, its content hash checked, and the one the record names."""
        plan = self.plan_type.from_json(record.plan_json)
        if plan.plan_id != record.plan_id:
            raise InvalidArgumentError(
                f"Plan record {record.digest} does not match its content: refused"
            )
        return plan

    @abstractmethod
    def preview(self, record: PlanRecord, content: bool = True) -> Preview:
        """What the approver reads of ``record``
        (:class:`~cursorops.core.domain.plans.preview.Preview`),
        from the stored record only: its plan and its preview document. ``content``: with
        message content (keys, properties, payloads, a predicate's content conditions);
        otherwise masked to sizes and counts (:func:`cursorops.core.domain.content.masked`)."""

    @abstractmethod
    def targets(self, services: GatingServices, role: str, arguments: A) -> Sequence[TopicInfo]:
        """The topics a request moves cursors on, authorized for ``role``: whether any of
        their namespaces requires approval decides between applying and planning."""

    @abstractmethod
    def plan(self, services: GatingServices, caller: Caller, arguments: A) -> Planned[P]:
        """The plan and its preview document; nothing changed."""

    @abstractmethod
    def apply_now(self, services: GatingServices, caller: Caller, arguments: A) -> Applied:
        """Apply at once with its audit record, as the operation's direct door does (refused
        where approval is required)."""

    @abstractmethod
    def apply_approved(self, services: GatingServices, plan: P, approval: Approval) -> Applied:
        """Apply the approved ``plan`` of ``approval``'s record: validated once, decided under the
        cursors' locks, with its audit record and the record's claim in one transaction."""


class PreviewedOperation(GatedOperation[V, A]):
    """An operation whose plan previews itself (reset, undo, redrive, unsubscribe): its
    request plans through :meth:`plan_for`, and the preview document is who asked, why, and
    the plan's own ``preview()``. Applied at once, it is planned and then applied as an
    approved plan is, by :meth:`apply_plan`."""

    @abstractmethod
    def plan_for(self, services: GatingServices, role: str, arguments: A) -> V:
        """The plan of ``arguments`` for ``role``; nothing changed."""

    @abstractmethod
    def apply_plan(
        self, services: GatingServices, role: str, plan: V, via: str, approval: Approval | None
    ) -> Applied:
        """Apply ``plan`` as ``role`` with its audit record (``via`` names the door): at once
        (``approval`` None, refused where approval is required), or as the approved plan of
        ``approval``'s record, with the record's claim in the same transaction."""

    def plan(self, services: GatingServices, caller: Caller, arguments: A) -> Planned[V]:
        plan = self.plan_for(services, caller.role, arguments)
        return Planned(plan, gated_document(caller, arguments, plan.preview()))

    def apply_now(self, services: GatingServices, caller: Caller, arguments: A) -> Applied:
        plan = self.plan_for(services, caller.role, arguments)
        return self.apply_plan(services, caller.role, plan, caller.via, None)

    def apply_approved(self, services: GatingServices, plan: V, approval: Approval) -> Applied:
        return self.apply_plan(services, approval.role, plan, approval.via, approval)


def gated_document(
    caller: Caller, arguments: GatedArguments, preview: Mapping[str, Any]
) -> dict[str, Any]:
    """The preview document of an operation that previews its plan itself: who asked, why,
    and the plan's own ``preview()`` (built from the stores, not from the request)."""
    return {
        "requester": caller.requester,
        "role": caller.role,
        "reason": arguments.reason,
        "ticket": arguments.ticket,
        "preview": dict(preview),
    }


__all__ = [
    "REDRIVE",
    "RESET_CURSOR",
    "RUN_DIGEST",
    "SKIP",
    "UNDO_SKIP",
    "UNSUBSCRIBE",
    "Applied",
    "Approval",
    "Caller",
    "GatedArguments",
    "GatedOperation",
    "GatingServices",
    "Pending",
    "Planned",
    "PreviewedOperation",
    "Run",
    "RunStarter",
    "gated_document",
]
