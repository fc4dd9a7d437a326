"""Redrive a subscription's dead-letter topic: its messages published back to the topic for
that subscription alone (:mod:`cursorops.core.broker.redrive`). Applied at once, or, on a namespace
that requires approval (the topic's or the dead-letter topic's), stored as a plan record and
handed to the ``cursorops_redrive`` workflow's run as the caller (202)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from cursorops.core.errors import InvalidArgumentError
from cursorops.core.gating import Pending, RedriveDeadLetters
from cursorops.rest.approval import ApprovalTextDep, waiting
from cursorops.rest.deps import BrokerDep, CallerDep, RoleDep, RunsDep
from cursorops.rest.models import RedriveRequest, SkipTriggered
from cursorops.rest.paths import SUBSCRIPTION, topic_name
from cursorops.rest.topics import _ERRORS, Namespace, Subscription, Tenant, Topic

router = APIRouter(tags=["persistent topic"])


@router.post(
    SUBSCRIPTION + "/redrive",
    responses={
        **_ERRORS,
        202: {"model": SkipTriggered, "description": "Waiting for an approval in Airflow"},
    },
)
def redrive(
    tenant: Tenant,
    namespace: Namespace,
    topic: Topic,
    subscription: Subscription,
    broker: BrokerDep,
    role: RoleDep,
    caller: CallerDep,
    runs: RunsDep,
    text: ApprovalTextDep,
    body: Annotated[RedriveRequest | None, Body()] = None,
) -> Any:
    """Publish the subscription's dead-lettered messages (``<topic>-<subscription>-DLQ``, or
    ``deadLetterTopic``; those ``predicate`` matches) back to the topic, acknowledged on its
    other subscriptions and on the dead-letter topic's, in one transaction.

    ``preview``: the plan's counts and first messages, nothing changed. Otherwise the
    outcome: every redriven message's dead-letter id and new id, and the audit record's id;
    or, where either topic's namespace requires approval, 202 with the workflow's run.
    """
    asked = body or RedriveRequest()
    name = topic_name(tenant, namespace, topic)
    if name.is_partition:
        raise InvalidArgumentError(
            f"Redrive publishes to the whole topic: use '{name.base}', not one partition"
        )
    if asked.preview:
        plan = broker.plan_redrive(
            role, name, subscription, predicate=asked.predicate, dead_letter=asked.dead_letter_topic
        )
        return plan.preview()
    arguments = RedriveDeadLetters(
        topic=str(name),
        subscription=subscription,
        dead_letter_topic=asked.dead_letter_topic,
        predicate=asked.predicate,
        reason=text.reason,
        ticket=text.ticket,
    )
    result = broker.request("redrive", caller, arguments, runs)
    return waiting(result) if isinstance(result, Pending) else dict(result.outcome)
