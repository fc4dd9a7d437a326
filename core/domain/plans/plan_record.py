"""A plan record: the server-side, immutable plan a gated operation previews and applies.

The planning step of a workflow writes one into the metadata store; the
approval gate renders what the approver reads from it, and apply loads it by
the run it is bound to, never from anything a requester can write (a run's
conf, an XCom, a reason). A record is:

- **bound**: to the workflow run (``dag_id``, ``run_id``), the requester and the
  Pulsar role they act as, the operation and its target (topic, subscription);
- **immutable and content-addressed**: its :attr:`PlanRecord.digest` is the
  SHA-256 of everything in it (the plan's own content hash, the preview
  document, the binding, the time), so two plannings never share a digest and a
  record cannot change without changing its digest;
- **applied at most once**: the store marks it applied in the very transaction
  that acknowledges its messages (:class:`PlanClaim`).

A run's *current* plan is the newest record bound to it: a cleared planning
task writes a new record, and an approval of the earlier one no longer applies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cursorops.core.domain.acks.skip_plan import SkipPlan
from cursorops.core.domain.errors import InvalidArgumentError
from cursorops.core.domain.portable_plan import PortablePlan, canonical_json

__all__ = [
    "MAX_APPROVALS",
    "RECORDED_OPERATIONS",
    "REDRIVE",
    "RESET_CURSOR",
    "SKIP",
    "UNDO_SKIP",
    "UNSUBSCRIBE",
    "ApprovalPolicy",
    "ApprovalRequest",
    "PlanBinding",
    "PlanRecord",
]

SKIP = "skip"
"""What a plan record and an audit record of any kind of skip store as their operation."""
RESET_CURSOR = "reset-cursor"
UNSUBSCRIBE = "unsubscribe"
UNDO_SKIP = "undo-skip"
REDRIVE = "redrive"
RECORDED_OPERATIONS = frozenset({SKIP, RESET_CURSOR, UNSUBSCRIBE, UNDO_SKIP, REDRIVE})
"""Every operation a plan record may store; each is applied by the gated operation
:func:`cursorops.core.services.gating.registry.recorded` names (a test holds the two equal)."""

MAX_APPROVALS = 3
"""The most distinct approvers a plan may need (the workflows have that many gates)."""


@dataclass(frozen=True)
class PlanBinding:
    """What a plan is bound to: a workflow run, who asked, and as which role."""

    dag_id: str
    run_id: str
    requester: str
    role: str
    operation: str = SKIP

    def __post_init__(self) -> None:
        for name in ("dag_id", "run_id", "requester", "role"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgumentError(f"Invalid plan binding: {name} must be a non-empty text")
        if self.operation not in RECORDED_OPERATIONS:
            raise InvalidArgumentError(
                f"Invalid plan binding: operation {self.operation!r}; known: "
                f"{', '.join(sorted(RECORDED_OPERATIONS))}"
            )


@dataclass(frozen=True)
class PlanRecord:
    """One stored plan. Build new ones with :meth:`create`; the store gives them back."""

    binding: PlanBinding
    topic: str
    subscription: str
    created_at_ms: int
    plan_json: str
    """The plan as its ``dumps`` wrote it (of its operation's plan class,
    :mod:`cursorops.core.services.gating.registry`)."""
    plan_id: str
    """The plan's own content hash
    (:attr:`~cursorops.core.domain.portable_plan.PortablePlan.plan_id`)."""
    document: Mapping[str, Any]
    """What the preview shows besides the plan: reason, ticket, predicate, backlog, messages."""
    messages: int
    required_approvals: int
    digest: str
    applied_at_ms: int | None = None
    applied: Mapping[str, Any] | None = field(default=None)
    """What the apply that consumed the record did: approvers, counts, the audit record."""

    @classmethod
    def create(
        cls,
        binding: PlanBinding,
        plan: PortablePlan,
        document: Mapping[str, Any],
        *,
        required_approvals: int,
        created_at_ms: int,
    ) -> PlanRecord:
        """A new record of ``plan``, its digest computed here (never taken from anyone).

        ``plan`` must be of the binding's operation's plan class, which only the gated
        operations know: :func:`cursorops.core.services.gating.registry.new_record` checks it
        and calls this."""
        if isinstance(required_approvals, bool) or not 1 <= required_approvals <= MAX_APPROVALS:
            raise InvalidArgumentError(
                f"Invalid number of approvals {required_approvals!r}: expected 1 to {MAX_APPROVALS}"
            )
        try:
            spelled = canonical_json(dict(document))
            # What the digest is taken over, and what a store keeps: UTF-8, which a lone
            # surrogate (a JSON escape such as "\ud800" decodes to one) is not.
            spelled.encode("utf-8")
            document = json.loads(spelled)
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                "Invalid plan document: text that is not Unicode (a lone surrogate, "
                f"{exc.object[exc.start : exc.end]!r})"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"Invalid plan document: not JSON: {exc}") from exc
        fields: dict[str, Any] = {
            "binding": binding,
            "topic": plan.topic,
            "subscription": plan.subscription,
            "created_at_ms": created_at_ms,
            "plan_json": plan.dumps(),
            "plan_id": plan.plan_id,
            "document": document,
            "messages": plan.messages,
            "required_approvals": required_approvals,
        }
        return cls(**fields, digest=_digest(**fields))

    def verified(self) -> PlanRecord:
        """This record, after checking that its digest matches its content (the digest covers
        the plan text's SHA-256, so the plan text is the one that was recorded). Decoding the
        plan by its operation's class is the gated operation's:
        :func:`cursorops.core.services.gating.registry.verified_plan`."""
        expected = _digest(
            binding=self.binding,
            topic=self.topic,
            subscription=self.subscription,
            created_at_ms=self.created_at_ms,
            plan_json=self.plan_json,
            plan_id=self.plan_id,
            document=self.document,
            messages=self.messages,
            required_approvals=self.required_approvals,
        )
        if expected != self.digest:
            raise InvalidArgumentError(
                f"Plan record {self.digest} does not match its content: refused"
            )
        return self

    def skip_plan(self) -> SkipPlan:
        """The stored plan of a skip record; refused for another operation's record."""
        if self.operation != SKIP:
            raise InvalidArgumentError(
                f"Plan record {self.digest} is a {self.operation} plan, not a skip plan"
            )
        return SkipPlan.from_json(self.plan_json)

    @property
    def operation(self) -> str:
        return self.binding.operation


def _digest(
    *,
    binding: PlanBinding,
    topic: str,
    subscription: str,
    created_at_ms: int,
    plan_json: str,
    plan_id: str,
    document: Mapping[str, Any],
    messages: int,
    required_approvals: int,
) -> str:
    body = {
        "operation": binding.operation,
        "dagId": binding.dag_id,
        "runId": binding.run_id,
        "requester": binding.requester,
        "role": binding.role,
        "topic": topic,
        "subscription": subscription,
        "createdAt": created_at_ms,
        "planId": plan_id,
        "planSha256": hashlib.sha256(plan_json.encode("utf-8")).hexdigest(),
        "document": document,
        "messages": messages,
        "requiredApprovals": required_approvals,
    }
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApprovalRequest:
    """What one approval gate showed, recorded by the gate itself before it waited.

    A gate presents once per run: a cleared or retried gate finds its presentation
    and refuses, so Airflow's approval record of a gate (created by that one try)
    holds exactly this text. An answer counts only as an answer to a presentation
    (:class:`ApprovalAnswer`), which names the plan digest it showed.
    """

    digest: str
    dag_id: str
    run_id: str
    gate: str
    body_sha256: str
    approvers: tuple[str, ...]
    presented_at_ms: int
    valid_for_ms: int
    """How long an approval given to this presentation stays valid."""
    subject: str = ""
    body: str = ""
    """The text itself, as the approver read it."""
    try_number: int | None = None
    """The gate's try that showed it (None: recorded before tries were recorded)."""


@dataclass(frozen=True)
class ApprovalAnswer:
    """The answer to one presentation, recorded by the gate as Airflow resumed it.

    Airflow resumes a waiting gate only with the answer an assigned user wrote
    through its API (or with a timeout), so a gate forced to a state by hand
    records none. ``responded_by`` is Airflow's user id (None: nobody, a default).
    """

    request: ApprovalRequest
    chosen: tuple[str, ...]
    responded_by: str | None
    responded_at_ms: int


@dataclass(frozen=True)
class ApprovalPolicy:
    """A namespace's approval policy: whether irreversible operations wait for approvals,
    and how many distinct approvers a large plan needs."""

    required: bool = False
    large_above_messages: int | None = None
    """Plans of more messages than this need :attr:`large_approvals`; None: never."""
    large_approvals: int = 2

    def approvals_for(self, messages: int) -> int:
        if self.large_above_messages is not None and messages > self.large_above_messages:
            return self.large_approvals
        return 1
