"""The approval gates: unmapped ``ApprovalOperator``s before every apply task, one per approver.

A gate renders its text from the run's plan record in the metadata store (message
content masked, whatever the operation: every reader of the DAG may open it): the
one the run's ``plan_digest`` names, which the first gate refuses unless it is
bound to this very run and its requester (:func:`cursorops.airflow.steps.run_plan_record`),
never from an XCom, which any Airflow user with edit rights may overwrite; and
records what it showed (:class:`cursorops.core.domain.plans.plan_record.ApprovalRequest`:
the plan's digest and the SHA-256 of the text, the approvers, the validity,
its try) before it waits. When Airflow resumes it with the answer
(``execute_complete``), it records that answer next to what it showed
(:class:`cursorops.core.domain.plans.plan_record.ApprovalAnswer`) before it returns, so that
apply can tell exactly which plan an answer approved without asking Airflow.

Airflow resumes a waiting gate with the answer only when an assigned user
writes it through Airflow's API (``PATCH …/hitlDetails``; anyone else gets
403), or with a timeout from the scheduler. Nobody can post that event
through the API, and a gate marked success, failed or skipped by hand never
resumes: it records no answer, and apply never counts it.

At run time the gate assigns the approval to the permitted approvers: the
Airflow users (:meth:`cursorops.airflow.hooks.CursorOpsHook.approver_candidates`) whose
Pulsar role holds the skip permission on the topic, minus the requester
(``dag_run.triggering_user_name``) and minus whoever answered an earlier gate of
the run (from the store). An empty list would let anyone with edit rights
answer, so the gate fails instead.

A gate shows its request once per run. A later try of it (Airflow 3.3 keeps a
cleared gate's first text) never asks again: it takes the answer given to what it
showed (recorded here, or held by Airflow for the task and never resumed with, read on
the triggerer by :class:`~cursorops.airflow.triggers.held_answer.HeldAnswerTrigger`:
Airflow 3.3.2 can fail a gate resumed while the workload that parked it is still being
reported), unless the request was closed; with no such answer, it refuses. Either
refusal is audited (``<operation>-refused``, stage ``gate``), so the closing record says
why. A new request is a new run.

Quorum: a plan record says how many approvals it needs (the namespace's
policy by the plan's size). Gate *k* skips itself when the plan needs fewer
than *k*, as the run's plan record in the store says (found by the run's digest,
as the first gate finds it), never an XCom; apply counts the approvals itself
from the store, so a gate skipped or marked by hand never counts.

A Reject fails the gate (``fail_on_reject``), so the apply task ends
``upstream_failed``; so does a timeout (default 24 hours), since the gate has
no default answer. Neither is retried: the gate retries only to get back to an answer
Airflow accepted (:data:`RESUME_RETRIES`).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.standard.operators.hitl import ApprovalOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from cursorops.core.domain.plans.plan_record import ApprovalAnswer, ApprovalRequest, PlanRecord
    from cursorops.core.services.broker import Broker

DEFAULT_RESPONSE_TIMEOUT = timedelta(hours=24)
TIMEOUT_PARAM = "approval_timeout_minutes"
"""The run's param that shortens or lengthens the wait (minutes); absent = the default."""
VALIDITY_PARAM = "approval_valid_minutes"
"""How long an approval stays valid for apply (minutes); absent = the gate's timeout."""
MAX_VALIDITY = timedelta(days=7)
MINUTE_ENV = "CURSOROPS_APPROVAL_MINUTE_S"
"""Seconds in a minute of the two params above: 60 unless the deployment's environment
says otherwise (from 1 to 60), so that its tests see a gate time out or an approval
expire in seconds. Only whoever starts Airflow sets it: no run param or request can, so
no requester shortens anyone's approval window."""


def approval_minute() -> timedelta:
    """What one minute of :data:`TIMEOUT_PARAM` and :data:`VALIDITY_PARAM` lasts here."""
    from airflow.sdk.exceptions import AirflowFailException

    raw = os.environ.get(MINUTE_ENV, "").strip()
    if not raw:
        return timedelta(minutes=1)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 1 <= seconds <= 60:
        raise AirflowFailException(f"{MINUTE_ENV} must be 1 to 60 seconds, not {raw!r}")
    return timedelta(seconds=seconds)


def gate_params() -> dict[str, Any]:
    """The run params every gated workflow declares for its gates (not part of the request)."""
    from airflow.sdk import Param

    return {
        TIMEOUT_PARAM: Param(
            24 * 60,
            type="integer",
            minimum=1,
            description="Minutes to wait for an approval; no answer by then is a rejection",
        ),
        VALIDITY_PARAM: Param(
            None,
            type=["null", "integer"],
            minimum=1,
            maximum=int(MAX_VALIDITY.total_seconds() // 60),
            description="Minutes an approval stays valid for apply (default: the wait above)",
        ),
    }


GATE_PARAMS = frozenset({TIMEOUT_PARAM, VALIDITY_PARAM})
RESUME_RETRIES = 2
RESUME_RETRY_DELAY = timedelta(seconds=2)
"""How a gate that Airflow failed after accepting its answer gets back to that answer."""


def may_skip(broker: Broker, role: str, topic: str) -> bool:
    """Whether ``role`` holds the skip permission on ``topic`` (the Broker decides)."""
    from cursorops.core.domain.authz import Operation
    from cursorops.core.domain.errors import NotAuthorizedError

    try:
        broker.access.authorized_topic(role, Operation.SKIP, topic)
    except NotAuthorizedError:
        return False
    return True


def permitted_approvers(
    broker: Broker,
    topics: Iterable[str],
    requester: str | None,
    candidates: Iterable[str],
    excluded: Iterable[str] = (),
) -> list[str]:
    """Candidates, minus the requester and ``excluded``, whose Pulsar role may skip on
    every one of ``topics`` (a plan's topics: a redrive's dead-letter topic too)."""
    from cursorops.airflow.environment import pulsar_role

    out = set(excluded) | {requester}
    wanted = tuple(topics)
    return [
        user
        for user in sorted(set(candidates))
        if user not in out and all(may_skip(broker, pulsar_role(user), t) for t in wanted)
    ]


def shown_by(broker: Broker, dag_id: str, run_id: str, gate: str) -> ApprovalRequest | None:
    """What ``gate`` of the run showed, if a try of it showed anything."""
    shown = [r for r in broker.workflow.approval_requests(dag_id, run_id) if r.gate == gate]
    return shown[-1] if shown else None


def answered_event(chosen: Sequence[str], by: str | None, at_ms: int) -> dict[str, Any]:
    """An answer as the event Airflow resumes a gate with."""
    return {
        "chosen_options": list(chosen),
        "params_input": {},
        "responded_at": datetime.fromtimestamp(at_ms / 1000, UTC),
        "responded_by_user": None if by is None else {"id": by, "name": by},
        "timedout": False,
    }


def record_gate_refusal(
    broker: Broker, context: Context, record: PlanRecord, gate: str, why: str
) -> None:
    """Record that ``gate`` refused (to ask again, or an Approve that cannot apply) as
    ``<operation>-refused``, stage ``gate``, so the closing record says why nothing was
    applied."""
    from cursorops.airflow.hooks.cursorops import CursorOpsHook
    from cursorops.airflow.steps import refused_kind

    dag_run = context["dag_run"]
    broker.workflow.record_audit(
        CursorOpsHook().requester_role(context),
        refused_kind(record.operation),
        record.topic,
        record.subscription,
        {
            "runId": dag_run.run_id,
            "planDigest": record.digest,
            "stage": "gate",
            "gate": gate,
            "try": context["ti"].try_number,
            "reason": why,
        },
    )


def body_sha256(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def earlier_answers(
    broker: Broker, dag_id: str, run_id: str, gates: Sequence[str]
) -> list[ApprovalAnswer]:
    """The answers ``gates`` of the run recorded, in the gates' order."""
    from cursorops.airflow.approval import by_gate

    answers = by_gate(broker.workflow.approval_answers(dag_id, run_id))
    return [answers[g] for g in gates if g in answers]


def earlier_approvers(broker: Broker, dag_id: str, run_id: str, gates: Sequence[str]) -> list[str]:
    """Who answered ``gates`` of the run (as those gates recorded it), so a later gate can
    leave them out."""
    answers = earlier_answers(broker, dag_id, run_id, gates)
    return [str(a.responded_by) for a in answers if a.responded_by]


def stale_gate(
    broker: Broker,
    context: Context,
    record: PlanRecord,
    gates: Sequence[str],
    shown: str | None = None,
) -> str | None:
    """Why the run's gate can no longer lead to an apply, with what to do, or None
    (:func:`cursorops.core.services.gating.staleness.stale_reason`, from the store and the run's
    newest record)."""
    from cursorops.airflow.hooks.cursorops import CursorOpsHook
    from cursorops.core.services.broker import wall_clock_ms
    from cursorops.core.services.gating.staleness import STALE_ADVICE, stale_reason

    dag_run = context["dag_run"]
    role = CursorOpsHook().requester_role(context)
    current = broker.workflow.current_plan_record(role, dag_run.dag_id, dag_run.run_id)
    earlier = earlier_answers(broker, dag_run.dag_id, dag_run.run_id, gates)
    why = stale_reason(record, current, shown, earlier, wall_clock_ms())
    return None if why is None else f"{why} {STALE_ADVICE}"


def closed_request(gate: str, run_id: str) -> str:
    """Why a gate that showed its request already refuses to show one again."""
    return (
        f"This request was closed: gate {gate} of run {run_id} showed its request already, "
        "and a cleared or re-run gate never asks again. Nothing was recorded or applied. "
        "Make a new request (the REST route, the `cursorops` CLI or the Cursors page): "
        "it gets its own plan record, preview and gates."
    )


def answer_ms(when: object) -> int:
    """The answer time of Airflow's event (a datetime, or its ISO text) in epoch ms."""
    if isinstance(when, str):
        when = datetime.fromisoformat(when.replace("Z", "+00:00"))
    if not isinstance(when, datetime):
        raise ValueError(f"The answer carries no time: {when!r}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


class FourEyesApprovalOperator(ApprovalOperator):
    """Approve / Reject, answerable only by a permitted user other than the requester and
    the run's earlier approvers."""

    def __init__(
        self,
        *,
        ordinal: int = 1,
        earlier_gates: Sequence[str] = (),
        response_timeout: timedelta | None = DEFAULT_RESPONSE_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        # Airflow 3.3.2 may fail a gate resumed while the scheduler has not yet processed
        # the end of the workload that parked it (the late "success" reads as a task killed
        # outside Airflow). The retry finds the answer Airflow accepted and acts on it; it
        # never shows the request again (:meth:`_answer_of_earlier_try`).
        kwargs["retries"] = RESUME_RETRIES
        kwargs["retry_delay"] = RESUME_RETRY_DELAY
        super().__init__(
            fail_on_reject=True, response_timeout=response_timeout, defaults=None, **kwargs
        )
        self.ordinal = ordinal
        self.earlier_gates = tuple(earlier_gates)

    def execute(self, context: Context) -> Any:
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from cursorops.airflow.hooks.cursorops import CursorOpsHook
        from cursorops.airflow.steps import run_plan_record

        dag_run = context["dag_run"]
        requester = dag_run.triggering_user_name
        if not requester:
            raise AirflowFailException("The run has no triggering user: nobody to keep apart")
        minute = approval_minute()
        minutes = (context.get("params") or {}).get(TIMEOUT_PARAM)
        if minutes:
            self.response_timeout = minute * float(minutes)
        valid = (context.get("params") or {}).get(VALIDITY_PARAM)
        validity = minute * float(valid) if valid else self.response_timeout
        validity = min(validity or DEFAULT_RESPONSE_TIMEOUT, MAX_VALIDITY)
        hook = CursorOpsHook()
        with hook.broker() as broker:
            record = run_plan_record(broker, context, first=not self.earlier_gates)
            if self.ordinal > record.required_approvals:
                raise AirflowSkipException(
                    f"Plan {record.digest} needs {record.required_approvals} approval(s)"
                )
            shown = shown_by(broker, dag_run.dag_id, dag_run.run_id, self.task_id)
            if shown is not None:
                answered = self._answer_of_earlier_try(broker, context, record, shown)
            else:
                approvers = self._present(broker, context, record, validity)
        if shown is not None:
            if answered is None:
                self._read_airflows_answer(context)
            return self._complete(context, answered, shown)
        self.log.info(
            "Approval %d of %d for plan %s assigned to %s; requester %s",
            self.ordinal,
            record.required_approvals,
            record.digest,
            approvers,
            requester,
        )
        return super().execute(context)

    def _present(
        self, broker: Broker, context: Context, record: PlanRecord, validity: timedelta
    ) -> list[str]:
        """Assign the approval, build its text and record what the gate shows, once per run;
        the approvers."""
        from airflow.sdk.exceptions import AirflowFailException

        from cursorops.airflow.hooks.cursorops import CursorOpsHook
        from cursorops.core.domain.errors import AlreadyExistsError
        from cursorops.core.domain.plans.plan_record import ApprovalRequest
        from cursorops.core.services.broker import wall_clock_ms
        from cursorops.core.services.gating.approval_text import preview_markdown, subject
        from cursorops.core.services.gating.registry import topics_of

        dag_run = context["dag_run"]
        requester = dag_run.triggering_user_name
        hook = CursorOpsHook()
        earlier = earlier_approvers(broker, dag_run.dag_id, dag_run.run_id, self.earlier_gates)
        stale = stale_gate(broker, context, record, self.earlier_gates)
        if stale is not None:
            # Airflow keeps a gate's options as first shown: a stale gate offers only
            # Reject, which closes the request.
            self.options = [self.REJECT]
        topics = topics_of(record)
        approvers = permitted_approvers(
            broker, topics, requester, hook.approver_candidates(), earlier
        )
        if not approvers:
            raise AirflowFailException(
                f"No permitted approver other than {requester}"
                + (f" and {', '.join(earlier)}" if earlier else "")
                + f" may skip on {' and '.join(topics)}: the request cannot be approved"
            )
        self.assigned_users = [{"id": user, "name": user} for user in approvers]
        self.subject = subject(record, self.ordinal)
        self.body = (
            f"{preview_markdown(record, content=False, stale=stale, approved_by=earlier)}\n\n"
            f"**Approvers:** {', '.join(approvers)} (the requester {requester} may not "
            "approve"
            + (f", nor {', '.join(earlier)}, who approved already" if earlier else "")
            + f"). No answer within {_readable(self.response_timeout)} counts as a "
            f"rejection; an approval stays valid for {_readable(validity)}."
        )
        try:
            broker.workflow.record_approval_request(
                ApprovalRequest(
                    digest=record.digest,
                    dag_id=dag_run.dag_id,
                    run_id=dag_run.run_id,
                    gate=self.task_id,
                    body_sha256=body_sha256(self.body),
                    approvers=tuple(approvers),
                    presented_at_ms=wall_clock_ms(),
                    valid_for_ms=int(validity.total_seconds() * 1000),
                    subject=self.subject,
                    body=self.body,
                    try_number=context["ti"].try_number,
                )
            )
        except AlreadyExistsError as exc:
            raise AirflowFailException(closed_request(self.task_id, dag_run.run_id)) from exc
        return approvers

    def _answer_of_earlier_try(
        self, broker: Broker, context: Context, record: PlanRecord, shown: ApprovalRequest
    ) -> dict[str, Any] | None:
        """This gate showed ``shown`` in an earlier try: the answer to it this store recorded,
        as Airflow's event; None when the store has none (Airflow may hold one:
        :meth:`_read_airflows_answer`). A request already closed is refused: the gate never
        asks again."""
        from cursorops.airflow.approval import by_gate

        dag_run = context["dag_run"]
        self._refuse_if_closed(broker, context, record)
        answer = by_gate(broker.workflow.approval_answers(dag_run.dag_id, dag_run.run_id)).get(
            self.task_id
        )
        if answer is None or answer.request != shown:
            return None
        event = answered_event(answer.chosen, answer.responded_by, answer.responded_at_ms)
        self._resumes(context, shown, event)
        return event

    def _read_airflows_answer(self, context: Context) -> NoReturn:
        """Defer to :class:`HeldAnswerTrigger`: the triggerer reads the answer Airflow holds
        for this task instance (a task cannot), and :meth:`resume_held_answer` goes on."""
        from cursorops.airflow.triggers.held_answer import HeldAnswerTrigger

        self.defer(
            trigger=HeldAnswerTrigger(str(context["ti"].id)), method_name="resume_held_answer"
        )

    def resume_held_answer(self, context: Context, event: dict[str, Any]) -> Any:
        """Back from :class:`HeldAnswerTrigger`: complete with the answer Airflow held for the
        request this gate showed in an earlier try. None held (a gate cleared or re-run before
        anyone answered), or the request closed meanwhile: refused, and the gate never asks
        again."""
        from cursorops.airflow.hooks.cursorops import CursorOpsHook
        from cursorops.airflow.steps import run_plan_record
        from cursorops.airflow.triggers.held_answer import HELD

        dag_run = context["dag_run"]
        with CursorOpsHook().broker() as broker:
            record = run_plan_record(broker, context, first=not self.earlier_gates)
            shown = shown_by(broker, dag_run.dag_id, dag_run.run_id, self.task_id)
            held = event.get(HELD)
            if shown is None or held is None:
                self._refuse(broker, context, record)
            self._refuse_if_closed(broker, context, record)
        assert shown is not None and held is not None
        self._resumes(context, shown, held)
        return self._complete(context, held, shown)

    def _refuse_if_closed(self, broker: Broker, context: Context, record: PlanRecord) -> None:
        from cursorops.airflow.closing_record import closing_records

        if closing_records(broker, record):
            self._refuse(broker, context, record)

    def _refuse(self, broker: Broker, context: Context, record: PlanRecord) -> NoReturn:
        from airflow.sdk.exceptions import AirflowFailException

        why = closed_request(self.task_id, context["dag_run"].run_id)
        record_gate_refusal(broker, context, record, self.task_id, why)
        raise AirflowFailException(why)

    def _resumes(self, context: Context, shown: ApprovalRequest, event: dict[str, Any]) -> None:
        self.log.info(
            "Try %s of gate %s resumes the answer given to try %s: %s",
            context["ti"].try_number,
            self.task_id,
            shown.try_number,
            event["chosen_options"],
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Record the answer Airflow resumed the gate with, next to what the gate showed, then
        let the operator act on it (a Reject fails the gate). A timeout records nothing."""
        return self._complete(context, event, None)

    def _complete(
        self, context: Context, event: dict[str, Any], shown: ApprovalRequest | None
    ) -> Any:
        """:meth:`execute_complete` for the answer to ``shown`` (None: what this try showed)."""
        from airflow.providers.standard.exceptions import (
            HITLRejectException,
            HITLTriggerEventError,
        )
        from airflow.sdk.exceptions import AirflowFailException

        try_number = context["ti"].try_number
        if shown is not None and shown.try_number is not None:
            try_number = shown.try_number
        if "error" not in event:
            from cursorops.airflow.hooks.cursorops import CursorOpsHook
            from cursorops.airflow.steps import run_plan_record

            dag_run = context["dag_run"]
            by = (event.get("responded_by_user") or {}).get("id")
            chosen = [str(option) for option in event.get("chosen_options") or []]
            stale = None
            with CursorOpsHook().broker() as broker:
                answer = broker.workflow.record_approval_answer(
                    dag_run.dag_id,
                    dag_run.run_id,
                    self.task_id,
                    try_number,
                    chosen,
                    None if by is None else str(by),
                    answer_ms(event.get("responded_at")),
                )
                if chosen == [self.APPROVE]:
                    # The text Airflow shows cannot change once shown: an Approve given
                    # after the run was re-planned, or an earlier approval expired, is
                    # answered here as stale.
                    record = run_plan_record(broker, context)
                    stale = stale_gate(
                        broker, context, record, self.earlier_gates, answer.request.digest
                    )
                    if stale is not None:
                        stale = f"This Approve cannot apply: {stale}"
                        record_gate_refusal(broker, context, record, self.task_id, stale)
            self.log.info(
                "Answer %s by %s recorded for gate %s",
                event.get("chosen_options"),
                by,
                self.task_id,
            )
            if stale is not None:
                raise AirflowFailException(stale)
        try:
            return super().execute_complete(context, event)
        except (HITLRejectException, HITLTriggerEventError) as exc:
            # A Reject or a timeout is an answer: no retry asks again.
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def _readable(timeout: timedelta | None) -> str:
    """``24 h`` or ``90 min``, as a person reads a timeout (not ``1 day, 0:00:00``); ``100 s``
    when it is no whole number of minutes (a deployment's short :data:`MINUTE_ENV`)."""
    if timeout is None:
        return "the timeout"
    seconds = round(timeout.total_seconds())
    if seconds % 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"
