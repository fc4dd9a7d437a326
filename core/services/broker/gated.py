"""The one door of every gated operation: a request, and the apply of an approved record.

A door asks with :meth:`GatedOperations.request`: the operation (by its name in
:mod:`cursorops.core.services.gating.registry`), who asks and the operation's arguments. Whether
approval is needed is decided once, from the namespace policies of the topics the request would
move cursors on (authorized first): without, it is applied at once with its audit
record (:class:`~cursorops.core.services.gating.operation.Applied`); with, it is planned once and
stored as a plan record bound to a new run, recorded as planned, and the run is started by the
door's :class:`~cursorops.core.services.gating.operation.RunStarter`
(:class:`~cursorops.core.services.gating.operation.Pending`).

An approved record comes back through :meth:`GatedOperations.apply_approved_plan`: the
registry's entry for the operation the record stores (which its digest covers, so
nothing a requester wrote chooses it) applies it, committing the change, its audit
record and the record's claim (applied at most once) in one transaction.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from cursorops.core.domain.errors import InvalidArgumentError, PlanAlreadyAppliedError
from cursorops.core.domain.plans.plan_record import PlanBinding, PlanRecord
from cursorops.core.services.broker.analysis import Analysis
from cursorops.core.services.broker.context import BrokerContext, Collaborator
from cursorops.core.services.broker.workflow import Workflow
from cursorops.core.services.gating.operation import (
    Applied,
    Approval,
    Caller,
    GatedArguments,
    GatedOperation,
    Pending,
    Planned,
    Run,
    RunStarter,
)
from cursorops.core.services.gating.registry import named, recorded, verified_plan

K = TypeVar("K")


def new_run_id(at_ms: int) -> str:
    """A run id for a request's run, chosen before its plan record binds it: the time it was
    asked and a random part (two requests in one millisecond get two runs)."""
    at = datetime.fromtimestamp(at_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"request__{at}_{secrets.token_hex(4)}"


@dataclass(frozen=True)
class PlannedRequest:
    """What a request would do, planned as :meth:`GatedOperations.request` plans it and
    stored nowhere: the plan, its preview document, and whether it waits for an approval
    (else applying it is at once)."""

    planned: Planned[Any]
    approval_required: bool


def _require_reason(entry: GatedOperation[Any, Any], arguments: GatedArguments) -> None:
    if not arguments.reason:
        raise InvalidArgumentError(
            f"A reason is required: {entry.name} on {arguments.topic} waits for a second "
            "person's approval, who reads it; nothing requested"
        )


class GatedOperations(Collaborator):
    """Requests of gated operations, and the apply of their approved plan records."""

    def __init__(
        self,
        context: BrokerContext,
        analysis: Analysis,
        workflow: Workflow,
    ) -> None:
        super().__init__(context)
        self.analysis = analysis
        self._kept: dict[str, object] = {}
        self._kept_lock = threading.Lock()
        self.workflow = workflow

    def per_broker(self, name: str, make: Callable[[], K]) -> K:
        """The one ``name`` of this Broker, made by ``make`` on first use (under a lock:
        two threads asking at once get the same one)."""
        with self._kept_lock:
            if name not in self._kept:
                self._kept[name] = make()
            return cast(K, self._kept[name])

    def request(
        self, operation: str, caller: Caller, arguments: GatedArguments, runs: RunStarter
    ) -> Applied | Pending:
        """Ask for ``operation`` (``skip-messages``, ``reset-cursor``, ...) as ``caller``.

        Where no namespace of the request's topics requires approval, it is applied at
        once with its audit record (:class:`Applied`). Where one does, it is planned once
        and stored as a plan record bound to a new run of the operation's workflow,
        recorded as planned on each topic, and ``runs`` starts that run with the record's
        digest as the requester (:class:`Pending`); nothing else is changed. A reason is
        required there, and ``runs`` is asked whether the requester may start the workflow
        before anything is planned. A run that does not start closes the request (a
        ``not-started`` closing record) and raises what the start raised. Bad arguments
        are refused before anything is read or stored.
        """
        entry = named(operation)
        checked = entry.check(arguments)
        targets = entry.targets(self, caller.role, checked)
        if not any(info.approval_required for info in targets):
            return entry.apply_now(self, caller, checked)
        _require_reason(entry, checked)
        # Whether the requester may start the workflow at all: asked before anything is
        # planned or stored, so a refusal leaves nothing behind.
        runs.authorize(entry.workflow, caller.requester)
        run = Run(entry.workflow, new_run_id(self.clock()))
        record = self._plan_and_store(entry, caller, checked, run)
        try:
            started = runs.start(run, record.digest, caller.requester)
        except Exception as exc:
            # Stored and recorded as planned, never started: closed, so it does not stay
            # listed as waiting, and a run that starts after all refuses it.
            self.workflow.close_unstarted(record, str(exc) or type(exc).__name__)
            raise
        return Pending(record, started)

    def preview_request(
        self, operation: str, caller: Caller, arguments: GatedArguments
    ) -> PlannedRequest:
        """Plan ``operation`` as :meth:`request` would, as ``caller``, and change nothing:
        no plan record, no run, no audit record. Authorized and checked as the request is;
        the reason is not required (a preview is what a person reads before giving one).
        Applying may still differ: the request plans again from the cursor as it is then."""
        entry = named(operation)
        checked = entry.check(arguments)
        targets = entry.targets(self, caller.role, checked)
        planned = entry.plan(self, caller, checked)
        return PlannedRequest(planned, any(info.approval_required for info in targets))

    def plan_request(
        self, operation: str, caller: Caller, arguments: GatedArguments, run: Run
    ) -> PlanRecord:
        """Plan ``operation`` once and store it as the plan record of ``run`` (a run that is
        already going: a workflow that plans in its own first step), recorded as planned;
        nothing else is changed."""
        entry = named(operation)
        checked = entry.check(arguments)
        _require_reason(entry, checked)
        return self._plan_and_store(entry, caller, checked, run)

    def _plan_and_store(
        self,
        entry: GatedOperation[Any, Any],
        caller: Caller,
        arguments: GatedArguments,
        run: Run,
    ) -> PlanRecord:
        planned = entry.plan(self, caller, arguments)
        binding = PlanBinding(
            run.dag_id, run.run_id, caller.requester, caller.role, entry.recorded_as
        )
        return self.workflow.save_plan_record(binding, planned.plan, planned.document)

    def apply_approved_plan(
        self,
        record: PlanRecord,
        approvals: Sequence[Mapping[str, object]],
        *,
        via: str = "airflow",
    ) -> Applied:
        """Apply ``record`` (its approvals checked by the caller: who, when, for this digest)
        as its requester's role, by the operation it stores."""
        plan = verified_plan(record)
        if record.applied_at_ms is not None:
            raise PlanAlreadyAppliedError(
                f"Plan {record.digest} was applied already (a plan is applied at most once)"
            )
        approval = Approval(record, tuple(str(a.get("approver")) for a in approvals), via)
        return recorded(record.operation).apply_approved(self, plan, approval)


__all__ = ["GatedOperations", "PlannedRequest", "new_run_id"]
